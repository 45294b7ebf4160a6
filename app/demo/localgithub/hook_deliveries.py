"""Webhook deliveries as GitHub sends them, for the local GitHub's repositories: a real payload (of
`webhooks/`, or one the caller loaded) with only ids, names, shas and URLs changed, signed with the
webhook secret."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Any

from app.bundled import package_file
from app.demo.localgithub.server import FakeGitHub

WEBHOOKS = package_file("app.demo.localgithub", "webhooks")


def packaged(name: str) -> dict[str, Any]:
    """The real payload `webhooks/NAME.json` shipped with the package (e.g. `pull_request/opened`)."""
    loaded: dict[str, Any] = json.loads((WEBHOOKS / f"{name}.json").read_text())
    return loaded


def point_at(payload: dict[str, Any], fake: FakeGitHub, full_name: str, repo_id: int) -> dict[str, Any]:
    """PAYLOAD's repository and URLs replaced by the fake's (text replacement, then the ids)."""
    original = payload["repository"]["full_name"]
    text = json.dumps(payload).replace("https://api.github.com", fake.url).replace(original, full_name)
    adapted: dict[str, Any] = json.loads(text)
    owner, name = full_name.split("/")
    adapted["repository"].update(id=repo_id, name=name, full_name=full_name)
    adapted["repository"]["owner"]["login"] = owner
    return adapted


def pull_request_payload(payload: dict[str, Any], fake: FakeGitHub, *, full_name: str, number: int,
                         head_sha: str, base_sha: str, installation_id: int = 1) -> dict[str, Any]:
    """A `pull_request` PAYLOAD (any action) made about the fake's FULL_NAME#NUMBER at HEAD_SHA on
    BASE_SHA; the repository must have been added to the fake."""
    repo = fake.repo(full_name)
    if repo is None:
        raise ValueError(f"{full_name}: add the repository to the local GitHub first")
    adapted = point_at(payload, fake, full_name, repo.id)
    adapted["number"] = number
    pull = adapted["pull_request"]
    pull.update(number=number, url=f"{fake.url}/repos/{full_name}/pulls/{number}",
                html_url=f"https://github.com/{full_name}/pull/{number}")
    pull["head"]["sha"], pull["base"]["sha"] = head_sha, base_sha
    pull["base"]["repo"].update(id=repo.id, full_name=full_name, name=full_name.split("/")[1])
    if adapted.get("action") == "synchronize":
        adapted["after"] = head_sha
    adapted["installation"] = {"id": installation_id, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ=="}
    return adapted


def push_payload(fake: FakeGitHub, *, full_name: str, before: str | None, commits: list[str],
                 installation_id: int = 1) -> dict[str, Any]:
    """A `push` of COMMITS (oldest first) to the fake's FULL_NAME's default branch, the fields GitHub sends
    that prtriage reads."""
    repo = fake.repo(full_name)
    if repo is None:
        raise ValueError(f"{full_name}: add the repository to the local GitHub first")
    return {"ref": f"refs/heads/{repo.default_branch}", "before": before or "0" * 40, "after": commits[-1],
            "created": before is None, "deleted": False, "forced": False,
            "repository": {"id": repo.id, "name": repo.name, "full_name": full_name, "private": False,
                           "owner": {"login": repo.owner}, "default_branch": repo.default_branch},
            "installation": {"id": installation_id}, "commits": [{"id": sha} for sha in commits],
            "sender": {"login": "octocat"}}


def signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery_headers(event: str, body: bytes, *, secret: str, guid: str | None = None) -> dict[str, str]:
    """The headers GitHub sends with a delivery of BODY."""
    return {"X-GitHub-Event": event, "X-GitHub-Delivery": guid or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature(body, secret), "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/local"}


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()
