"""Real webhook payloads from the shared fixtures, pointed at the fake GitHub (only ids, names, shas and URLs
are changed), and signed as GitHub signs them."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any

from fakegithub import FakeGitHub

WEBHOOKS = Path("/work/shared/fixtures/github/webhooks")
if not WEBHOOKS.is_dir():  # a checkout outside this machine's layout
    WEBHOOKS = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "github" / "webhooks"

SECRET = "It's a Secret to Everybody"  # GitHub's own example secret for webhook signatures


def sha(name: str) -> str:
    """A stable 40-hex commit sha for a test's named revision."""
    return hashlib.sha1(name.encode()).hexdigest()


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((WEBHOOKS / f"{name}.json").read_text())
    return loaded


def _point_at(payload: dict[str, Any], fake: FakeGitHub, full_name: str, repo_id: int) -> dict[str, Any]:
    """PAYLOAD's repository and URLs replaced by the fake's (text replacement, then the ids)."""
    original = payload["repository"]["full_name"]
    text = json.dumps(payload).replace("https://api.github.com", fake.url).replace(original, full_name)
    adapted: dict[str, Any] = json.loads(text)
    owner, name = full_name.split("/")
    adapted["repository"].update(id=repo_id, name=name, full_name=full_name)
    adapted["repository"]["owner"]["login"] = owner
    return adapted


def pull_request_event(fake: FakeGitHub, action: str, *, full_name: str, number: int, head_sha: str,
                       base_sha: str, installation_id: int = 1, variant: str | None = None) -> dict[str, Any]:
    """The shared `pull_request/<action>[.<variant>]` payload for the fake's FULL_NAME#NUMBER."""
    payload = fixture(f"pull_request/{action}" + (f".{variant}" if variant else ""))
    repo = fake.repo(full_name)
    assert repo is not None, f"add {full_name} to the fake first"
    adapted = _point_at(payload, fake, full_name, repo.id)
    adapted["number"] = number
    pull = adapted["pull_request"]
    pull.update(number=number, url=f"{fake.url}/repos/{full_name}/pulls/{number}",
                html_url=f"https://github.com/{full_name}/pull/{number}")
    pull["head"]["sha"], pull["base"]["sha"] = head_sha, base_sha
    pull["base"]["repo"].update(id=repo.id, full_name=full_name, name=full_name.split("/")[1])
    if action == "synchronize":
        adapted["after"] = head_sha
    adapted["installation"] = {"id": installation_id, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ=="}
    return adapted


def check_run_event(fake: FakeGitHub, action: str, *, full_name: str, check_run_id: int, head_sha: str,
                    number: int | None, installation_id: int = 1) -> dict[str, Any]:
    payload = fixture(f"check_run/{action}")
    repo = fake.repo(full_name)
    assert repo is not None
    adapted = _point_at(payload, fake, full_name, repo.id)
    check_run = adapted["check_run"]
    check_run.update(id=check_run_id, head_sha=head_sha)
    check_run["app"]["id"] = fake.app_id
    check_run["pull_requests"] = [] if number is None else [
        {"url": f"{fake.url}/repos/{full_name}/pulls/{number}", "id": number, "number": number,
         "head": {"ref": "topic", "sha": head_sha, "repo": {"id": repo.id, "url": "", "name": repo.name}},
         "base": {"ref": "main", "sha": "0" * 40, "repo": {"id": repo.id, "url": "", "name": repo.name}}}]
    adapted["installation"] = {"id": installation_id, "node_id": "x"}
    return adapted


def signature(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery_headers(event: str, body: bytes, *, guid: str | None = None, secret: str = SECRET,
                     ) -> dict[str, str]:
    """The headers GitHub sends with a delivery of BODY."""
    return {"X-GitHub-Event": event, "X-GitHub-Delivery": guid or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature(body, secret), "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/test"}


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()
