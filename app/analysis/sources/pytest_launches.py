"""The pytest_launches kind: the training launches CI's pytest test functions make, one suite per launch.

Some repositories of the field launch their training entry from inside pytest: a fixture or test function
runs `subprocess.run(["uv", "run", "sft", "@", "configs/ci/...toml", ...])` (PrimeIntellect-ai/prime-rl's
`tests/integration`, run by `uv run pytest -vvs ${{ matrix.pytest_args }}`), and CI selects which of them
run with its own `-m`/`-k`/paths. No script names those command lines: only running pytest does. The
workflow steps that start pytest (or the policy's `invocations`) are listed here on the host with the
bounds of `workflow_steps`; the capture harness runs each step's text in the recording bash, then each
pytest it started for real (app/sandbox/harness/pytestrun.py), and every entry launch is a suite whose id
is the test that made it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from app.analysis.core.model import Suite
from app.analysis.core.tree_reading import read_text
from app.analysis.sources import workflow_steps
from app.analysis.sources.pytest_launches_keys import PytestLaunches
from app.analysis.sources.recorded import script_kind, suites_from_launches
from app.analysis.sources.source_kind import CaptureItem, Found, Listing, ScriptReport, SourceKind, SourceTree
from app.analysis.sources.workflow_rows import read_workflow
from app.analysis.sources.workflow_steps import list_steps
from app.analysis.sources.workflow_steps_keys import WorkflowSteps

# The words of a step that start pytest: `pytest`, `.venv/bin/pytest`, `python -m pytest` (its `pytest`).
PYTEST_WORDS = ["pytest", "**/pytest"]
OUTSIDE_TESTS = "(collection)"
MAX_TEST_ID = 180  # what pytestrun names launches made while no test ran
MAX_INVOCATION_WORDS = 64
_PYTEST_STEP = re.compile(r"(^|[\s/;&|(])(pytest|py\.test)(\s|$)", re.M)


def list_items(source: PytestLaunches, tree: SourceTree, where: str) -> Listing:
    """One item per distinct pytest step of the workflows (its text, its environment), then one per
    invocation, run as `pytest <words>` from the root."""
    return _listed(source, tree, None)


def produce(source: PytestLaunches, tree: SourceTree, where: str) -> tuple[CaptureItem, ...]:
    """The producing jobs of the pytest jobs whose matrix another job computes (workflow_steps')."""
    return workflow_steps.produce(_steps(source), tree, where)


def list_produced(source: PytestLaunches, tree: SourceTree, where: str,
                  reports: Sequence[ScriptReport]) -> Listing:
    return _listed(source, tree, workflow_steps.produced_matrices(_steps(source), tree, reports))


def _steps(source: PytestLaunches) -> WorkflowSteps:
    """The source's workflows read as a workflow_steps source whose scripts are pytest."""
    return WorkflowSteps(kind="workflow_steps", workflows=source.workflows, jobs=source.jobs,
                         exclude_jobs=source.exclude_jobs, scripts=PYTEST_WORDS, env=source.env,
                         entry=source.entry, github=source.github)


def _listed(source: PytestLaunches, tree: SourceTree,
            computed: Mapping[str, list[dict[str, Any]] | str] | None) -> Listing:
    read = functools.partial(read_workflow, tree)
    listing = list_steps(tree.paths(), read, _steps(source), computed) if source.workflows else Listing()
    items = list(listing.items)
    for words in source.invocations:
        command = shlex.join(["pytest", *words[:MAX_INVOCATION_WORDS]])
        items.append({"id": command, "script": command, "args": [], "env": {}, "shell": command})
    return dataclasses.replace(listing, items=tuple(items))


def recorded(report: ScriptReport, source: PytestLaunches, repo_mount: str) -> Found:
    """The suites of one step: each test's launches of the entry, ids `<test node id>`, `...#2`."""
    if report.status == "disabled":
        return Found(disabled=[report.script], ran=False)
    found = suites_of_tests(report.script, report.launches, source, repo_mount)
    outcome, note = script_kind(report, found, source)
    return Found(found, outcome, note)


def suites_of_tests(step: str, launches: Sequence[Mapping[str, Any]], source: PytestLaunches,
                    repo_mount: str) -> list[Suite]:
    """Suites by the test that launched them, in launch order; a launch made outside any test (at a test
    module's import) is named by the step."""
    by_test: dict[str, list[Mapping[str, Any]]] = {}
    for launch in launches:
        test = str(launch.get("test") or OUTSIDE_TESTS)
        by_test.setdefault(step if test == OUTSIDE_TESTS else bounded_id(test), []).append(launch)
    suites: list[Suite] = []
    for test, made in by_test.items():
        suites += suites_from_launches(test, made, source, repo_mount)
    return suites


def bounded_id(test: str) -> str:
    """A node id short enough to be a suite id (the validation's reports are read up to 200 characters,
    and `#N` may follow): a longer one (pytorch/torchtune parametrizes with whole command lines) keeps its
    start and a digest of the rest."""
    if len(test) <= MAX_TEST_ID:
        return test
    return f"{test[:MAX_TEST_ID - 12]}~{hashlib.sha256(test.encode()).hexdigest()[:11]}"


def detect(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """`prtriage init`: workflow steps that run pytest on tests that start a launcher by subprocess (the
    source's keys, and why)."""
    workflows = [w for w in sorted((root / ".github" / "workflows").glob("*.y*ml")) if _runs_pytest(w)]
    launching = _launching_tests(root)
    if not workflows or not launching:
        return
    source = {"kind": "pytest_launches",
              "workflows": [f".github/workflows/{w.name}" for w in workflows], **copy.deepcopy(recording),
              "env_from": ["exported"]}
    source.pop("command", None)
    source.pop("registration", None)
    shown = ", ".join(w.name for w in workflows[:3]) + (" ..." if len(workflows) > 3 else "")
    yield source, (f"{shown} run pytest; {len(launching)} test module(s) start a process "
                   f"({', '.join(launching[:2])}): pytest runs for real and their launches are recorded")


def _runs_pytest(workflow: Path) -> bool:
    try:
        document = yaml.safe_load(read_text(workflow)) or {}
    except yaml.YAMLError:
        return False
    jobs = document.get("jobs") if isinstance(document, dict) else None
    listed = [job.get("steps") for job in (jobs.values() if isinstance(jobs, dict) else [])
              if isinstance(job, dict)]
    steps = [step for each in listed if isinstance(each, list) for step in each]
    return any(isinstance(step, dict) and isinstance(step.get("run"), str)
               and _PYTEST_STEP.search(step["run"]) for step in steps)


_LAUNCHING = re.compile(r"subprocess\.(run|Popen|call|check_call|check_output)\(|os\.(system|exec\w*)\(")


def _launching_tests(root: Path) -> list[str]:
    """Test modules and conftests that start processes, repo-relative."""
    tests = root / "tests"
    if not tests.is_dir():
        return []
    found = [path for path in sorted(tests.rglob("*.py"))
             if (path.name.startswith("test_") or path.name == "conftest.py")
             and _LAUNCHING.search(read_text(path))]
    return [path.relative_to(root).as_posix() for path in found]


_PLUGIN = re.compile(r"(?<![\w.-])(pytest-[A-Za-z0-9][\w.-]*?)(?=\s*(?:[\[<>=!~;,'\"]|$))", re.M)
DEPENDENCY_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "requirements*.txt", "requirements/*.txt")
MAX_PLUGINS = 16


def needs(root: Path) -> list[str]:
    """pytest and the pytest plugins the tree's dependency files name (`pytest-integration`: CI's
    conftest or its addopts may use their options), distribution names."""
    plugins: list[str] = []
    for pattern in DEPENDENCY_FILES:
        for path in sorted(root.glob(pattern)):
            plugins += _PLUGIN.findall(read_text(path))
    return ["pytest", *list(dict.fromkeys(name.lower() for name in plugins))[:MAX_PLUGINS]]


KIND = SourceKind(PytestLaunches, list_items, recorded, detect, needs, produce=produce,
                  list_produced=list_produced)
