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

from app.analysis.core.policy import Policy, path_matches
from app.analysis.sources.record_launches_keys import RecordLaunches

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


def needs_following(policy: Policy, present: Collection[str]) -> bool:
    """Some source's scripts or some validation path match nothing at the revision."""
    layout = Layout(present, (), {}, "")
    return (any(not layout.matches(s.scripts, s.exclude) for s in _launching(policy))
            or any(not layout.matches([glob]) for glob in policy.validation.paths))


def follow_layout(policy: Policy, layout: Layout) -> tuple[Policy, tuple[str, ...]]:
    """POLICY with each glob that matches nothing at the revision replaced by (scripts) or widened with
    (validation paths) the older paths of the files it matches at the newer revision; and a note for each."""
    notes: list[str] = []
    sources = [_followed(source, f"matrix.sources[{index}]", layout, notes.append)
               if isinstance(source, RecordLaunches) else source
               for index, source in enumerate(policy.matrix.sources)]
    paths = list(policy.validation.paths)
    for glob in policy.validation.paths:
        if layout.drifted([glob]):
            older = layout.older_paths([glob], [])
            paths += [p for p in older if p not in paths]
            notes.append(_note("validation.paths", [glob], layout.revision, older))
    if not notes:
        return policy, ()
    followed = policy.model_copy(update={
        "matrix": policy.matrix.model_copy(update={"sources": sources}),
        "validation": policy.validation.model_copy(update={"paths": paths})})
    return followed, tuple(notes)


def _followed(source: RecordLaunches, where: str, layout: Layout,
              note: Callable[[str], None]) -> RecordLaunches:
    if not layout.drifted(source.scripts, source.exclude):
        return source
    older = layout.older_paths(source.scripts, source.exclude)
    note(_note(f"{where}.scripts", source.scripts, layout.revision, older))
    if not older:
        return source
    # the older paths themselves: `exclude` was applied to the newer ones already
    return source.model_copy(update={"scripts": older, "exclude": []})


def _launching(policy: Policy) -> list[RecordLaunches]:
    return [s for s in policy.matrix.sources if isinstance(s, RecordLaunches)]


def _note(key: str, globs: list[str], revision: str, older: list[str]) -> str:
    said = f"the policy's {key} {', '.join(globs)} matched nothing at {revision}"
    if not older:
        return f"{said}, nor did any file it matches today exist there under an older name"
    more = f" and {len(older) - SHOWN} more" if len(older) > SHOWN else ""
    return (f"{said}; used the {len(older)} files it matches today at their paths there, before they "
            f"were renamed or copied ({', '.join(older[:SHOWN])}{more})")
