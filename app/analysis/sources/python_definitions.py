"""The python_definitions kind: functions of the repository, called in the sandbox, return the suites."""

from __future__ import annotations

from app.analysis.core.policy import PythonDefinitions
from app.analysis.sources.recorded import from_definitions
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree


def list_items(source: PythonDefinitions, tree: SourceTree, where: str) -> Listing:
    return Listing(items=tuple({"id": target, "script": target} for target in source.functions))


KIND = SourceKind(PythonDefinitions, list_items, from_definitions)
