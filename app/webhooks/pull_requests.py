"""Pull request events: a change to what the PR would merge asks for a triage of its head; a close is
recorded, and a merge opens and closes risk windows (app/windows.py)."""

from __future__ import annotations

from app.webhooks.router import Decision, Ignored, Job, Payload, Router, installation_id, repository, require

router = Router()

# Draft PRs are triaged too: the verdict is most useful before review. ready_for_review triages again,
# because branch protection may only start to require the check then.
CHANGES_HEAD = ("opened", "reopened", "synchronize", "ready_for_review")
# Only these edits can change the verdict or its follow-ups; a title edit cannot.
EDITS_THAT_MATTER = ("body", "base")


def _triage(payload: Payload, reason: str) -> Job:
    number = int(require(payload, "pull_request", "number"))
    head_sha = str(require(payload, "pull_request", "head", "sha"))
    return Job("triage", installation_id(payload), {
        "repository": repository(payload), "numbers": [number], "head_sha": head_sha, "reason": reason})


@router.register("pull_request", *CHANGES_HEAD)
def triage_new_head(payload: Payload) -> Decision:
    return _triage(payload, str(payload["action"]))


@router.register("pull_request", "edited")
def triage_edit(payload: Payload) -> Decision:
    changes = payload.get("changes")
    changed = sorted(changes) if isinstance(changes, dict) else []
    if not any(key in changed for key in EDITS_THAT_MATTER):
        return Ignored(f"edited {', '.join(changed) or 'nothing'}: cannot change the verdict")
    return _triage(payload, "edited")


@router.register("pull_request", "closed")
def record_close(payload: Payload) -> Decision:
    number = int(require(payload, "pull_request", "number"))
    pull = require(payload, "pull_request")
    merged = bool(pull.get("merged"))
    # who merged it is the actor of the risk-window changes the merge makes
    merger = pull.get("merged_by") or payload.get("sender") or {}
    return Job("pull_request_closed", installation_id(payload), {
        "repository": repository(payload), "number": number, "merged": merged,
        "actor": str(merger.get("login") or "prtriage")})
