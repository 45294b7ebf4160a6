"""Pull request events: a change to what the PR would merge asks for a triage of its head; a close is
recorded, and a merge opens and closes risk windows (app/triage/risk_windows.py)."""

from __future__ import annotations

from app.triage.job_payloads import ClosedJob, TriageJob
from app.webhooks.payloads import PullRequestEvent
from app.webhooks.router import Decision, Ignored, Job, Router

router = Router()

# Draft PRs are triaged too: the verdict is most useful before review. ready_for_review triages again,
# because branch protection may only start to require the check then.
CHANGES_HEAD = ("opened", "reopened", "synchronize", "ready_for_review")
# Only these edits can change the verdict or its follow-ups; a title edit cannot.
EDITS_THAT_MATTER = ("body", "base")


def _triage(event: PullRequestEvent, reason: str) -> Job:
    return Job.of(TriageJob(event.installation_id, event.repository.ref(), (event.pull_request.number,),
                            event.pull_request.head.sha, reason))


@router.register("pull_request", *CHANGES_HEAD, model=PullRequestEvent)
def triage_new_head(event: PullRequestEvent) -> Decision:
    return _triage(event, event.action)


@router.register("pull_request", "edited", model=PullRequestEvent)
def triage_edit(event: PullRequestEvent) -> Decision:
    changed = sorted(event.changes or {})
    if not any(key in changed for key in EDITS_THAT_MATTER):
        return Ignored(f"edited {', '.join(changed)[:200] or 'nothing'}: cannot change the verdict")
    return _triage(event, "edited")


@router.register("pull_request", "closed", model=PullRequestEvent)
def record_close(event: PullRequestEvent) -> Decision:
    pull = event.pull_request
    # who merged it is the actor of the risk-window changes the merge makes
    merger = pull.merged_by or event.sender
    return Job.of(ClosedJob(event.installation_id, event.repository.ref(), pull.number, bool(pull.merged),
                            (merger.login if merger else None) or "prtriage"))
