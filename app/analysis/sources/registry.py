"""Every kind of matrix source by its name (the `kind` of a policy's `matrix.sources[]`): adding a kind is a
module holding its `SourceKind` and one line here, or a call to `register`."""

from __future__ import annotations

from typing import Any, Protocol

from app.analysis.core.policy import SOURCE_KEYS, add_source_keys, remove_source_keys
from app.analysis.sources import (
    computed_matrix,
    pytest_launches,
    python_definitions,
    recipes,
    record_launches,
    static_suites,
    workflow_rows,
    workflow_steps,
)
from app.analysis.sources.source_kind import SourceKind

# In the order `prtriage init` tries their detections.
KINDS: dict[str, SourceKind[Any]] = {kind.name: kind for kind in (
    workflow_rows.KIND,
    record_launches.KIND,
    computed_matrix.KIND,
    python_definitions.KIND,
    workflow_steps.KIND,
    pytest_launches.KIND,
    recipes.KIND,  # yaml_args
    static_suites.KIND,
)}


class Source(Protocol):
    """One of a policy's `matrix.sources`."""

    @property
    def kind(self) -> str: ...


def kind_of(source: Source) -> SourceKind[Any]:
    return KINDS[source.kind]


def register(kind: SourceKind[Any]) -> None:
    """Adds a kind: policies may name it from now on, and capture lists and records its items."""
    if kind.name in KINDS:
        raise ValueError(f"a matrix source kind named {kind.name!r} exists already")
    KINDS[kind.name] = kind
    add_source_keys(kind.name, kind.keys)


def unregister(name: str) -> None:
    """Removes a kind `register` added (the built-in kinds stay)."""
    if name in KINDS and SOURCE_KEYS.get(name) is KINDS[name].keys:
        remove_source_keys(name)
        del KINDS[name]
