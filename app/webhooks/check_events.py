"""Check events: "Re-run" on our check run or on its suite, and the check run's own "rerun" button, ask for
a new triage of the pull request's current head. Whether the check is ours is decided by the job (it looks
for a run that reported to that check run), not by names a payload can carry."""

from __future__ import annotations

from app.triage.job_payloads import TriageJob
from app.triage.pr_report import RERUN_ACTION  # the identifier of the button the completed check run carries
from app.webhooks.payloads import CheckRunEvent, CheckSuiteEvent, PullRef
from app.webhooks.router import Decision, Ignored, Job, Router

router = Router()


def _numbers(pull_requests: list[PullRef]) -> tuple[int, ...]:
    """The PR numbers a check run or suite lists (empty for pushes to forks, as GitHub documents)."""
    return tuple(pull.number for pull in pull_requests)


@router.register("check_run", "rerequested", "requested_action", model=CheckRunEvent)
def rerun_check_run(event: CheckRunEvent) -> Decision:
    check_run = event.check_run
    if event.action == "requested_action":
        # GitHub's schema makes both optional: without them it is no button of ours
        identifier = event.requested_action.identifier if event.requested_action else None
        if identifier != RERUN_ACTION:
            return Ignored(f"requested_action {(identifier or '')[:40]!r}: not an action of ours")
    return Job.of(TriageJob(event.installation_id, event.repository.ref(), _numbers(check_run.pull_requests),
                            check_run.head_sha, f"check_run.{event.action}", check_run_id=check_run.id))


@router.register("check_suite", "rerequested", model=CheckSuiteEvent)
def rerun_check_suite(event: CheckSuiteEvent) -> Decision:
    suite = event.check_suite
    if suite.app is not None and suite.app.id is None:  # GitHub's schema allows it: not ours to re-run
        return Ignored("a check suite of an app without an id")
    app_id = suite.app.id if suite.app else None
    return Job.of(TriageJob(event.installation_id, event.repository.ref(), _numbers(suite.pull_requests),
                            suite.head_sha, "check_suite.rerequested", app_id=app_id))
