"""Runs the `run` steps of a composite action as the GitHub Actions runner does: each with `bash
--noprofile --norc -eo pipefail`, in the workspace, with the runner's variables, the step's `env` (its
`${{ }}` expressions resolved from the inputs, earlier steps' outputs and the runner) and GITHUB_OUTPUT read
back after it. Steps that `uses:` another action are left to the caller."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def load_action() -> dict[str, Any]:
    action: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
    return action


@dataclass
class StepResult:
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, str]


@dataclass
class Runner:
    workspace: Path
    temp: Path
    environment: dict[str, str]  # GITHUB_EVENT_PATH, GITHUB_STEP_SUMMARY and the like
    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)

    def input(self, name: str) -> str:
        declared = load_action()["inputs"][name]
        return self.inputs.get(name, str(declared.get("default", "")))

    def resolve(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            path = match.group(1)
            if path.startswith("inputs."):
                return self.input(path.removeprefix("inputs."))
            if path == "runner.temp":
                return str(self.temp)
            step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", path)
            if step:
                return self.outputs.get(step.group(1), {}).get(step.group(2), "")
            raise AssertionError(f"action.yml: an expression the test runner does not know: {path}")
        return EXPRESSION.sub(value, text)

    def run(self, step: dict[str, Any]) -> StepResult:
        assert "run" in step and step.get("shell") == "bash", step
        assert "${{" not in step["run"], f"step {step.get('id')}: an expression inside `run`"
        output = self.temp / f"output-{step.get('id', 'step')}"
        output.write_text("")
        environment = {**os.environ, **self.environment, "RUNNER_TEMP": str(self.temp),
                       "GITHUB_WORKSPACE": str(self.workspace), "GITHUB_ACTION_PATH": str(ROOT),
                       "GITHUB_OUTPUT": str(output), "GITHUB_PATH": str(self.temp / "path"),
                       "GITHUB_ACTIONS": "true", "CI": "true",
                       **{name: self.resolve(str(value)) for name, value in step.get("env", {}).items()}}
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                              cwd=self.workspace, env=environment, capture_output=True, text=True,
                              timeout=600, check=False)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        if "id" in step:
            self.outputs[step["id"]] = outputs
        return StepResult(done.returncode, done.stdout, done.stderr, outputs)

    def run_steps(self, *ids: str) -> StepResult:
        """The steps IDS in order; the last one's result, or the first that failed."""
        steps = {step.get("id"): step for step in load_action()["runs"]["steps"]}
        result = StepResult(0, "", "", {})
        for step_id in ids:
            result = self.run(steps[step_id])
            if result.returncode != 0:
                return result
        return result
