"""The job that computes another job's matrix, run as GitHub runs it: its `run:` steps up to the one behind
the output (`fromJSON(needs.<job>.outputs.<x>)` in the consumer's `strategy.matrix`), with the `github`
context a source gives and every other context empty, then the rows the output's JSON makes of the
consumer's matrix. Shared by the kinds whose rows another job computes (`computed_matrix`: the rows are
scripts; `workflow_steps` and `pytest_launches`: the rows are the values a job's steps read). Pure: files
come through the caller's `read`, the producing job's outputs through its capture report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from app.analysis.sources import expressions
from app.analysis.sources.composite_actions import JobStep, job_steps
from app.analysis.sources.needs_outputs import MatrixReference, OutputStep, output_step
from app.analysis.sources.source_kind import CaptureItem, ScriptReport
from app.analysis.sources.workflow_rows import _mapping, expand_matrix, render_with

# Contexts a producing job of a push reads as null here: no dispatch inputs, no repository variables or
# secrets, no outputs of the steps and jobs not run (`uses:` steps, other jobs).
EMPTY_CONTEXTS = ("inputs", "vars", "secrets", "steps", "needs")
RUNNER_ENV = {"CI": "true", "GITHUB_ACTIONS": "true", "RUNNER_OS": "Linux"}
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_BASH = re.compile(r"^(bash|sh)\b")


class NoProducer(Exception):
    """Why a computed matrix has no rows here: the message says it; `job` names the producer when known."""

    def __init__(self, reason: str, job: str | None = None) -> None:
        super().__init__(reason)
        self.job = job


def producer_item(workflow: str, jobs: dict[str, Any], workflow_env: dict[str, Any],
                  reference: MatrixReference, github: dict[str, str],
                  read: Callable[[str], str]) -> tuple[CaptureItem, OutputStep]:
    """The capture item that runs the producing job of REFERENCE (id `<workflow>:<job>`), and its step
    behind the output. Raises NoProducer."""
    found = output_step(jobs, reference)
    if isinstance(found, str):
        raise NoProducer(found, reference.job)
    names = github_names(github)
    producer = jobs[reference.job]
    env = {**RUNNER_ENV, **{f"GITHUB_{name.removeprefix('github.').upper()}": v for name, v in names.items()},
           **_rendered_env({**workflow_env, **_mapping(producer.get("env"))}, names)}
    steps = producing_steps(job_steps(producer.get("steps"), read, [], f"{workflow}:{reference.job}"),
                            found.step, names)
    if isinstance(steps, str):
        raise NoProducer(steps, reference.job)
    item = {"id": f"{workflow}:{reference.job}", "script": f"{workflow}:{reference.job}", "args": [],
            "env": env, "steps": steps}
    return item, found


def produced_rows(item: CaptureItem, step: OutputStep, reference: MatrixReference, matrix: Any,
                  reports: Sequence[ScriptReport]) -> list[dict[str, Any]]:
    """The rows GitHub runs for the consumer's MATRIX, with the output the producing ITEM's report gives in
    place. Raises NoProducer."""
    report = next((r for r in reports if r.script == item["id"]), None)
    if report is None or report.status != "captured":
        raise NoProducer((report.reason or "failed") if report else "not run", reference.job)
    text = report.outputs.get(step.output)
    if not text:
        raise NoProducer(f"step {step.step} wrote no {step.output} to $GITHUB_OUTPUT", reference.job)
    try:
        return combinations(reference, matrix, json.loads(text))
    except ValueError as exc:
        raise NoProducer(f"{step.output}: {exc}", reference.job) from None


def combinations(reference: MatrixReference, matrix: Any, value: Any) -> list[dict[str, Any]]:
    """The rows GitHub runs for MATRIX with the output's VALUE in place. Raises ValueError."""
    if reference.axis is None:
        rows = value
    elif isinstance(matrix, dict) and isinstance(value, list):
        rows = {**matrix, reference.axis: value}
    else:
        raise ValueError(f"not a list of values for matrix.{reference.axis}")
    found = expand_matrix(rows)
    if not found:
        raise ValueError("not a matrix of rows, or an empty one")
    return found


def github_names(github: dict[str, str]) -> dict[str, str]:
    """The `github.*` names the source gives, `ref_name` from `ref` when it gives none."""
    names = {f"github.{key}": value for key, value in github.items()}
    names.setdefault("github.ref_name", github.get("ref", "").rsplit("/", 1)[-1])
    return names


def producing_steps(steps: list[JobStep], wanted: str, names: dict[str, str]) -> list[dict[str, Any]] | str:
    """The `run:` steps up to the one with id WANTED, each as {name, run, env} with its expressions
    evaluated; a step whose `if:` is false here is left out, an earlier step whose text is not known too.
    Why not, when the wanted step cannot run."""
    runs: list[dict[str, Any]] = []
    for job_step in steps:
        step = job_step.step
        name = str(step.get("id") or step.get("name") or job_step.number)
        is_wanted = step.get("id") == wanted
        if not _runs(step.get("if"), names):
            if is_wanted:
                return f"step {wanted}'s `if:` is false for a {names.get('github.event_name')} to " \
                       f"{names.get('github.ref')}"
            continue
        run = _render(step.get("run"), names) if isinstance(step.get("run"), str) else None
        shell = step.get("shell")
        if run is None or (shell is not None and not _BASH.match(str(shell))):
            if is_wanted:
                return f"step {wanted} is not a bash `run:` step whose text is known here"
            continue
        runs.append({"name": name, "run": run, "env": _rendered_env(_mapping(step.get("env")), names)})
        if is_wanted:
            return runs
    return f"no step {wanted} in the producing job"


def _runs(condition: Any, names: dict[str, str]) -> bool:
    """Whether a step's `if:` lets it run; one not evaluated here (`always()`, `hashFiles`) does."""
    if condition is None:
        return True
    text = str(condition).strip()
    whole = _EXPRESSION.fullmatch(text)
    value = expressions.evaluate(whole.group(1) if whole else text, names, EMPTY_CONTEXTS)
    return value is expressions.UNKNOWN or expressions.truthy(value)


def _render(value: Any, names: dict[str, str]) -> str | None:
    """A value with its `${{ }}` evaluated; None when one is not known here."""
    return render_with(value, lambda expression: expressions.evaluate(expression, names, EMPTY_CONTEXTS))


def _rendered_env(env: dict[str, Any], names: dict[str, str]) -> dict[str, str]:
    """The variables whose values are known here (one that is not is left unset)."""
    rendered = {str(name): _render(value, names) for name, value in env.items()}
    return {name: value for name, value in rendered.items() if value is not None}
