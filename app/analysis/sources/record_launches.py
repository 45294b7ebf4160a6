"""The record_launches kind: CI scripts named by globs, each run as CI runs it with its launches recorded."""

from __future__ import annotations

from app.analysis.core.policy import RecordLaunches, path_matches
from app.analysis.sources.recorded import from_launches
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree


def list_scripts(source: RecordLaunches, tree: SourceTree) -> list[str]:
    """The repo-relative CI scripts a source names (its globs minus `exclude`), sorted."""
    return sorted(path for path in tree.paths()
                  if any(path_matches(path, g) for g in source.scripts)
                  and not any(path_matches(path, g) for g in source.exclude))


def list_items(source: RecordLaunches, tree: SourceTree, where: str) -> Listing:
    return Listing(items=tuple({"id": path, "script": path} for path in list_scripts(source, tree)))


KIND = SourceKind(RecordLaunches, list_items, from_launches)
