"""The static kind: suites written into the policy itself; nothing is read or run."""

from __future__ import annotations

from app.analysis.core.model import Suite
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree
from app.analysis.sources.static_suites_keys import StaticSuites


def list_items(source: StaticSuites, tree: SourceTree, where: str) -> Listing:
    return Listing(suites=tuple(Suite(id=s.id, script=f"policy:{where}", argv=tuple(s.argv), env=dict(s.env))
                                for s in source.suites))


KIND = SourceKind(StaticSuites, list_items)
