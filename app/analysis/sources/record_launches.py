"""The record_launches kind: CI scripts named by globs, each run as CI runs it with its launches recorded."""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.analysis.core.policy import path_matches
from app.analysis.core.tree_reading import read_modules, read_text
from app.analysis.sources import matrix_scripts
from app.analysis.sources.record_launches_keys import RecordLaunches
from app.analysis.sources.recorded import from_launches
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree


def list_scripts(source: RecordLaunches, tree: SourceTree) -> list[str]:
    """The repo-relative CI scripts a source names (its globs minus `exclude`), sorted."""
    return sorted(path for path in tree.paths()
                  if any(path_matches(path, g) for g in source.scripts)
                  and not any(path_matches(path, g) for g in source.exclude))


def list_items(source: RecordLaunches, tree: SourceTree, where: str) -> Listing:
    return Listing(items=tuple({"id": path, "script": path} for path in list_scripts(source, tree)))


def detect(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """`prtriage init`: test scripts that register with CI by calling a `register_*` function of the tests
    (GPU first); shell scripts workflow steps start through a matrix value (`matrix_scripts`)."""
    yield from _registering(root, recording)
    yield from matrix_scripts.detect(root, recording)


def _registering(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    if not (root / "tests").is_dir():
        return
    tests = read_modules(root / "tests", lambda text: "def register_" in text)
    registrars = [(f"tests.{m.name}", name, node) for m in tests.values()
                  for name, node in m.functions().items()
                  if name.startswith("register_") and re.search(r"cuda|gpu", name)]
    for module, name, node in registrars[:1]:
        callers = sorted(p.relative_to(root) for p in (root / "tests").rglob("test_*.py")
                         if f"{name}(" in read_text(p))
        if not callers:
            continue
        top = Counter(p.parts[1] if len(p.parts) > 2 else "" for p in callers).most_common(1)[0][0]
        under = f"tests/{top}/" if top else "tests/"
        parameters = [arg.arg for arg in [*node.args.args, *node.args.kwonlyargs]]
        registration = {"function": f"{module}:{name}",
                        "disabled_kwarg": next((p for p in parameters if "disab" in p or "skip" in p),
                                               "disabled"),
                        "suite_kwarg": "suite" if "suite" in parameters else None}
        source = {"kind": "record_launches", "scripts": [f"{under}**/test_*.py"],
                  "command": ["python3", "{script}"], **copy.deepcopy(recording),
                  "registration": registration}
        count = sum(1 for p in callers if p.as_posix().startswith(under))
        yield source, f"{count} scripts under {under} register with CI through {name}"


KIND = SourceKind(RecordLaunches, list_items, from_launches, detect)
