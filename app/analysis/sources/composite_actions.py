"""Local composite actions: a job step `uses: ./.github/actions/<name>` runs that action's own `runs.steps`.

NVIDIA-NeMo/RL's functional jobs run each test through one shared action (`uses:
./.github/actions/test-template` `with: {script: ${{ matrix.script }}}`): the job's own steps start nothing,
the action's "Run tests" step does. Here the action's steps take the place of the step that uses it, with
the calling step's `env:` beneath their own, and each `${{ inputs.<name> }}` replaced by the `with:` value
as written (or the input's default), so that a matrix expression in it is evaluated for each row as the
job's own steps are. An expression that combines inputs (`inputs.is_unit_test == 'true' && 'unit' ||
'functional'`) is evaluated here when its inputs are literal. An action file is the pull request's content:
read within the workflow bounds. Pure: files come through `read`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.analysis.sources import expressions
from app.analysis.sources.workflow_rows import (
    WorkflowError,
    _mapping,
    _text,
    bounded_yaml,
)

MAX_NESTING = 4  # local actions that use local actions, as deep as this
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_INPUT = re.compile(r"\binputs\.([A-Za-z_][\w-]*)")
_LITERAL = re.compile(r"'(?:[^']|'')*'")


@dataclass(frozen=True)
class JobStep:
    """One step a job runs: its number (`3`, or `3.2` for the second step of the action step 3 uses)."""

    number: str
    step: dict[str, Any]


def job_steps(steps: Any, read: Callable[[str], str] | None, notes: list[str], where: str) -> list[JobStep]:
    """The steps a job runs, each local composite action's steps in place of the step that uses it; an
    action that cannot be read is noted and runs nothing here."""
    if not isinstance(steps, list):
        return []
    found: list[JobStep] = []
    for number, step in enumerate(steps, 1):
        if isinstance(step, dict):
            found += _expand(JobStep(str(number), step), read, notes, where, 0)
    return found


def _expand(job_step: JobStep, read: Callable[[str], str] | None, notes: list[str], where: str,
            depth: int) -> list[JobStep]:
    uses = job_step.step.get("uses")
    if read is None or not isinstance(uses, str) or not uses.startswith("./"):
        return [job_step]
    label = f"{where}:{job_step.number}"
    if depth >= MAX_NESTING:
        notes.append(f"{label}: local actions nested deeper than {MAX_NESTING}: left out")
        return []
    try:
        action = read_action(uses, read)
    except (OSError, WorkflowError) as exc:
        notes.append(f"{label}: {exc}: left out")
        return []
    runs = action.get("runs")
    steps = runs.get("steps") if isinstance(runs, dict) and runs.get("using") == "composite" else None
    if not isinstance(steps, list):
        return []  # a JavaScript or Docker action: nothing it runs is a CI command line of the repository
    inputs = input_values(action.get("inputs"), job_step.step.get("with"))
    caller_env = _mapping(job_step.step.get("env"))
    expanded: list[JobStep] = []
    for number, inner in enumerate(steps, 1):
        if not isinstance(inner, dict):
            continue
        step = {key: substitute(value, inputs) for key, value in inner.items()}
        step["env"] = {**caller_env, **_mapping(step.get("env"))}
        expanded += _expand(JobStep(f"{job_step.number}.{number}", step), read, notes, where, depth + 1)
    return expanded


def read_action(uses: str, read: Callable[[str], str]) -> dict[str, Any]:
    """The action a `uses: ./<dir>` names (its `action.yml` or `action.yaml`), read within the workflow
    bounds. Raises OSError or WorkflowError."""
    directory = uses[2:].strip("/")
    if ".." in directory.split("/"):
        raise WorkflowError(f"{uses}: outside the repository")
    for name in ("action.yml", "action.yaml"):
        try:
            text = read(f"{directory}/{name}")
        except FileNotFoundError:
            continue
        return _parsed(text, f"{directory}/{name}")
    raise FileNotFoundError(f"{directory}/action.yml")


def _parsed(text: str, path: str) -> dict[str, Any]:
    action = bounded_yaml(text, path)
    if not isinstance(action, dict):
        raise WorkflowError(f"{path}: not an action within bounds")
    return action


def input_values(declared: Any, given: Any) -> dict[str, str]:
    """Each input's text: the `with:` value, else its default, else empty (as GitHub gives an input)."""
    values = {str(name): _text(spec.get("default")) if isinstance(spec, dict) else ""
              for name, spec in _mapping(declared).items()}
    values.update({str(name): _text(value) for name, value in _mapping(given).items()})
    return values


def substitute(value: Any, inputs: dict[str, str]) -> Any:
    """A value of the action with its `inputs.*` replaced; strings inside lists and mappings too."""
    if isinstance(value, str):
        return _EXPRESSION.sub(lambda match: _substituted(match.group(1), inputs), value)
    if isinstance(value, list):
        return [substitute(item, inputs) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, inputs) for key, item in value.items()}
    return value


def _substituted(expression: str, inputs: dict[str, str]) -> str:
    """The text an `${{ expression }}` becomes: the input's own text for `${{ inputs.x }}`; otherwise the
    expression with each input inlined (a literal, or the input's one expression in parentheses), evaluated
    when that leaves no name, else left for the row's evaluation."""
    whole = _INPUT.fullmatch(expression.strip())
    if whole is not None:
        return inputs.get(whole.group(1), "")
    inlined, known = _inline(expression, inputs)
    if not known:
        return "${{" + expression + "}}"
    result = expressions.evaluate(inlined, {})
    if result is expressions.UNKNOWN:
        return "${{ " + inlined.strip() + " }}"
    return _text(result)


def _inline(expression: str, inputs: dict[str, str]) -> tuple[str, bool]:
    """The expression with its input names replaced outside its string literals; False when an input's text
    is neither a literal nor one expression."""
    pieces: list[str] = []
    known = True
    position = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal known
        text = inputs.get(match.group(1), "")
        inner = _EXPRESSION.fullmatch(text.strip())
        if inner is not None:
            return f"({inner.group(1).strip()})"
        if "${{" in text:
            known = False
            return match.group(0)
        return "'" + text.replace("'", "''") + "'"

    for literal in _LITERAL.finditer(expression):
        pieces += [_INPUT.sub(replace, expression[position:literal.start()]), literal.group(0)]
        position = literal.end()
    pieces.append(_INPUT.sub(replace, expression[position:]))
    return "".join(pieces), known
