"""Run the real `prtriage` command line as a subprocess, the way a user or CI does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
MILES_POLICY = PROJECT / "tests" / "twin" / "policy.yml"

Report = dict[str, Any]  # a `prtriage check --format json` report
Checker = Callable[[str], tuple[int, Report]]  # the session's `check(variant)` fixture (tests/conftest.py)


@dataclass(frozen=True)
class CliRun:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.stdout.strip(), f"no output from {self.argv}; stderr:\n{self.stderr}"
        return json.loads(self.stdout)

    def describe(self) -> str:
        return f"{' '.join(self.argv)} -> {self.returncode}\nstderr:\n{self.stderr[-4000:]}"


def prtriage(*args: str, cache_dir: Path, timeout: float = 900) -> CliRun:
    """`python -m app.cli ARGS` from the project root, with its own cache directory; any exit status."""
    argv = (sys.executable, "-m", "app.cli", *args, "--cache-dir", str(cache_dir))
    # the session's analysis environments are shared (tests/conftest.py): each is built once
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PRTRIAGE_") or key == "PRTRIAGE_ENV_DIR"}
    done = subprocess.run(argv, cwd=PROJECT, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
    return CliRun(argv, done.returncode, done.stdout, done.stderr)
