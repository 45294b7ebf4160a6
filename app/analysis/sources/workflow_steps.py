"""Suites run by GitHub workflow steps: each `run:` step that starts a CI script, with its environment.

volcengine/verl's e2e workflows list no matrix of suites: each step runs one CI script with variables in front
(`ENGINE=sglang MODE=async bash tests/special_e2e/run_ppo_trainer_megatron.sh`). The step's text is the CI
command, so it is what the recording bash runs. A workflow is a pull request's content: it is read with the
bounds and the expression evaluator of `workflow_rows` (a step whose text or environment needs more than
`${{ matrix.a || 'x' }}` is left out, never guessed). A step that uses a local composite action stands for
the action's steps (`composite_actions`). Pure: no process; files come through the tree.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from app.analysis.core.policy import glob_regex
from app.analysis.core.tree_reading import read_text
from app.analysis.sources.composite_actions import JobStep, job_steps
from app.analysis.sources.recorded import from_launches
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree
from app.analysis.sources.workflow_rows import (
    WorkflowError,
    _literally_false,
    _mapping,
    each_workflow,
    expand_matrix,
    read_workflow,
    render,
    row_env,
    workflow_jobs,
)
from app.analysis.sources.workflow_steps_keys import WorkflowSteps

_WORD = re.compile(r"[^\s;&|()<>`'\"]+")
# A shell script that starts a Python program: `python ${REPO_PATH}/examples/x/train.py ...`, `torchrun ...`
_LAUNCHES_PYTHON = re.compile(
    r"(?m)^[^#\n]*\b(?:python[0-9.]*|torchrun|accelerate\s+launch|deepspeed)\s[^\n]*\.py\b")
_SHELL_SCRIPT = re.compile(r"(?:\$\{?\w+\}?/|\./)?([\w.+-]+(?:/[\w.+-]+)*\.sh)$")
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.S)


@dataclass(frozen=True)
class WorkflowStep:
    """One step to run: its text, the scripts it names, its environment, where it was found."""

    label: str  # `<workflow>:<job>:<step number>`, the capture item's id
    run: str
    scripts: tuple[str, ...]
    env: dict[str, str]

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.run, tuple(sorted(self.env.items()))


@dataclass
class StepListing:
    """The steps of one workflow, the jobs whose `if:` is literally false, and what was left out and why."""

    steps: list[WorkflowStep] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    not_considered: list[str] = field(default_factory=list)  # jobs the policy leaves out that run scripts
    notes: list[str] = field(default_factory=list)


def steps_from_workflow(text: str, path: str, source: WorkflowSteps,
                        read: Callable[[str], str] | None = None) -> StepListing:
    """The `run:` steps naming one of the source's scripts, in the jobs it selects (with `read`, the steps
    of the local composite actions they use too). Raises WorkflowError."""
    jobs, workflow_env = workflow_jobs(text, path)
    listing = StepListing()
    patterns = [glob_regex(g) for g in source.scripts]
    for name, job in jobs.items():
        if not isinstance(job, dict):
            continue
        where = f"{path}:{name}"
        selected = (not source.jobs or name in source.jobs) and name not in source.exclude_jobs
        notes = listing.notes if selected else []  # a job left out says nothing more than that
        steps = _script_steps(job_steps(job.get("steps"), read, notes, where), patterns)
        if not selected:
            if steps and not _literally_false(job.get("if")):  # CI runs the source's scripts there
                listing.not_considered.append(f"{where} (a job the policy leaves out)")
        elif _literally_false(job.get("if")):
            if steps:
                listing.disabled.append(where)
        else:
            _list_job(listing, where, job, workflow_env, steps, patterns, source)
    return listing


def scripts_named(run: str, patterns: list[re.Pattern[str]]) -> tuple[str, ...]:
    """The words of a step's text that are CI scripts of the source (`bash tests/x.sh`, `./tests/x.sh`)."""
    words = (word.removeprefix("./") for word in _WORD.findall(run))
    return tuple(dict.fromkeys(w for w in words if any(p.fullmatch(w) for p in patterns)))


def _script_steps(steps: list[JobStep], patterns: list[re.Pattern[str]]) -> list[JobStep]:
    """The job's `run:` steps that name a script of the source, or may once their expressions are evaluated
    (`bash tests/functional/${{ matrix.script }}.sh`: which script is the row's)."""
    return [job_step for job_step in steps if isinstance(job_step.step.get("run"), str)
            and (scripts_named(job_step.step["run"], patterns) or _EXPRESSION.search(job_step.step["run"]))]


def _list_job(listing: StepListing, where: str, job: dict[str, Any], workflow_env: dict[str, Any],
              steps: list[JobStep], patterns: list[re.Pattern[str]], source: WorkflowSteps) -> None:
    if not steps:
        return
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    combinations = [{}] if matrix is None else expand_matrix(matrix)
    if not combinations:
        listing.notes.append(f"{where}: matrix is not a list of rows: its steps are left out")
        return
    for row, combination in enumerate(combinations, 1):
        suffix = f"[{row}]" if matrix is not None else ""
        for job_step in steps:
            label = f"{where}{suffix}:{job_step.number}"
            template = {**workflow_env, **_mapping(job.get("env")), **_mapping(job_step.step.get("env"))}
            env, unknown = row_env(template, combination, source.env)
            run = render(job_step.step["run"], combination)
            if run is None:
                listing.notes.append(f"{label}: its text has an expression not evaluated: left out")
                continue
            scripts = scripts_named(run, patterns)
            if not scripts:
                continue
            if unknown:
                listing.notes.append(f"{label}: env {', '.join(unknown)} not evaluated: left out")
            listing.steps.append(WorkflowStep(label=label, run=run, scripts=scripts, env=env))


def list_steps(files: Iterable[str], read: Callable[[str], str],
               source: WorkflowSteps) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """The capture items of a workflow_steps source over the repository's `files` (`read` gives a file's
    text, raising OSError or WorkflowError): one per distinct step text and environment; the labels of
    jobs whose `if:` is literally false; and of those running the source's scripts the policy leaves out."""
    items: dict[tuple[Any, ...], dict[str, Any]] = {}
    disabled: list[str] = []
    not_considered: list[str] = []
    for listing in each_workflow(source.workflows, files, read, "workflow steps",
                                 lambda text, path: steps_from_workflow(text, path, source, read)):
        disabled += listing.disabled
        not_considered += listing.not_considered
        for step in listing.steps:  # the same command in several jobs is one CI suite
            items.setdefault(step.key(), {"id": step.label, "script": step.label, "args": [],
                                          "env": dict(step.env), "shell": step.run,
                                          "scripts": list(step.scripts)})
    return list(items.values()), disabled, not_considered


def list_items(source: WorkflowSteps, tree: SourceTree, where: str) -> Listing:
    items, disabled, not_considered = list_steps(tree.paths(), lambda path: read_workflow(tree, path), source)
    return Listing(items=tuple(items), disabled=tuple(disabled), not_considered=tuple(not_considered))


def detect(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """`prtriage init`: workflows whose `run:` steps start a shell script of the tree that launches a Python
    program (`bash tests/e2e/run.sh config`); the scripts' directories are the source's globs."""
    workflows: list[str] = []
    scripts: set[str] = set()
    for workflow in sorted((root / ".github" / "workflows").glob("*.y*ml")):
        found = set(_launching_scripts(root, workflow))
        if found:
            workflows.append(f".github/workflows/{workflow.name}")
            scripts |= found
    if not scripts:
        return
    globs = sorted({_script_glob(path) for path in scripts})
    source = {"kind": "workflow_steps", "workflows": workflows, "scripts": globs, **copy.deepcopy(recording)}
    yield source, (f"{len(workflows)} workflows run {len(scripts)} shell scripts of the tree that launch "
                   "Python programs: each step is run by the recording bash as CI runs it")


def _launching_scripts(root: Path, workflow: Path) -> Iterator[str]:
    """The tree's shell scripts a workflow's `run:` steps name that launch a Python program."""
    try:
        jobs, _ = workflow_jobs(read_text(workflow), workflow.name)
    except WorkflowError:
        return
    for job in jobs.values():
        steps = job.get("steps") if isinstance(job, dict) else None
        for step in steps if isinstance(steps, list) else []:
            run = step.get("run") if isinstance(step, dict) else None
            for word in _WORD.findall(run) if isinstance(run, str) else []:
                match = _SHELL_SCRIPT.fullmatch(word)
                path = root / match.group(1) if match else None
                if path is not None and path.is_file() and _LAUNCHES_PYTHON.search(read_text(path)):
                    yield match.group(1)  # type: ignore[union-attr]


def _script_glob(script: str) -> str:
    """`tests/e2e_tests/agent/x/run.sh` -> `tests/e2e_tests/**/*.sh`: the scripts beside it and beneath its
    area, so a test added next to them is found too."""
    parts = PurePosixPath(script).parts
    if len(parts) <= 2:
        return f"{parts[0]}/*.sh" if len(parts) == 2 else "*.sh"
    return f"{parts[0]}/{parts[1]}/**/*.sh"


KIND = SourceKind(WorkflowSteps, list_items, from_launches, detect)
