"""Suites listed in GitHub workflow matrices: each row of a job's `strategy.matrix` as a CI script to run,
with the row's arguments and the job's environment.

A workflow file is a pull request's content: it arrives as bounded text, is read with `yaml.safe_load`, its
matrices are expanded only up to a bound, and the expressions evaluated are those over the row's matrix
fields and literals, with GitHub's operators and pure functions (`${{ matrix.a.b || 'default' }}`,
`${{ matrix.variant == 'sglang' && 'vllm' || 'sglang' }}`: `expressions`). Any other context (`github.*`,
`secrets.*`) is not evaluated: a variable whose value needs it is left out. Pure: no file, no process.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, TypeVar

import yaml

from app.analysis.core.policy import path_matches
from app.analysis.core.tree_reading import read_text
from app.analysis.sources import expressions
from app.analysis.sources.recorded import from_launches
from app.analysis.sources.source_kind import CaptureItem, Listing, SourceKind, SourceTree
from app.analysis.sources.workflow_rows_keys import WorkflowRows

MAX_WORKFLOW_BYTES = 1_000_000
MAX_ROWS_PER_JOB = 256  # GitHub's own limit of jobs one matrix may generate
# Values once YAML aliases are expanded: a few hundred bytes of nested anchors make a "billion laughs".
MAX_VALUES = 200_000
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
log = logging.getLogger(__name__)


class WorkflowError(Exception):
    """A workflow file that cannot be read as a mapping of jobs."""


@dataclass(frozen=True)
class WorkflowRow:
    """One matrix row: the CI script it runs, the words after it, its environment, where it was found."""

    script: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    job: str

    def key(self) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]:
        return self.script, self.args, tuple(sorted(self.env.items()))


@dataclass
class WorkflowListing:
    """The rows of one workflow, the jobs left out with why, and variables left out of the env."""

    rows: list[WorkflowRow] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)  # "<workflow>:<job>" whose `if:` is literally false
    notes: list[str] = field(default_factory=list)


def rows_from_workflow(text: str, path: str, source: WorkflowRows) -> WorkflowListing:
    """The matrix rows of the jobs `source` selects in one workflow file. Raises WorkflowError."""
    jobs, workflow_env = workflow_jobs(text, path)
    listing = WorkflowListing()
    for name, job in jobs.items():
        if not isinstance(job, dict) or not _selected(str(name), source):
            continue
        _list_job(listing, f"{path}:{name}", job, workflow_env, source)
    return listing


def workflow_jobs(text: str, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A workflow file's jobs by id and its top-level `env`, read within bounds (size, depth, values once
    aliases are expanded: the file is a pull request's). Raises WorkflowError."""
    workflow = bounded_yaml(text, path)
    jobs = workflow.get("jobs") if isinstance(workflow, dict) else None
    if not isinstance(jobs, dict):
        raise WorkflowError(f"{path}: no `jobs` mapping")
    return {str(k): v for k, v in jobs.items()}, _mapping(workflow.get("env"))


def tree_workflows(root: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each workflow file of ROOT's `.github/workflows` with its jobs by id (`workflow_jobs`), by its path in
    the tree; a file that cannot be read as one is skipped (it gives CI no job either)."""
    for file in sorted((root / ".github" / "workflows").glob("*.y*ml")):
        path = f".github/workflows/{file.name}"
        try:
            if file.stat().st_size > MAX_WORKFLOW_BYTES:  # not read at all: the file is a pull request's
                continue
            jobs, _ = workflow_jobs(read_text(file), path)
        except (OSError, WorkflowError):
            continue
        yield path, jobs



def bounded_yaml(text: str, path: str) -> Any:
    """A workflow or action file's YAML, read within bounds (size, depth, values once aliases are expanded:
    the file is a pull request's). Raises WorkflowError."""
    if len(text.encode()) > MAX_WORKFLOW_BYTES:
        raise WorkflowError(f"{path}: larger than {MAX_WORKFLOW_BYTES} bytes")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkflowError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise WorkflowError(f"{path}: nested too deeply") from None
    if not _within_bound(document):
        raise WorkflowError(f"{path}: more than {MAX_VALUES} values once its aliases are expanded")
    return document

def _within_bound(document: Any) -> bool:
    """Whether walking the document, aliases expanded, visits at most MAX_VALUES values (a cycle never is)."""
    stack, visited = [document], 0
    while stack:
        value = stack.pop()
        visited += 1
        if visited > MAX_VALUES:
            return False
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return True


def _selected(job: str, source: WorkflowRows) -> bool:
    return (not source.jobs or job in source.jobs) and job not in source.exclude_jobs


def _list_job(listing: WorkflowListing, where: str, job: dict[str, Any], workflow_env: dict[str, Any],
              source: WorkflowRows) -> None:
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    if matrix is None:
        return
    if _literally_false(job.get("if")):
        listing.disabled.append(where)
        return
    combinations = expand_matrix(matrix)
    if combinations is None:
        listing.notes.append(f"{where}: matrix is not a list of rows (an expression, or more than "
                             f"{MAX_ROWS_PER_JOB} rows): left out")
        return
    env_template = {**workflow_env, **_mapping(job.get("env"))}
    unknown: dict[str, None] = {}  # ordered set
    for combination in combinations:
        script = evaluate_field(combination, source.script)
        # The run line interpolates the field unquoted (`python tests/${{ matrix.info.test_file }}`), so
        # bash splits it: "test_ckpt.py --async-save" is the script and a word before the args field's.
        words = script.split() if isinstance(script, str) else []
        if not words:
            listing.notes.append(f"{where}: a row without `{source.script}`: left out")
            continue
        args = evaluate_field(combination, source.args) if source.args else None
        env, left_out = row_env(env_template, combination, source.env)
        unknown.update(dict.fromkeys(left_out))
        listing.rows.append(WorkflowRow(script=script_path(words[0], source.script_dir),
                                        args=(*words[1:], *(_text(args).split() if args is not None else ())),
                                        env=env, job=where))
    if unknown:
        listing.notes.append(f"{where}: env {', '.join(unknown)} not evaluated (more than "
                             "`matrix.x || 'default'`): left out")


def _literally_false(condition: Any) -> bool:
    if condition is False:
        return True
    return isinstance(condition, str) and condition.strip() in ("false", "${{ false }}")


def _mapping(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def script_path(script: str, script_dir: str) -> str:
    """The repo-relative script: `script_dir/` first unless the path already starts there (as CI does)."""
    directory = script_dir.strip("/")
    if not directory or script.startswith(directory + "/"):
        return script
    return f"{directory}/{script}"


def expand_matrix(matrix: Any) -> list[dict[str, Any]] | None:
    """The combinations GitHub runs for a `strategy.matrix` (product, minus `exclude`, with `include`);
    None for a matrix computed by an expression or larger than the bound."""
    if not isinstance(matrix, dict):
        return None
    axes = {str(k): v for k, v in matrix.items() if k not in ("include", "exclude")}
    if any(not isinstance(values, list) for values in axes.values()):
        return None
    size = 1
    for values in axes.values():
        size *= len(values)
    if size > MAX_ROWS_PER_JOB:
        return None
    combinations = [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())] \
        if axes else []
    excluded = [e for e in matrix.get("exclude") or () if isinstance(e, dict)]
    combinations = [c for c in combinations if not any(_matches(c, e) for e in excluded)]
    if axes and not combinations:
        return []
    combinations = _include(combinations, [i for i in matrix.get("include") or () if isinstance(i, dict)],
                            set(axes))
    return combinations if len(combinations) <= MAX_ROWS_PER_JOB else None


def _matches(combination: dict[str, Any], partial: dict[str, Any]) -> bool:
    for key, wanted in partial.items():
        value = combination.get(key)
        if isinstance(wanted, dict) and isinstance(value, dict):
            if not _matches(value, wanted):
                return False
        elif value != wanted:
            return False
    return True


def _include(combinations: list[dict[str, Any]], includes: list[dict[str, Any]],
             axes: set[str]) -> list[dict[str, Any]]:
    """GitHub's rule: an include joins every combination whose original values it does not overwrite;
    one that joins none is a combination of its own."""
    result = [dict(c) for c in combinations]
    for include in includes:
        joined = False
        # only the original combinations: an include added as a row of its own joins no later include
        for original, combination in zip(combinations, result[:len(combinations)], strict=True):
            if all(original.get(k) == v for k, v in include.items() if k in axes):
                combination.update(include)
                joined = True
        if not joined:
            result.append(dict(include))
    return result


def evaluate_field(combination: dict[str, Any], dotted: str) -> Any:
    """The value at `a.b` in a combination (`matrix.a.b`); None when absent."""
    value: Any = combination
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def row_env(template: dict[str, Any], combination: dict[str, Any],
            runner_env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The row's environment: the runner's, then each variable of `template` evaluated for the row. One
    that needs more than the `||` form keeps the runner's value, which the policy gives for it (what it is
    on a pull request), or is left out and named."""
    env = dict(runner_env)
    unknown: list[str] = []
    for name, value in template.items():
        rendered = render(value, combination)
        if rendered is not None:
            env[name] = rendered
        elif name not in runner_env:
            unknown.append(name)
    return env, unknown


def render(value: Any, combination: dict[str, Any]) -> str | None:
    """A workflow value with its `${{ }}` expressions evaluated for one row; None when one cannot be."""
    return render_with(value, lambda expression: evaluate(expression, combination))


def render_with(value: Any, evaluate_one: Callable[[str], Any]) -> str | None:
    """A workflow value with each `${{ }}` replaced by what EVALUATE_ONE gives its text, as GitHub puts a
    value in a string; None when one is UNKNOWN."""
    if not isinstance(value, str):
        return _text(value)
    pieces: list[str] = []
    position = 0
    for match in _EXPRESSION.finditer(value):
        result = evaluate_one(match.group(1))
        if result is expressions.UNKNOWN:
            return None
        pieces += [value[position:match.start()], _text(result)]
        position = match.end()
    return "".join(pieces) + value[position:]


def evaluate(expression: str, combination: dict[str, Any]) -> Any:
    """An expression over the row's matrix fields (`matrix.engine == 'sglang' && 'vllm' || 'sglang'`),
    GitHub's rules (app/analysis/sources/expressions.py); a field the row lacks is null, any other context
    unknown (UNKNOWN)."""
    return expressions.evaluate(expression, dict(_matrix_names(combination, "matrix")), ("matrix",))


def _matrix_names(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    yield prefix, value
    for key, inner in value.items() if isinstance(value, dict) else ():
        yield from _matrix_names(inner, f"{prefix}.{key}")


def _text(value: Any) -> str:
    """A value as GitHub puts it in a string: null empty, booleans lower case, containers as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def read_workflow(tree: SourceTree, path: str) -> str:
    """A workflow file's text, refused beyond MAX_WORKFLOW_BYTES (raises OSError or WorkflowError)."""
    if tree.size(path) > MAX_WORKFLOW_BYTES:
        raise WorkflowError(f"{path}: larger than {MAX_WORKFLOW_BYTES} bytes")
    return tree.read(path)


class _WorkflowListing(Protocol):
    @property
    def disabled(self) -> list[str]: ...

    @property
    def notes(self) -> list[str]: ...


Listed = TypeVar("Listed", bound=_WorkflowListing)


def each_workflow(globs: list[str], paths: Iterable[str], read: Callable[[str], str], what: str,
                  parse: Callable[[str, str], Listed]) -> Iterator[Listed]:
    """What `parse` lists of each workflow file the globs name among `paths`, in path order; a file that
    cannot be read or parsed is logged and left out (`read` raises OSError or WorkflowError)."""
    for path in sorted(p for p in paths if any(path_matches(p, g) for g in globs)):
        try:
            listing = parse(read(path), path)
        except (OSError, WorkflowError) as exc:
            log.warning("%s: %s", what, exc)
            continue
        for note in listing.notes:
            log.info("%s: %s", what, note)
        yield listing


def list_rows(source: WorkflowRows, tree: SourceTree) -> tuple[list[CaptureItem], list[str]]:
    """The capture items of a workflow_rows source (rows alike in script, args and env once), and the
    labels of jobs whose `if:` is literally false."""
    rows: dict[tuple[Any, ...], WorkflowRow] = {}
    disabled: list[str] = []
    read = functools.partial(read_workflow, tree)
    for listing in each_workflow(source.workflows, tree.paths(), read, "workflow rows",
                                 lambda text, path: rows_from_workflow(text, path, source)):
        disabled += listing.disabled
        for row in listing.rows:
            rows.setdefault(row.key(), row)  # the same row in several jobs is one CI command line
    return _labelled(rows.values()), disabled


def _labelled(rows: Iterable[WorkflowRow]) -> list[CaptureItem]:
    """Items with unique ids: the script and its words, then the job, then a number."""
    items: list[CaptureItem] = []
    taken: set[str] = set()
    for row in rows:
        label = " ".join((row.script, *row.args))
        if label in taken:
            label = f"{label} ({row.job})"
        base, count = label, 1
        while label in taken:
            count += 1
            label = f"{base}#{count}"
        taken.add(label)
        items.append({"id": label, "script": row.script, "args": list(row.args), "env": dict(row.env)})
    return items


def list_items(source: WorkflowRows, tree: SourceTree, where: str) -> Listing:
    items, disabled = list_rows(source, tree)
    return Listing(items=tuple(items), disabled=tuple(disabled))


def detect(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """`prtriage init`: workflows whose job matrices list rows with a field naming a Python script (the
    source's keys, and why)."""
    for workflow in sorted((root / ".github" / "workflows").glob("*.y*ml")):
        text = read_text(workflow)
        try:
            document = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            continue
        fields = Counter(found for found in _script_fields(document.get("jobs") if isinstance(document, dict)
                                                           else None)
                         if not _pytest_argument(text, found[1]))
        if not fields:
            continue
        (matrix_key, script_field, args_field), rows = fields.most_common(1)[0]
        script_dir = _script_dir(root, document, matrix_key, script_field)
        source = {"kind": "workflow_rows", "workflows": [f".github/workflows/{workflow.name}"],
                  "script": f"{matrix_key}.{script_field}", "script_dir": script_dir,
                  "command": ["python", "{script}"], **copy.deepcopy(recording)}
        if args_field:
            source["args"] = f"{matrix_key}.{args_field}"
        yield source, (f"{workflow.name}: {rows} matrix rows name a script in `{matrix_key}.{script_field}`; "
                       "each row's script is run by the recording bash")


def _pytest_argument(text: str, field_name: str) -> bool:
    """The field is a test file pytest runs (`uv run pytest -vvs ${{ matrix.pytest_args }}`), no CI script:
    the pytest_launches kind runs it."""
    pattern = rf"pytest\b[^\n]*\$\{{\{{\s*matrix\.(?:[\w-]+\.)*{re.escape(field_name)}\s*\}}\}}"
    return re.search(pattern, text) is not None


def _matrices(jobs: Any) -> Iterator[dict[str, Any]]:
    """The `strategy.matrix` maps of a workflow's jobs (one written as an expression is skipped)."""
    for job in jobs.values() if isinstance(jobs, dict) else []:
        strategy = job.get("strategy") if isinstance(job, dict) else None
        matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
        if isinstance(matrix, dict):
            yield matrix


def _script_fields(jobs: Any) -> Iterator[tuple[str, str, str]]:
    """(matrix key, script field, args field or "") of every row naming a Python script; the args field
    is the one any row of that key writes (`test_args`), the rows without it pass none."""
    for matrix in _matrices(jobs):
        for key, rows in matrix.items():
            rows = [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []
            args = next((k for row in rows for k in row if k.endswith("args")), "")
            for row in rows:
                script = next((k for k, v in row.items() if isinstance(v, str) and v.endswith(".py")), None)
                if script:
                    yield key, script, args


def _script_dir(root: Path, document: dict[str, Any], matrix_key: str, script_field: str) -> str:
    """Where the rows' scripts are: the directory of the tree that holds the first row's script."""
    for matrix in _matrices(document.get("jobs")):
        rows = matrix.get(matrix_key)
        for row in rows if isinstance(rows, list) else []:
            name = row.get(script_field) if isinstance(row, dict) else None
            if not isinstance(name, str):
                continue
            if (root / name).is_file():
                return ""
            hits = sorted(p.relative_to(root) for p in root.glob(f"**/{PurePosixPath(name).name}"))
            hits = [p for p in hits if not any(part.startswith(".") for part in p.parts)]
            if hits:
                return hits[0].parent.as_posix()
    return ""


KIND = SourceKind(WorkflowRows, list_items, from_launches, detect)
