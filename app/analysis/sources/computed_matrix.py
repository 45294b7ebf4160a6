"""The computed_matrix kind: the rows of a job whose matrix another job computes, from that job's own steps.

NVIDIA-NeMo/RL's functional jobs take their matrix from `fromJSON(needs.pre-flight.outputs.
h100_functional_test_scripts)`: the pre-flight job's `evaluate` step runs `bash .github/scripts/plan-tests.sh`
(a `find` over `tests/functional/L1_Functional*.sh`, joined by `jq`) and writes the list to $GITHUB_OUTPUT.
Each row runs `bash tests/functional/${{ matrix.script }}.sh` in the shared composite action. Here the
producing job's `run:` steps, up to the one behind the output, run first in the sandbox (`produce`: the
harness's `produce.py`, with the `github` context of the source's keys, no network, no secrets), the rows are
the output's JSON, and each row's script is an item run as CI runs it (`command`, `bash {script}`), its
launches recorded. When the producing steps give no matrix here, the rows are the scripts the source's
`scripts` globs match, and the health says so ("matrix from <job> not computed: <reason>").

Pure: files come through the tree, the producing job's outputs through its capture report.
"""

from __future__ import annotations

import copy
import posixpath
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.analysis.core.model import CaptureFailure
from app.analysis.core.policy import path_matches
from app.analysis.core.tree_reading import read_text
from app.analysis.sources import matrix_scripts
from app.analysis.sources.composite_actions import job_steps
from app.analysis.sources.computed_matrix_keys import ComputedMatrix
from app.analysis.sources.needs_outputs import MatrixReference, OutputStep, matrix_reference, output_step
from app.analysis.sources.producers import NoProducer, produced_rows, producer_item
from app.analysis.sources.recorded import from_launches
from app.analysis.sources.source_kind import CaptureItem, Listing, ScriptReport, SourceKind, SourceTree
from app.analysis.sources.workflow_rows import (
    WorkflowError,
    _text,
    read_workflow,
    tree_workflows,
    workflow_jobs,
)

_TEMPLATED = re.compile(r"(?<![\w./-])(?:\./)?([\w./-]*)\$\{\{\s*matrix\.([\w-]+)\s*\}\}([\w.-]*\.sh)"
                        r"(?![\w.-])")


@dataclass(frozen=True)
class Template:
    """A consuming step's script path through a matrix value: `<prefix>${{ matrix.<axis> }}<suffix>`."""

    prefix: str
    axis: str
    suffix: str

    def path(self, value: Any) -> str:
        return posixpath.normpath(f"{self.prefix}{_text(value)}{self.suffix}")


@dataclass(frozen=True)
class Plan:
    """What the source runs and reads: the producing job (one capture item), the output behind the matrix,
    the consuming job's matrix and the script paths its steps build from a row."""

    reference: MatrixReference
    step: OutputStep
    item: CaptureItem
    matrix: Any
    templates: tuple[Template, ...]


def plan(source: ComputedMatrix, tree: SourceTree, name: str) -> Plan:
    """The plan of the source's job NAME over the tree. Raises NoProducer."""
    def read(path: str) -> str:
        return read_workflow(tree, path)

    try:
        jobs, workflow_env = workflow_jobs(read(source.workflow), source.workflow)
    except (OSError, WorkflowError) as exc:
        raise NoProducer(f"{source.workflow} not read: {exc}") from None
    job = jobs.get(name)
    reference = matrix_reference(job)
    if reference is None or not isinstance(job, dict):
        raise NoProducer(f"{source.workflow}:{name} has no matrix another job computes")
    found = output_step(jobs, reference)
    if isinstance(found, str):
        raise NoProducer(found, reference.job)
    templates = consuming_templates(job, read, f"{source.workflow}:{name}")
    if not templates:
        raise NoProducer(f"no step of {name} runs `<dir>/${{{{ matrix.x }}}}.sh`", reference.job)
    item, step = producer_item(source.workflow, jobs, workflow_env, reference, source.github, read)
    return Plan(reference, step, item, job["strategy"]["matrix"], templates)  # as matrix_reference read it


def consuming_templates(job: Any, read: Callable[[str], str], where: str) -> tuple[Template, ...]:
    """The script paths the consuming job's `run:` steps (local composite actions expanded) build from a
    matrix value."""
    found: dict[Template, None] = {}
    for job_step in job_steps(job.get("steps") if isinstance(job, dict) else None, read, [], where):
        run = job_step.step.get("run")
        for match in _TEMPLATED.finditer(run if isinstance(run, str) else ""):
            found[Template(match.group(1), match.group(2), match.group(3))] = None
    return tuple(found)


def produce(source: ComputedMatrix, tree: SourceTree, where: str) -> tuple[CaptureItem, ...]:
    """The producing jobs of the source's jobs, each once."""
    items: dict[str, CaptureItem] = {}
    for name in source.jobs:
        try:
            found = plan(source, tree, name)
        except NoProducer:
            continue  # list_produced says why
        items.setdefault(found.item["id"], found.item)
    return tuple(items.values())


def list_produced(source: ComputedMatrix, tree: SourceTree, where: str,
                  reports: Sequence[ScriptReport]) -> Listing:
    """The scripts of the rows the producing jobs' outputs list, each once; for a job whose producing job
    gives none, the `scripts` globs' scripts, with the note saying why."""
    items: dict[str, CaptureItem] = {}
    notes: list[CaptureFailure] = []
    paths = set(tree.paths())
    for name in source.jobs:
        try:
            scripts = _rows(plan(source, tree, name), reports, paths)
        except NoProducer as why:
            scripts = [item["script"] for item in list_items(source, tree, where).items]
            note = _fallback_note(source, why, len(scripts))
            notes.append(CaptureFailure(f"{source.workflow}:{name}", note))
        for script in scripts:
            if script in paths:
                items.setdefault(script, {"id": script, "script": script})
            else:
                notes.append(CaptureFailure(script, "a row of the computed matrix names it: no such file"))
    return Listing(items=tuple(items.values()), failed=tuple(dict.fromkeys(notes)))


def _rows(found: Plan, reports: Sequence[ScriptReport], paths: set[str]) -> list[str]:
    """The script paths of the rows the producing job's report gives, when one of them is a file of the
    tree (PATHS). Raises NoProducer."""
    rows = produced_rows(found.item, found.step, found.reference, found.matrix, reports)
    scripts = [template.path(row[template.axis]) for row in rows for template in found.templates
               if template.axis in row]
    if not set(scripts) & paths:  # the step's paths are read otherwise than this source reads them
        raise NoProducer(f"its rows name no script of the tree ({', '.join(scripts[:3])} ...)",
                         found.reference.job)
    return scripts


def list_items(source: ComputedMatrix, tree: SourceTree, where: str) -> Listing:
    """The scripts the `scripts` globs match: what is keyed in the cache (the producing job's output
    follows from the tree), and the rows when the producing job does not run."""
    return Listing(items=tuple({"id": path, "script": path} for path in _scripts(source, tree)))


def _scripts(source: ComputedMatrix, tree: SourceTree) -> list[str]:
    return sorted(path for path in tree.paths() if any(path_matches(path, g) for g in source.scripts))


def _fallback_note(source: ComputedMatrix, why: NoProducer, scripts: int) -> str:
    globs = ", ".join(source.scripts) or "none"
    return (f"matrix from {why.job or 'another job'} not computed: {why}; its rows are the {scripts} scripts "
            f"the source's globs match ({globs})")


def detect(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """`prtriage init`: each job whose matrix another job's step computes and whose steps run a script
    through a matrix value; its `scripts` are the glob reading `matrix_scripts` makes of that path."""
    found: dict[tuple[str, tuple[Template, ...]], list[tuple[str, MatrixReference, OutputStep]]] = {}
    for workflow, jobs, name, reference, step in computed_jobs(root):
        templates = consuming_templates(jobs[name], lambda path: _read(root, path), f"{workflow}:{name}")
        if templates:
            found.setdefault((workflow, templates), []).append((name, reference, step))
    for (workflow, templates), consumers in found.items():
        name, reference, step = consumers[0]
        scripts: list[str] = []
        for template in templates:
            matched, roots = matrix_scripts.outermost(root, f"{template.prefix}*{template.suffix}")
            scripts += matrix_scripts.as_globs(f"{template.prefix}*{template.suffix}", matched, roots) \
                if roots else []
        source = {"kind": "computed_matrix", "workflow": workflow, "jobs": [job for job, _, _ in consumers],
                  "scripts": scripts, "command": ["bash", "{script}"], **copy.deepcopy(recording)}
        more = f" (and {len(consumers) - 1} more jobs)" if len(consumers) > 1 else ""
        path = f"{templates[0].prefix}${{{{ matrix.{templates[0].axis} }}}}{templates[0].suffix}"
        yield source, (f"{workflow}:{name}{more} runs {path} for each row of {reference.job}'s output "
                       f"{reference.output} (its step {step.step}): that step runs first in the sandbox, "
                       "each row's script then runs in the recording bash")


def computed_jobs(root: Path) -> Iterator[tuple[str, dict[str, Any], str, MatrixReference, OutputStep]]:
    """Each job of the tree's workflows whose matrix a step of another job computes."""
    for workflow, jobs in tree_workflows(root):
        for name, job in jobs.items():
            reference = matrix_reference(job)
            step = output_step(jobs, reference) if reference is not None else None
            if reference is not None and isinstance(step, OutputStep):
                yield workflow, jobs, name, reference, step


def _read(root: Path, path: str) -> str:
    if not (root / path).is_file():
        raise FileNotFoundError(path)
    return read_text(root / path)


KIND = SourceKind(ComputedMatrix, list_items, from_launches, detect, produce=produce,
                  list_produced=list_produced)
