"""The two revisions a pre-push check compares: the pushed head, and its merge base with the remote side.

pre-commit's pre-push stage says what is pushed in PRE_COMMIT_FROM_REF (the remote's sha of the branch, or
the parent of the first commit the remote lacks) and PRE_COMMIT_TO_REF (the local sha pushed); by hand,
without them, the current branch's upstream stands for the remote branch, and `origin/HEAD` without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app.trees.gitrepo import GitError, full_ref_name, merge_base, resolve

NO_COMMIT = "0" * 40  # git's "nothing" in a push: a branch created or deleted


@dataclass(frozen=True)
class PushedRange:
    base: str  # the merge base: what the pushed commits are compared with
    head: str
    against: str  # how the base was found, for messages


def pushed_range(repo: Path, environment: Mapping[str, str]) -> PushedRange | None:
    """The range to check; None when the push carries nothing to check (a deleted branch, nothing new)."""
    to_ref = environment.get("PRE_COMMIT_TO_REF") or "HEAD"
    if set(to_ref) == {"0"}:
        return None
    head = resolve(repo, to_ref)
    against = _remote_side(repo, environment.get("PRE_COMMIT_FROM_REF", ""))
    base = merge_base(repo, against, head)
    if base is None:
        raise GitError(f"{against} and {head[:12]} share no history: nothing to compare the push with")
    return None if base == head else PushedRange(base, head, against)


def _remote_side(repo: Path, from_ref: str) -> str:
    if from_ref and set(from_ref) != {"0"}:
        try:
            return resolve(repo, from_ref)
        except GitError:  # the remote moved on to commits this clone has not fetched: use what it knows
            pass
    for candidate in ("@{upstream}", "origin/HEAD"):
        name = full_ref_name(repo, candidate)
        if name is not None:
            return name
    raise GitError("no branch to compare with: the current branch has no upstream (`git branch "
                   "--set-upstream-to`) and there is no origin/HEAD; PRE_COMMIT_FROM_REF is unset")
