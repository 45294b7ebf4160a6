"""A policy's globs followed to an older revision's layout, through the renames between the two.

A policy names the files of the snapshot it was written at. Where one of its globs matches nothing at the
analysed revision, the files it matches at the newer revision are looked up under the paths they had there
before being renamed (`app/trees/renames.py` reads them from git), and the revision's files at those paths
stand in for the glob. Never silent: each substitution is a note the report carries, and a glob followed to
nothing is a note too (the analysis then says what it could not capture, as before).

Pure: the revision's paths, the newer revision's paths and the renames come in as values.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from app.analysis.core.policy import Policy, path_matches

SHOWN = 3  # older paths named in a note; the rest counted


@dataclass(frozen=True)
class Layout:
    """What the analysed revision has, what the newer one has, and the renames between them."""

    present: Collection[str]  # the analysed revision's files
    newer: Collection[str]  # the files of the revision the policy's globs describe
    renamed: Mapping[str, Collection[str]]  # path at the newer revision -> its paths at the analysed one
    revision: str  # how notes name the analysed revision

    def matches(self, globs: list[str], exclude: Iterable[str] = ()) -> bool:
        return any(_matched(path, globs, exclude) for path in self.present)

    def drifted(self, globs: list[str], exclude: Iterable[str] = ()) -> bool:
        """The globs match nothing at the revision and something at the newer one."""
        return not self.matches(globs, exclude) and any(_matched(p, globs, exclude) for p in self.newer)

    def older_paths(self, globs: list[str], exclude: list[str]) -> list[str]:
        """The analysed revision's paths of the newer revision's files the globs match."""
        return sorted({older for path in self.newer if _matched(path, globs, exclude)
                       for older in self.renamed.get(path, ()) if older in self.present})


def _matched(path: str, globs: list[str], exclude: Iterable[str]) -> bool:
    return any(path_matches(path, g) for g in globs) and not any(path_matches(path, g) for g in exclude)


# The keys of each source kind that are globs of the revision's files, and the key of globs they leave out.
FOLLOWED: dict[str, tuple[tuple[str, str | None], ...]] = {
    "record_launches": (("scripts", "exclude"),),
    "workflow_steps": (("workflows", None), ("scripts", None)),
    "workflow_rows": (("workflows", None),),
    "pytest_launches": (("workflows", None),),
    "yaml_args": (("recipes", None), ("files", None)),
}


def _globbed(source: BaseModel) -> list[tuple[str, list[str], list[str]]]:
    """(key, globs, excluded globs) of each non-empty glob key of SOURCE."""
    kind = str(getattr(source, "kind", ""))
    return [(key, list(getattr(source, key)), list(getattr(source, exclude)) if exclude else [])
            for key, exclude in FOLLOWED.get(kind, ()) if getattr(source, key, None)]


def needs_following(policy: Policy, present: Collection[str], newer: Collection[str] = ()) -> bool:
    """Some glob of a source's file keys or some validation path matches nothing at the revision (and, NEWER
    given, something there: a glob that matches nowhere is no drift, and costs no reading of the history)."""
    layout = Layout(present, newer, {}, "")
    lost = layout.drifted if newer else (lambda globs, excluded=(): not layout.matches(globs, excluded))
    return (any(lost([glob], excluded) for source in policy.matrix.sources
                for _, globs, excluded in _globbed(source) for glob in globs)
            or any(lost([glob]) for glob in policy.validation.paths))


def follow_layout(policy: Policy, layout: Layout) -> tuple[Policy, tuple[str, ...]]:
    """POLICY with each glob key of its sources that matches nothing at the revision replaced by, and each
    validation path that does widened with, the older paths of the files it matches at the newer revision;
    and a note for each."""
    notes: list[str] = []
    sources = [_followed(source, f"matrix.sources[{index}]", layout, notes.append)
               for index, source in enumerate(policy.matrix.sources)]
    paths = list(policy.validation.paths)
    for glob in policy.validation.paths:
        older = layout.older_paths([glob], []) if layout.drifted([glob]) else []
        if older:  # a path with no older one is a file added since: nothing of it to analyse here
            paths += [p for p in older if p not in paths]
            notes.append(_note("validation.paths", [glob], layout.revision, older))
    if not notes:
        return policy, ()
    followed = policy.model_copy(update={
        "matrix": policy.matrix.model_copy(update={"sources": sources}),
        "validation": policy.validation.model_copy(update={"paths": paths})})
    return followed, tuple(notes)


def _followed(source: Any, where: str, layout: Layout, note: Callable[[str], None]) -> Any:
    """SOURCE with each glob of its file keys that matches nothing at the revision replaced by the older
    paths of what it matches at the newer one, glob by glob: one key often lists a directory that moved
    beside one that did not (volcengine/verl's `tests/special_e2e/**/*.sh`, `tests/e2e/` before 2025-06, next
    to `examples/**/*.sh`), and the key as a whole still matching hid the move."""
    update: dict[str, list[str]] = {}
    for key, globs, excluded in _globbed(source):
        lost = [glob for glob in globs if layout.drifted([glob], excluded)]
        if not lost:
            continue
        kept = [glob for glob in globs if glob not in lost]
        older = layout.older_paths(lost, excluded)
        if older or not kept:  # a lost glob beside kept ones, with no older file, names files added since
            note(_note(f"{where}.{key}", lost, layout.revision, older))
        if older:
            update[key] = kept + older
            if excluded and not kept:  # the older paths themselves: excluded globs applied to the newer ones
                update["exclude"] = []
    return source.model_copy(update=update) if update else source


def _note(key: str, globs: list[str], revision: str, older: list[str]) -> str:
    said = f"the policy's {key} {', '.join(globs)} matched nothing at {revision}"
    if not older:
        return f"{said}, nor did any file it matches today exist there under an older name"
    more = f" and {len(older) - SHOWN} more" if len(older) > SHOWN else ""
    return (f"{said}; used the {len(older)} files it matches today at their paths there, before they "
            f"were renamed or copied ({', '.join(older[:SHOWN])}{more})")
