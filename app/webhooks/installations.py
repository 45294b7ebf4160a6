"""Installation events: which accounts installed the App and which repositories it may see."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.webhooks.router import Decision, Job, Payload, Router, require

router = Router()

STATES = {"created": "active", "unsuspend": "active", "new_permissions_accepted": "active",
          "suspend": "suspended", "deleted": "deleted"}


def _repositories(listed: Any) -> list[dict[str, Any]]:
    if not isinstance(listed, list):
        return []
    return [{"id": int(repo["id"]), "full_name": str(repo["full_name"]), "private": bool(repo.get("private"))}
            for repo in listed if isinstance(repo, Mapping) and "id" in repo and "full_name" in repo]


def _installation(payload: Payload, state: str, added: Any, removed: Any) -> Job:
    installation_id = int(require(payload, "installation", "id"))
    account = require(payload, "installation", "account")
    return Job("installation", installation_id, {
        "account": {"login": str(account.get("login") or "ghost"), "type": account.get("type")},
        "state": state, "added": _repositories(added), "removed": _repositories(removed)})


@router.register("installation")
def record_installation(payload: Payload) -> Decision:
    state = STATES.get(str(payload.get("action")), "active")
    return _installation(payload, state, payload.get("repositories"), [])


@router.register("installation_repositories", "added", "removed")
def record_repositories(payload: Payload) -> Decision:
    return _installation(payload, "active", payload.get("repositories_added"),
                         payload.get("repositories_removed"))
