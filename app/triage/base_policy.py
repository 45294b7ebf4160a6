"""Which policy judges a revision: the repository's own `.github/pr-triage.yml` at that sha (the BASE of a
pull request, the commit itself for the default branch's health), else the built-in one for the
repository, else the default; and where it came from, as reports name it."""

from __future__ import annotations

import functools
from typing import Any

from app.analysis.core.policy import (
    POLICIES_DIR,
    Policy,
    PolicyError,
    builtin_policy,
    load_policy,
    parse_policy,
)
from app.github import GitHubClient

REPO_POLICY = ".github/pr-triage.yml"  # read at the base sha only: a PR cannot change its own verdict


def policy_at_base(client: GitHubClient, owner: str, repo: str, base_sha: str) -> Policy:
    """The repository's own policy at the BASE sha, else the built-in one for it, else the default."""
    return policy_with_source(client, owner, repo, base_sha)[0]


def policy_with_source(client: GitHubClient, owner: str, repo: str,
                       sha: str) -> tuple[Policy, dict[str, Any]]:
    """The policy at SHA and `{"source": "base"|"builtin"|"default", "path", "repository"}`."""
    data = client.get_file(owner, repo, REPO_POLICY, sha)
    full_name = f"{owner}/{repo}"
    if data is None:
        path = builtin_policy(owner, repo)
        kind = "default" if path.name == "default.yml" and path.parent == POLICIES_DIR else "builtin"
        return _builtin(owner, repo), {"source": kind, "path": f"policies/{path.relative_to(POLICIES_DIR)}",
                                       "repository": full_name}
    source = f"{owner}/{repo}@{sha[:12]}:{REPO_POLICY}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{source}: not UTF-8 text") from None
    return parse_policy(text, source), {"source": "base", "path": REPO_POLICY, "repository": full_name}


@functools.lru_cache(maxsize=256)
def _builtin(owner: str, repo: str) -> Policy:
    """The built-in policy for OWNER/REPO (parsed once: policies/ is part of the installed code)."""
    return load_policy(builtin_policy(owner, repo))
