"""Where today's files were at an older revision: renames read from a repository's first-parent history.

A policy is written against one snapshot; its globs name that snapshot's layout. At an older revision the
same files often sat elsewhere (radixark/miles' CI scripts were tests/test_*.py before they moved under
tests/e2e/). The renames between the two revisions, followed commit by commit (a file moved twice is
followed through both moves), give each of today's paths its older one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from app.trees.gitrepo import HERMETIC, GitError, _git


def earlier_paths(repo: Path, older: str, newer: str) -> dict[str, set[str]]:
    """Path at NEWER -> its paths at OLDER: renames followed commit by commit (a file edited a lot between
    its moves), and the two revisions compared directly with copies found (a file copied to its new place
    in one commit, the old one deleted in a later one, as git's per-commit detection cannot see)."""
    found: dict[str, set[str]] = {}
    for new, old in [*renamed_from(repo, older, newer).items(), *copied_from(repo, older, newer).items()]:
        found.setdefault(new, set()).add(old)
    return found


def renamed_from(repo: Path, older: str, newer: str) -> dict[str, str]:
    """Path at NEWER -> its path at OLDER, for every file a first-parent commit of OLDER..NEWER renamed
    (git's rename detection, 50% similarity); empty when OLDER is NEWER or not its ancestor."""
    try:
        log = _git(["log", "--first-parent", "--diff-merges=first-parent", "-M", "--diff-filter=R",
                    "--name-status", "--format=", "--reverse", "--end-of-options", f"{older}..{newer}", "--"],
                   cwd=repo, env={**os.environ, **HERMETIC})
    except GitError:
        return {}
    return follow(line.split("\t") for line in log.splitlines() if line.startswith("R"))


def copied_from(repo: Path, older: str, newer: str) -> dict[str, str]:
    """Path at NEWER -> the file of OLDER it is a rename or copy of (50% similarity), the two revisions
    compared directly."""
    try:
        diff = _git(["diff", "-M", "-C", "--find-copies-harder", "--name-status", "--diff-filter=RC",
                     "--no-ext-diff", "--end-of-options", older, newer, "--"], cwd=repo,
                    env={**os.environ, **HERMETIC})
    except GitError:
        return {}
    pairs = [line.split("\t") for line in diff.splitlines()]
    return {fields[2]: fields[1] for fields in pairs if len(fields) == 3}


def follow(renames: Iterable[list[str]]) -> dict[str, str]:
    """Renames (status, old, new), oldest first, composed: each final path -> the path it started at."""
    started: dict[str, str] = {}
    for fields in renames:
        if len(fields) != 3:
            continue
        _, old, new = fields
        origin = started.pop(old, old)
        if origin != new:
            started[new] = origin
    return started


def paths_at(repo: Path, rev: str) -> list[str]:
    """Every file of REV, repo-relative; empty when REV names no commit."""
    try:
        return _git(["ls-tree", "-r", "--name-only", "--full-tree", rev], cwd=repo,
                    env={**os.environ, **HERMETIC}).splitlines()
    except GitError:
        return []
