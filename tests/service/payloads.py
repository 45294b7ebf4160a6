"""Real webhook payloads (tests/fixtures/github/webhooks: copies of the shared GitHub fixtures, compared
with them by tests/github/test_localgithub_copies.py), pointed at the fake GitHub (only ids, names, shas
and URLs are changed), and signed as GitHub signs them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from app.demo.localgithub import FakeGitHub
from app.demo.localgithub import hook_deliveries as deliveries
from app.demo.localgithub.hook_deliveries import encode as encode  # re-exported for the tests
from app.demo.localgithub.hook_deliveries import point_at as point_at  # re-exported for the tests
from app.demo.localgithub.hook_deliveries import pull_request_payload

WEBHOOKS = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhooks"

SECRET = "It's a Secret to Everybody"  # GitHub's own example secret for webhook signatures


def sha(name: str) -> str:
    """A stable 40-hex commit sha for a test's named revision."""
    return hashlib.sha1(name.encode()).hexdigest()


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((WEBHOOKS / f"{name}.json").read_text())
    return loaded


def pull_request_event(fake: FakeGitHub, action: str, *, full_name: str, number: int, head_sha: str,
                       base_sha: str, installation_id: int = 1, variant: str | None = None) -> dict[str, Any]:
    """The shared `pull_request/<action>[.<variant>]` payload for the fake's FULL_NAME#NUMBER."""
    payload = fixture(f"pull_request/{action}" + (f".{variant}" if variant else ""))
    return pull_request_payload(payload, fake, full_name=full_name, number=number, head_sha=head_sha,
                                base_sha=base_sha, installation_id=installation_id)


def check_run_event(fake: FakeGitHub, action: str, *, full_name: str, check_run_id: int, head_sha: str,
                    number: int | None, installation_id: int = 1) -> dict[str, Any]:
    payload = fixture(f"check_run/{action}")
    repo = fake.repo(full_name)
    assert repo is not None
    adapted = point_at(payload, fake, full_name, repo.id)
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
    return deliveries.signature(body, secret)


def delivery_headers(event: str, body: bytes, *, guid: str | None = None, secret: str = SECRET,
                     ) -> dict[str, str]:
    """The headers GitHub sends with a delivery of BODY."""
    return deliveries.delivery_headers(event, body, secret=secret, guid=guid)
