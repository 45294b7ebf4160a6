"""Which policy judges a revision: the repository's own `.github/pr-triage.yml` at that sha (the BASE of a
pull request, the commit itself for the default branch's health), else the built-in one for the
repository, else the default; and where it came from, as reports name it."""

from __future__ import annotations

import functools
from typing import Any

from app.analysis.core.policy import Policy, PolicyError, load_policy, parse_policy
from app.analysis.core.policy_origin import REPO_POLICY, PolicyOrigin, base_origin, builtin_for
from app.github import GitHubClient

__all__ = ["REPO_POLICY", "policy_at_base", "policy_with_source"]  # read at the base sha only


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
    """The policy at SHA and `{"source": "base"|"builtin"|"default", "path", "repository"}`."""
    policy, origin = policy_at_base(client, owner, repo, sha)
    return policy, origin.to_json()


@functools.lru_cache(maxsize=256)
def _builtin(owner: str, repo: str) -> tuple[Policy, PolicyOrigin]:
    """The built-in policy for OWNER/REPO (parsed once: policies/ is part of the installed code)."""
    path, origin = builtin_for(f"{owner}/{repo}", "the pull request")
    return load_policy(path), origin
