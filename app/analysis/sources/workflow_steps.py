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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from app.analysis.core.model import CaptureFailure
from app.analysis.core.policy import glob_regex
from app.analysis.core.tree_reading import read_text
from app.analysis.sources.composite_actions import JobStep, job_steps
from app.analysis.sources.needs_outputs import MatrixReference, OutputStep, matrix_reference
from app.analysis.sources.producers import NoProducer, produced_rows, producer_item
from app.analysis.sources.recorded import from_launches
from app.analysis.sources.source_kind import CaptureItem, Listing, ScriptReport, SourceKind, SourceTree
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
    left_out: list[str] = field(default_factory=list)  # `<label>: why` of steps CI runs, not run here
    notes: list[str] = field(default_factory=list)  # `<label>: what` of the rest (a variable not known)


def steps_from_workflow(text: str, path: str, source: WorkflowSteps, read: Callable[[str], str] | None = None,
                        computed: Mapping[str, list[dict[str, Any]] | str] | None = None) -> StepListing:
    """The `run:` steps naming one of the source's scripts, in the jobs it selects (with `read`, the steps
    of the local composite actions they use too). A job whose matrix another job computes takes its rows
    from COMPUTED (by `<workflow>:<job>`: the rows, or why there are none). Raises WorkflowError."""
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
            computes = matrix_reference(job) and any(_may_run_scripts(step, patterns) for step in steps)
            rows = _computed_rows(job, where, computed or {}, listing) if computes else None
            if rows != []:
                _list_job(listing, where, job, workflow_env, steps, patterns, source, rows)
    return listing


def _computed_rows(job: dict[str, Any], where: str, computed: Mapping[str, list[dict[str, Any]] | str],
                   listing: StepListing) -> list[dict[str, Any]]:
    """The rows of a job whose matrix another job computes, as its producing job gave them; none, with the
    note saying why, when it gave none here."""
    rows = computed.get(where, "its producing job did not run")
    if isinstance(rows, str):
        reference = matrix_reference(job)
        assert reference is not None
        listing.left_out.append(f"{where}: matrix from {reference.job}'s output {reference.output} not "
                                f"computed ({rows}): its steps are left out")
        return []
    return rows


def scripts_named(run: str, patterns: list[re.Pattern[str]]) -> tuple[str, ...]:
    """The words of a step's text that are CI scripts of the source (`bash tests/x.sh`, `./tests/x.sh`)."""
    words = (word.removeprefix("./") for word in _WORD.findall(run))
    return tuple(dict.fromkeys(w for w in words if any(p.fullmatch(w) for p in patterns)))


def _script_steps(steps: list[JobStep], patterns: list[re.Pattern[str]]) -> list[JobStep]:
    """The job's `run:` steps that name a script of the source, or may once their expressions are evaluated
    (`bash tests/functional/${{ matrix.script }}.sh`: which script is the row's)."""
    return [job_step for job_step in steps if isinstance(job_step.step.get("run"), str)
            and (scripts_named(job_step.step["run"], patterns) or _EXPRESSION.search(job_step.step["run"]))]


def _may_run_scripts(job_step: JobStep, patterns: list[re.Pattern[str]]) -> bool:
    """A step that names a script of the source, or may once its expressions are evaluated (`bash
    tests/functional/${{ matrix.script }}.sh`): one CI runs that is not run here is said in the health, not
    only logged. A step that only names something after the matrix (a runner, an instance) is not."""
    return bool(scripts_named(_EXPRESSION.sub("x", job_step.step["run"]), patterns))


def _list_job(listing: StepListing, where: str, job: dict[str, Any], workflow_env: dict[str, Any],
              steps: list[JobStep], patterns: list[re.Pattern[str]], source: WorkflowSteps,
              computed: list[dict[str, Any]] | None) -> None:
    if not steps:
        return
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    combinations = computed if computed is not None else [{}] if matrix is None else expand_matrix(matrix)
    if not combinations:
        lost = listing.left_out if any(_may_run_scripts(step, patterns) for step in steps) else listing.notes
        lost.append(f"{where}: matrix is not a list of rows: its steps are left out")
        return
    for row, combination in enumerate(combinations, 1):
        suffix = f"[{row}]" if matrix is not None else ""
        for job_step in steps:
            label = f"{where}{suffix}:{job_step.number}"
            template = {**workflow_env, **_mapping(job.get("env")), **_mapping(job_step.step.get("env"))}
            env, unknown = row_env(template, combination, source.env)
            run = render(job_step.step["run"], combination)
            if run is None:
                lost = listing.left_out if _may_run_scripts(job_step, patterns) else listing.notes
                lost.append(f"{label}: its text has an expression not evaluated: left out")
                continue
            scripts = scripts_named(run, patterns)
            if not scripts:
                continue
            if unknown:
                listing.notes.append(f"{label}: env {', '.join(unknown)} not evaluated: left unset")
            listing.steps.append(WorkflowStep(label=label, run=run, scripts=scripts, env=env))


def list_steps(files: Iterable[str], read: Callable[[str], str], source: WorkflowSteps,
               computed: Mapping[str, list[dict[str, Any]] | str] | None = None) -> Listing:
    """The capture items of a workflow_steps source over the repository's `files` (`read` gives a file's
    text, raising OSError or WorkflowError): one per distinct step text and environment; the labels of
    jobs whose `if:` is literally false, and of those running the source's scripts the policy leaves out;
    what was left out and why (a step whose text is not known here, a matrix not computed), as failures:
    never silent. COMPUTED: the rows of jobs whose matrix another job computes (`steps_from_workflow`)."""
    items: dict[tuple[Any, ...], dict[str, Any]] = {}
    disabled: list[str] = []
    not_considered: list[str] = []
    left_out: list[CaptureFailure] = []
    for listing in each_workflow(source.workflows, files, read, "workflow steps",
                                 lambda text, path: steps_from_workflow(text, path, source, read, computed)):
        disabled += listing.disabled
        not_considered += listing.not_considered
        left_out += [CaptureFailure(*note.partition(": ")[::2]) for note in listing.left_out]
        for step in listing.steps:  # the same command in several jobs is one CI suite
            items.setdefault(step.key(), {"id": step.label, "script": step.label, "args": [],
                                          "env": dict(step.env), "shell": step.run,
                                          "scripts": list(step.scripts)})
    return Listing(items=tuple(items.values()), disabled=tuple(disabled),
                   not_considered=tuple(not_considered), failed=tuple(dict.fromkeys(left_out)))


def list_items(source: WorkflowSteps, tree: SourceTree, where: str) -> Listing:
    return list_steps(tree.paths(), lambda path: read_workflow(tree, path), source)


def produce(source: WorkflowSteps, tree: SourceTree, where: str) -> tuple[CaptureItem, ...]:
    """The producing jobs of the selected jobs whose matrix another job computes, each once."""
    items: dict[str, CaptureItem] = {}
    for _, planned in _producers(source, tree):
        if not isinstance(planned, str):
            items.setdefault(planned[0]["id"], planned[0])
    return tuple(items.values())


def list_produced(source: WorkflowSteps, tree: SourceTree, where: str,
                  reports: Sequence[ScriptReport]) -> Listing:
    """The steps, the rows of computed matrices from their producing jobs' reports."""
    return list_steps(tree.paths(), lambda path: read_workflow(tree, path), source,
                      produced_matrices(source, tree, reports))


def produced_matrices(source: WorkflowSteps, tree: SourceTree,
                      reports: Sequence[ScriptReport]) -> dict[str, list[dict[str, Any]] | str]:
    """By `<workflow>:<job>`, the rows of each selected job whose matrix another job computes, or why none."""
    found: dict[str, list[dict[str, Any]] | str] = {}
    for where, planned in _producers(source, tree):
        try:
            if isinstance(planned, str):
                raise NoProducer(planned)
            item, step, reference, matrix = planned
            found[where] = produced_rows(item, step, reference, matrix, reports)
        except NoProducer as why:
            found[where] = str(why)
    return found


Planned = tuple[CaptureItem, OutputStep, MatrixReference, Any]


def _producers(source: WorkflowSteps, tree: SourceTree) -> Iterator[tuple[str, Planned | str]]:
    """(`<workflow>:<job>`, its producing job's plan or why there is none) of each job the source selects
    whose matrix another job computes and whose steps may run the source's scripts."""
    def read(path: str) -> str:
        return read_workflow(tree, path)

    def plans(text: str, path: str) -> _Plans:
        jobs, workflow_env = workflow_jobs(text, path)
        found = _Plans()
        for name, job in jobs.items():
            reference = matrix_reference(job)
            if reference is None or not isinstance(job, dict) or name in source.exclude_jobs \
                    or (source.jobs and name not in source.jobs) or _literally_false(job.get("if")):
                continue
            steps = job_steps(job.get("steps"), read, [], name)
            if not any(_may_run_scripts(step, patterns) for step in _script_steps(steps, patterns)):
                continue  # as steps_from_workflow decides: a job running none of the source's scripts
            try:
                item, step = producer_item(path, jobs, workflow_env, reference, source.github, read)
                found.plans.append((f"{path}:{name}", (item, step, reference, job["strategy"]["matrix"])))
            except NoProducer as why:
                found.plans.append((f"{path}:{name}", str(why)))
        return found

    patterns = [glob_regex(g) for g in source.scripts]
    for listing in each_workflow(source.workflows, tree.paths(), read, "computed matrices", plans):
        yield from listing.plans


@dataclass
class _Plans:
    plans: list[tuple[str, Planned | str]] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)  # what each_workflow reads of a listing
    notes: list[str] = field(default_factory=list)


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


KIND = SourceKind(WorkflowSteps, list_items, from_launches, detect, produce=produce,
                  list_produced=list_produced)
