"""A policy as it applies at the revision it analyses: its globs followed to that revision's layout through
the repository's history (`app/analysis/core/layout.py` decides), then each source's launch in the form the
revision's files call for (`app/analysis/core/launch_forms.py`). One step, for the command line and the App
alike; only where the history comes from differs: git for the command line (`GitHistory`, through
`app/trees/renames.py`), the GitHub API for the App (`app/github/history.py`), both a `History`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Protocol

from app.analysis.core.launch_forms import fit_forms
from app.analysis.core.layout import Layout, follow_layout, needs_following
from app.analysis.core.policy import Policy
from app.trees.gitrepo import GitError, resolve
from app.trees.renames import earlier_paths, paths_at

NEWER = "HEAD"  # the revision a policy's globs describe: the clone's newest checkout, where it was written


class History(Protocol):
    """What a repository's history says of its layouts."""

    def paths_at(self, sha: str) -> Collection[str]:
        """Every file of SHA, repo-relative; empty when they cannot be known (no such commit)."""
        ...

    def newest(self) -> str | None:
        """The revision a policy's globs describe (where it was written): the newest one; None unknown."""
        ...

    def earlier_paths(self, older: str, newer: str) -> Mapping[str, Collection[str]]:
        """Path at NEWER -> its paths at OLDER, for the files renamed or copied in between."""
        ...


class GitHistory:
    """A local repository's history, read by git."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def paths_at(self, sha: str) -> Collection[str]:
        return paths_at(self.repo, sha)

    def newest(self) -> str | None:
        try:
            return resolve(self.repo, NEWER)
        except GitError:
            return None

    def earlier_paths(self, older: str, newer: str) -> Mapping[str, Collection[str]]:
        return earlier_paths(self.repo, older, newer)


def policy_at(policy: Policy, *, history: History | None, sha: str | None, read: Callable[[str], str | None],
              label: str) -> tuple[Policy, tuple[str, ...]]:
    """POLICY as it applies at the revision SHA (LABEL in notes when there is no sha), and the notes saying
    what of it was followed or formed there: its globs followed through HISTORY (none: a tree given without
    its repository), then each source's first fitting form (READ gives a file's text at the revision)."""
    policy, followed = follow_renames(policy, history, sha)
    policy, formed = fit_forms(policy, read, sha[:12] if sha else label)
    return policy, followed + formed


def follow_renames(policy: Policy, history: History | None,
                   sha: str | None) -> tuple[Policy, tuple[str, ...]]:
    """POLICY as it applies at SHA, with notes on what was followed; POLICY itself when its globs all match
    there, or when there is no history to follow. The history is read only as far as needed: the revision's
    paths first, the newest revision's and the renames only when a glob matches nothing there."""
    if history is None or sha is None:
        return policy, ()
    present = set(history.paths_at(sha))
    if not present or not needs_following(policy, present):
        return policy, ()
    newer = history.newest()
    if newer is None:
        return policy, ()
    newer_paths = set(history.paths_at(newer))
    if not needs_following(policy, present, newer_paths):
        return policy, ()
    return follow_layout(policy, Layout(present, newer_paths, history.earlier_paths(sha, newer), sha[:12]))
