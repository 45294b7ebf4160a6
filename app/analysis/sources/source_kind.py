"""What every kind of matrix source provides, and what passes between it, the host and the sandbox.

A kind is one module of `app/analysis/sources/` holding a `KIND = SourceKind(...)` (pre-commit's
`languages/` are the model): its policy keys, how it lists its items from the revision's files on the host,
what it makes of what the capture harness recorded of each item, how `prtriage init` detects it, and what it
adds to the matrix cache key. `registry.py` maps kind names to them.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from app.analysis.core.model import CaptureFailure, Suite

# Documented bounds of the sandbox's word, checked again on the host (see ScriptReport.from_message).
MAX_DEFINED_SUITES = 1024
MAX_DEFINED_CHARS = 4096
MAX_OUTPUTS = 256  # of a producing job's report (`outputs`), as the harness bounds them
MAX_OUTPUT_CHARS = 256 * 1024
# One thing the capture harness runs: `id` names its report; `script`, `args`, `env` (and a step's `shell`).
CaptureItem = dict[str, Any]
Keys = TypeVar("Keys", bound=BaseModel)


class SourceTree(Protocol):
    """The revision's files as a source reads them on the host: a pull request's content, so read with the
    kind's own bounds and never run."""

    def paths(self) -> Iterable[str]:
        """Every file, repo-relative, in a stable order."""

    def size(self, path: str) -> int:
        """The file's size in bytes (raises OSError)."""

    def read(self, path: str) -> str:
        """The file's text, undecodable bytes replaced (raises OSError)."""


class NoFiles:
    """A tree without files: what a source lists from its policy keys alone (static suites)."""

    def paths(self) -> Iterable[str]:
        return ()

    def size(self, path: str) -> int:
        raise FileNotFoundError(path)

    def read(self, path: str) -> str:
        raise FileNotFoundError(path)


@dataclass(frozen=True)
class Listing:
    """What a source listed on the host: the items the capture harness runs, and what the host decided by
    itself (a kind that runs nothing in the sandbox lists its suites here)."""

    items: tuple[CaptureItem, ...] = ()
    disabled: tuple[str, ...] = ()  # what CI skips, by label
    not_considered: tuple[str, ...] = ()  # what CI may run and the policy leaves out (a scope), by label
    suites: tuple[Suite, ...] = ()
    failed: tuple[CaptureFailure, ...] = ()
    no_entry: tuple[CaptureFailure, ...] = ()
    cases: int = 0  # host-listed cases, counted as scripts of the matrix
    captured: int = 0


@dataclass(frozen=True)
class ScriptReport:
    """One capture harness `script` message."""

    script: str
    status: str  # "captured" | "disabled" | "failed"
    launches: tuple[Mapping[str, Any], ...] = ()
    reason: str | None = None
    ended: bool = False  # the script ran to its end (or exited 0): nothing stopped it early
    # python_definitions: the definitions' runs ({"name", "argv"}) and the names of disabled definitions
    suites: tuple[Mapping[str, Any], ...] = ()
    disabled: tuple[str, ...] = ()
    # a producing job: what its last step wrote to $GITHUB_OUTPUT
    outputs: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> ScriptReport:
        suites = message.get("suites") or []
        disabled = message.get("disabled") or []
        outputs = message.get("outputs") or {}
        if not isinstance(suites, list) or not isinstance(disabled, list) or not isinstance(outputs, dict):
            raise TypeError("suites and disabled must be lists, outputs a mapping")
        return cls(script=str(message["script"]), status=str(message["status"]),
                   launches=tuple(message.get("launches") or ()), reason=message.get("reason"),
                   ended=message.get("ended") is True, suites=tuple(suites[:MAX_DEFINED_SUITES]),
                   disabled=tuple(str(name)[:MAX_DEFINED_CHARS] for name in disabled[:MAX_DEFINED_SUITES]),
                   outputs={str(k)[:MAX_DEFINED_CHARS]: str(v)[:MAX_OUTPUT_CHARS]
                            for k, v in list(outputs.items())[:MAX_OUTPUTS]})


@dataclass(frozen=True)
class Found:
    """What one report of the sandbox adds to the matrix: its suites, or the note saying why it has none or
    only part of them (`outcome` names the list: "failed", "no_entry", "partial"), and what CI skips."""

    suites: list[Suite] = field(default_factory=list)
    outcome: str = "captured"
    note: CaptureFailure | None = None
    disabled: list[str] = field(default_factory=list)
    ran: bool = True  # counted among the matrix's scripts (a script CI skips is not)


def listed_ids(source: BaseModel, listing: Listing) -> tuple[str, ...]:
    """The default cache key part of a kind: the ids of the items it listed for the sandbox."""
    return tuple(str(item["id"]) for item in listing.items)


@dataclass(frozen=True)
class SourceKind(Generic[Keys]):
    """One kind of matrix source.

    `keys`: its policy keys, a model whose `kind` literal is the kind's name. `list_items`: its items,
    listed on the host, given the source, the tree and where the source is in the policy
    (`matrix.sources[0]`). `recorded`: what a capture report of one item yields, given the source and
    where the sandbox mounted the tree; None for a kind the host lists completely (nothing of it runs in
    the sandbox). The capture harness records launches of every item, or, for `python_definitions`, the
    definitions the named function returns. `detect`: how `prtriage init` finds the kind in a tree (the
    tree's root and how its scripts' launches are recorded -> the source's keys, each with why). `needs`:
    the distributions the capture harness itself needs for the kind in the analysis environment, given the
    tree's root (`pytest` and the tree's pytest plugins), which `init` puts into the requirements, pinned,
    when it writes the kind.
    `produce`: for a kind whose items another CI job computes (a matrix `fromJSON(needs.<job>.outputs.<x>)`),
    the producing jobs to run in the sandbox first (their steps, `CaptureItem["steps"]`); `list_produced` then
    lists the items from their reports (`ScriptReport.outputs`), as `list_items` does from the tree alone.
    `cache_key`: what the kind adds to the key of a cached matrix, given the source and its listing; the
    tree's content, the policy's matrix and harness keys (`Policy.capture_digest`, the kind's own keys with
    them), the capture harness and the analysis environment are always in it; the default adds the ids of
    the items listed. A kind whose items depend on anything else (a value outside the tree) returns it here.
    """

    keys: type[Keys]
    list_items: Callable[[Keys, SourceTree, str], Listing]
    recorded: Callable[[ScriptReport, Keys, str], Found] | None = None
    detect: Callable[[Path, dict[str, Any]], Iterator[tuple[dict[str, Any], str]]] | None = None
    needs: Callable[[Path], list[str]] | None = None
    cache_key: Callable[[Keys, Listing], tuple[str, ...]] = listed_ids
    produce: Callable[[Keys, SourceTree, str], tuple[CaptureItem, ...]] | None = None
    list_produced: Callable[[Keys, SourceTree, str, Sequence[ScriptReport]], Listing] | None = None

    @property
    def name(self) -> str:
        return str(typing.get_args(self.keys.model_fields["kind"].annotation)[0])
