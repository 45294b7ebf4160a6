"""Host side of capture: list the CI scripts, reuse a cached matrix of the very same tree, else run the
capture harness in the sandbox and turn its reports into the Matrix.

The cache key is computed here, on the host, from the whole tree's content, the policy, the code that
captures (`capture_code_digest`), the analysis environment and the repository: nothing the sandboxed scripts
report about themselves (they are a pull request's code) can make one tree's matrix serve another, and no
prtriage upgrade is served a matrix its older code captured.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from app.analysis.core.model import Matrix
from app.analysis.core.policy import Policy
from app.analysis.sources.matrix import build_matrix
from app.analysis.sources.registry import kind_of
from app.analysis.sources.source_kind import CaptureItem, Listing, ScriptReport
from app.bundled import package_file
from app.engine.environments import prepare
from app.sandbox.interpreter import Interpreter
from app.sandbox.messages import OnProgress, progress_relay, stopped_reason
from app.sandbox.runner import SandboxRun, SandboxSpec, run_harness
from app.trees.treehash import fingerprints, tree_digest

log = logging.getLogger(__name__)

HARNESS_DIR = package_file("app.sandbox", "harness")
# What decides a capture besides the repository, the policy and the environment: the code that makes the
# matrix. In the sandbox, the capture program and every harness module it imports (found by reading the
# imports, so a module added to the harness is never left out), with the shell prelude it runs commands
# under; on the host, every module of the matrix sources (listing, recording, suites) and this one.
CAPTURE_PROGRAM = "capture.py"
HARNESS_DATA = ("recbash.sh",)
SOURCES_DIR = package_file("app.analysis", "sources")
SKIPPED_DIRS = frozenset({".git", "__pycache__"})
MAX_CACHE_ENTRIES = 64  # per policy; the least recently used go first


def capture_matrix(tree: Path, policy: Policy, *, cache_dir: Path | None, allow_unsandboxed: bool = False,
                   on_progress: OnProgress | None = None, repository: str | None = None,
                   interpreter: Interpreter | None = None) -> tuple[Matrix, bool]:
    """The CI matrix of `tree`, and whether it came from the cache (then no sandbox ran at all).

    INTERPRETER is the analysis environment the sandbox runs (default: the one the policy declares); its
    digest is part of the cache key, so a matrix captured with other packages is never reused."""
    environment = interpreter or prepare(policy.harness, tree, cache_dir)
    host_tree = HostTree(tree)
    listings: dict[int, Listing] = {}
    scripts: dict[int, list[CaptureItem]] = {}
    listed: list[str] = []  # what the kinds add to the cache key (`SourceKind.cache_key`)
    for index, source in enumerate(policy.matrix.sources):
        kind = kind_of(source)
        listings[index] = kind.list_items(source, host_tree, f"matrix.sources[{index}]")
        if kind.recorded is not None:
            scripts[index] = list(listings[index].items)
            listed += [f"{index}:{part}" for part in kind.cache_key(source, listings[index])]
    # else no sandbox runs, nothing worth caching: no item, and no job computing one's matrix
    runs = any(scripts.values()) or _produces(policy, host_tree)
    cache = MatrixCache(cache_dir / "matrix" / repository_key(repository) / capture_key(policy, environment),
                        tree_digest(fingerprints(tree))) if cache_dir and runs else None
    if cache is not None:
        cached = cache.lookup(listed)
        if cached is not None:
            return cached, True
    reports: dict[int, list[ScriptReport]] = {}
    complete, repo_mount = True, ""
    # Rows another CI job computes: that job runs first, its outputs list the items. The cache key needs no
    # outputs: they follow from the tree, the policy, the harness and the environment.
    produced, complete = _run_producers(tree, policy, host_tree, allow_unsandboxed, on_progress, environment)
    for index, found in produced.items():
        source = policy.matrix.sources[index]
        list_produced = kind_of(source).list_produced
        if list_produced is not None:  # a kind that produces lists from what it produced
            listings[index] = list_produced(source, host_tree, f"matrix.sources[{index}]", found)
            scripts[index] = list(listings[index].items)
    for index, items in scripts.items():
        if items:
            run, found = _run_capture(tree, policy, index, items, allow_unsandboxed, on_progress,
                                      environment)
            reports.setdefault(index, []).extend(found)
            complete = complete and _ran_to_completion(run, found, [item["id"] for item in items])
            repo_mount = repo_mount or _repo_mount(run)
    matrix = build_matrix(policy, reports, repo_mount, listings)
    if cache is not None and complete:
        cache.store(listed, matrix)
    return matrix, False


def _produces(policy: Policy, host_tree: HostTree) -> bool:
    """Whether a source has a job to run first, whose outputs list its items."""
    for index, source in enumerate(policy.matrix.sources):
        produce = kind_of(source).produce
        if produce is not None and produce(source, host_tree, f"matrix.sources[{index}]"):
            return True
    return False


def repository_key(repository: str | None) -> str:
    """The cache directory of one repository (`owner/name`, a local path, or none given)."""
    if not repository:
        return "unnamed"
    return hashlib.sha256(repository.encode()).hexdigest()[:16]


class HostTree:
    """A revision's tree as the sources read it on the host (`SourceTree`): its files listed once."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self._paths: list[str] | None = None

    def paths(self) -> list[str]:
        if self._paths is None:
            self._paths = list(_tree_files(self.tree))
        return self._paths

    def size(self, path: str) -> int:
        return (self.tree / path).stat().st_size

    def read(self, path: str) -> str:
        return (self.tree / path).read_text(encoding="utf-8", errors="replace")


def _tree_files(tree: Path) -> Iterator[str]:
    for directory, subdirs, files in os.walk(tree):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        relative = Path(directory).relative_to(tree)
        for name in files:
            yield (relative / name).as_posix()


@functools.cache
def capture_code_digest() -> str:
    """The code that makes a matrix, hashed (computed once per process: it is the installed prtriage)."""
    files = [*harness_closure(HARNESS_DIR, CAPTURE_PROGRAM), *(HARNESS_DIR / name for name in HARNESS_DATA),
             *sorted(SOURCES_DIR.glob("*.py")), Path(__file__)]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"") + b"\0")
    return digest.hexdigest()


def harness_closure(directory: Path, program: str) -> list[Path]:
    """PROGRAM of DIRECTORY and every module of DIRECTORY it imports, directly or through others, lazily
    too (`import stubs`, `from app.sandbox.harness import repoline`); sorted by name."""
    found: set[str] = set()
    waiting = [program.removesuffix(".py")]
    while waiting:
        name = waiting.pop()
        path = directory / f"{name}.py"
        if name in found or not path.is_file():
            continue
        found.add(name)
        waiting += _imported_names(path.read_text(encoding="utf-8"))
    return [directory / f"{name}.py" for name in sorted(found)]


def _imported_names(text: str) -> list[str]:
    """Every name an import of TEXT could take a sibling module by: each dotted part, what `from` takes."""
    names: list[str] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names += [part for alias in node.names for part in alias.name.split(".")]
        elif isinstance(node, ast.ImportFrom):
            names += [*(node.module or "").split("."), *(alias.name for alias in node.names)]
    return names


def capture_key(policy: Policy, interpreter: Interpreter) -> str:
    """Names the cache directory: what capture reads of the policy, the code that captures, and the
    analysis environment it ran in."""
    parts = f"{policy.capture_digest()}:{capture_code_digest()}:{interpreter.digest}"
    return hashlib.sha256(parts.encode()).hexdigest()[:16]


def _run_capture(tree: Path, policy: Policy, index: int, items: list[CaptureItem], allow_unsandboxed: bool,
                 on_progress: OnProgress | None,
                 interpreter: Interpreter) -> tuple[SandboxRun, list[ScriptReport]]:
    job = {"policy": policy.model_dump(mode="json", by_alias=True), "workers": os.cpu_count() or 1,
           "source": index, "scripts": items}
    spec = SandboxSpec(program="capture.py", repo_dir=tree, job=job, limits=policy.harness.limits,
                       allow_unsandboxed=allow_unsandboxed, interpreter=interpreter)
    run = run_harness(spec, on_message=progress_relay(on_progress))
    return run, collect_reports([item["id"] for item in items], run.messages,
                                stopped_reason(run, step="capture", unit="script"))


def _run_producers(tree: Path, policy: Policy, host_tree: HostTree, allow_unsandboxed: bool,
                   on_progress: OnProgress | None,
                   interpreter: Interpreter) -> tuple[dict[int, list[ScriptReport]], bool]:
    """The reports of the jobs whose outputs other jobs' matrices read, by the index of each source that
    reads them (`SourceKind.produce`), and whether their run completed: all of them in one sandbox run,
    each distinct job once (NeMo RL's unit and functional sources read one pre-flight job)."""
    wanted: dict[int, list[str]] = {}
    distinct: dict[str, CaptureItem] = {}  # by content: the run's item, its id numbered
    for index, source in enumerate(policy.matrix.sources):
        kind = kind_of(source)
        if kind.produce is None or kind.list_produced is None:
            continue
        wanted[index] = []
        for item in kind.produce(source, host_tree, f"matrix.sources[{index}]"):
            key = json.dumps(item, sort_keys=True)
            distinct.setdefault(key, {**item, "id": f"{len(distinct)}:{item['id']}"})
            wanted[index].append(key)
    if not distinct:
        return {index: [] for index in wanted}, True
    items = list(distinct.values())
    run, found = _run_capture(tree, policy, min(wanted), items, allow_unsandboxed, on_progress, interpreter)
    by_id = {report.script: report for report in found}
    reports = {index: [dataclasses.replace(by_id[distinct[key]["id"]], script=json.loads(key)["id"])
                       for key in keys] for index, keys in wanted.items()}
    return reports, _ran_to_completion(run, found, [item["id"] for item in items])


def collect_reports(scripts: list[str], messages: list[dict[str, Any]], reason: str) -> list[ScriptReport]:
    """The first well-formed report of each script; a script never reported failed with `reason`."""
    wanted = set(scripts)
    reports: dict[str, ScriptReport] = {}
    for message in messages:
        if message.get("type") != "script":
            continue
        try:
            report = ScriptReport.from_message(message)
        except (KeyError, TypeError, ValueError):
            log.warning("ignored a malformed script report: %.200r", message)
            continue
        if report.script in wanted:
            reports.setdefault(report.script, report)
    return [reports.get(s) or ScriptReport(s, "failed", reason=reason) for s in scripts]


def _ran_to_completion(run: SandboxRun, reports: list[ScriptReport], scripts: list[str]) -> bool:
    """A run worth caching: it ended by itself and reported every script (a stalled machine is no fact)."""
    reported = {m.get("script") for m in run.messages if m.get("type") == "script"}
    return not run.ended and not any(m.get("type") == "fatal" for m in run.messages) \
        and reported >= set(scripts)


def _repo_mount(run: SandboxRun) -> str:
    """Where the harness saw the tree: each script report names it."""
    return next((str(m["repo"]) for m in run.messages if m.get("type") == "script" and m.get("repo")), "")


class MatrixCache:
    """Captured matrices of one repository and policy, one per tree content hash."""

    def __init__(self, directory: Path, tree_hash: str) -> None:
        self.directory, self.tree_hash = directory, tree_hash
        self.path = directory / f"{tree_hash[:32]}.json"

    def lookup(self, scripts: list[str]) -> Matrix | None:
        entry = _load_json(self.path)
        if entry is None or entry.get("tree") != self.tree_hash or entry.get("scripts") != scripts:
            return None
        try:
            matrix = Matrix.from_json(entry["matrix"])
        except (KeyError, TypeError, ValueError):
            return None
        with contextlib.suppress(OSError):
            os.utime(self.path)  # recently used: kept when the directory is pruned
        return matrix

    def store(self, scripts: list[str], matrix: Matrix) -> None:
        entry = {"tree": self.tree_hash, "scripts": scripts, "matrix": matrix.to_json()}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            _write_atomic(self.path, json.dumps(entry))
            for stale in self._entries_newest_first()[MAX_CACHE_ENTRIES:]:
                stale.unlink(missing_ok=True)
        except OSError as exc:  # a cache that cannot be written only costs time
            log.warning("could not store the captured matrix in %s: %s", self.directory, exc)

    def _entries_newest_first(self) -> list[Path]:
        try:
            entries = [(p.stat().st_mtime_ns, p) for p in self.directory.glob("*.json")]
        except OSError:
            return []
        return [p for _, p in sorted(entries, key=lambda item: item[0], reverse=True)]


def _load_json(path: Path) -> Mapping[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _write_atomic(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
