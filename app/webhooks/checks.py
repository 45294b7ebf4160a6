"""Check events: "Re-run" on our check run or on its suite, and the check run's own "rerun" button, ask for
a new triage of the pull request's current head. Whether the check is ours is decided by the job (it looks
for a run that reported to that check run), not by names a payload can carry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.report import RERUN_ACTION  # the identifier of the button the completed check run carries
from app.webhooks.router import Decision, Ignored, Job, Payload, Router, installation_id, repository, require

router = Router()


def _numbers(pull_requests: Any) -> list[int]:
    """The PR numbers a check run or suite lists (empty for pushes to forks, as GitHub documents)."""
    if not isinstance(pull_requests, list):
        return []
    return [int(pr["number"]) for pr in pull_requests if isinstance(pr, Mapping) and "number" in pr]


@router.register("check_run", "rerequested", "requested_action")
def rerun_check_run(payload: Payload) -> Decision:
    check_run = require(payload, "check_run")
    if payload["action"] == "requested_action":
        identifier = require(payload, "requested_action", "identifier")
        if identifier != RERUN_ACTION:
            return Ignored(f"requested_action {str(identifier)[:40]!r}: not an action of ours")
    return Job("triage", installation_id(payload), {
        "repository": repository(payload), "numbers": _numbers(check_run.get("pull_requests")),
        "head_sha": str(require(payload, "check_run", "head_sha")),
        "check_run_id": int(require(payload, "check_run", "id")), "reason": f"check_run.{payload['action']}"})


@router.register("check_suite", "rerequested")
def rerun_check_suite(payload: Payload) -> Decision:
    suite = require(payload, "check_suite")
    app = suite.get("app")
    return Job("triage", installation_id(payload), {
        "repository": repository(payload), "numbers": _numbers(suite.get("pull_requests")),
        "head_sha": str(require(payload, "check_suite", "head_sha")),
        "app_id": int(app["id"]) if isinstance(app, Mapping) and "id" in app else None,
        "reason": "check_suite.rerequested"})
