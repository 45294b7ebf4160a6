"""Push events: a push to the default branch asks for its health (app/triage/main_health.py); pushes to
other branches are pull requests' business, triaged from their own events."""

from __future__ import annotations

from app.triage.job_payloads import MainHealthJob
from app.webhooks.payloads import PushEvent
from app.webhooks.router import Decision, Ignored, Job, Router

router = Router()


@router.register("push", model=PushEvent)
def check_default_branch(event: PushEvent) -> Decision:
    branch = event.repository.default_branch
    if event.ref != f"refs/heads/{branch}":
        return Ignored("a push to another branch than the default one")
    if event.deleted or event.after.strip("0") == "":
        return Ignored("the default branch was deleted")
    before = event.before if event.before and event.before.strip("0") else None
    commits = tuple(commit.id for commit in event.commits or [])
    return Job.of(MainHealthJob(event.installation_id, event.repository.ref(), branch, event.after, before,
                                commits))
