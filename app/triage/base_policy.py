"""Which policy judges a revision: the repository's own `.github/pr-triage.yml` at that sha (the BASE of a
pull request, the commit itself for the default branch's health), else the built-in one for the
repository, else the default; and where it came from, as reports name it. Then that policy as it applies
at the revision whose matrix is captured (`policy_applied`): its globs followed to an older layout and its
launches formed as that revision's files call for, through the GitHub API (the App has no clone)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from app.analysis.core.policy import Policy, PolicyError, load_policy, parse_policy
from app.analysis.core.policy_origin import REPO_POLICY, PolicyOrigin, base_origin, builtin_for
from app.engine.layout_drift import policy_at
from app.github import GitHubClient
from app.github.history import GitHubHistory

# read at the base sha only, applied at the captured revision
__all__ = ["REPO_POLICY", "policy_applied", "policy_at_base", "policy_with_source"]


def policy_at_base(client: GitHubClient, owner: str, repo: str, base_sha: str) -> tuple[Policy, PolicyOrigin]:
    """The repository's own policy at the BASE sha (a PR cannot change its own verdict), else the built-in one
    for it, else the default; with where it came from (the report says it)."""
    data = client.get_file(owner, repo, REPO_POLICY, base_sha)
    if data is None:
        return _builtin(owner, repo)
    source = f"{owner}/{repo}@{base_sha[:12]}:{REPO_POLICY}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{source}: not UTF-8 text") from None
    return parse_policy(text, source), base_origin(f"{owner}/{repo}")


def policy_with_source(client: GitHubClient, owner: str, repo: str,
                       sha: str) -> tuple[Policy, dict[str, Any]]:
    """The policy at SHA, applied at SHA (a commit of the default branch doctored after the branch moved on,
    or probed by a search, may predate a move of its CI scripts), and `{"source": "base"|"builtin"|"default",
    "path", "repository"}` with `followed` when something was."""
    policy, origin = policy_at_base(client, owner, repo, sha)
    policy, origin = policy_applied(client, owner, repo, policy, origin, sha)
    return policy, origin.to_json()


def policy_applied(client: GitHubClient, owner: str, repo: str, policy: Policy, origin: PolicyOrigin,
                   sha: str) -> tuple[Policy, PolicyOrigin]:
    """POLICY as it applies at SHA (app/engine/layout_drift.py, as the command line applies it), with
    ORIGIN noting what was followed or formed there: a pull request based on an older main or a release
    branch has its CI scripts where they were then, not where the policy's globs name them today."""
    applied, notes = policy_at(policy, history=GitHubHistory(client, owner, repo), sha=sha,
                               read=functools.partial(_text_at, client, owner, repo, sha), label=sha[:12])
    return applied, dataclasses.replace(origin, followed=notes)


def _text_at(client: GitHubClient, owner: str, repo: str, sha: str, path: str) -> str | None:
    """PATH's text at SHA, None when there is no such file (or the path leaves the repository)."""
    try:
        data = client.get_file(owner, repo, path, sha)
    except ValueError:
        return None
    return None if data is None else data.decode("utf-8", errors="replace")


@functools.lru_cache(maxsize=256)
def _builtin(owner: str, repo: str) -> tuple[Policy, PolicyOrigin]:
    """The built-in policy for OWNER/REPO (parsed once: policies/ is part of the installed code)."""
    path, origin = builtin_for(f"{owner}/{repo}", "the pull request")
    return load_policy(path), origin
