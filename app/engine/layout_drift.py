"""A policy followed to the layout of the revision it analyses, from the repository's history
(`app/analysis/core/layout.py` decides, `app/trees/renames.py` reads git)."""

from __future__ import annotations

from pathlib import Path

from app.analysis.core.layout import Layout, follow_layout, needs_following
from app.analysis.core.policy import Policy
from app.trees.gitrepo import GitError, resolve
from app.trees.renames import earlier_paths, paths_at

NEWER = "HEAD"  # the revision a policy's globs describe: the clone's newest checkout, where it was written


def follow_renames(policy: Policy, repo: Path | None, sha: str | None) -> tuple[Policy, tuple[str, ...]]:
    """POLICY as it applies at SHA of REPO, with notes on what was followed; POLICY itself when its globs
    all match there, or when there is no history to follow (a tree given without its repository)."""
    if repo is None or sha is None:
        return policy, ()
    present = set(paths_at(repo, sha))
    if not present or not needs_following(policy, present):
        return policy, ()
    try:
        newer = resolve(repo, NEWER)
    except GitError:
        return policy, ()
    newer_paths = set(paths_at(repo, newer))
    if not needs_following(policy, present, newer_paths):
        return policy, ()
    return follow_layout(policy, Layout(present, newer_paths, earlier_paths(repo, sha, newer), sha[:12]))
