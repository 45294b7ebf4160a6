"""Triage runs: one per head sha; a newer head supersedes the older ones, results are stored once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, select, update
from sqlalchemy.orm import Session

from app.store.leases import HANDOVER
from app.store.models import Conclusion, Finding, PullRequest, RunEvent, SuiteOutcome, TriageRun
from app.store.rows import get_or_raise
from app.store.types import utcnow

ACTIVE = ("queued", "running")


@dataclass(frozen=True)
class StartedRun:
    run: TriageRun
    superseded: list[TriageRun]  # the PR's runs that were still queued or running: cancel their check runs


def start_run(session: Session, *, pr: PullRequest | int, head_sha: str, base_sha: str) -> StartedRun:
    """A queued run for `head_sha`; the PR's queued and running runs become superseded by it."""
    pr_id = pr if isinstance(pr, int) else pr.id
    # Lock the PR row so two starts for one PR take turns (PostgreSQL; SQLite's write lock already does).
    pull = get_or_raise(session, PullRequest, pr_id, lock=True)
    now = utcnow()
    older = list(session.scalars(select(TriageRun).where(TriageRun.pull_request_id == pr_id,
                                                         TriageRun.status.in_(ACTIVE))))
    for run in older:
        run.status, run.conclusion, run.finished_at = "superseded", "cancelled", now
        run.superseded_by = head_sha
    run = TriageRun(pull_request_id=pr_id, repository_id=pull.repository_id, head_sha=head_sha,
                    base_sha=base_sha, status="queued", created_at=now, lease_until=now + HANDOVER)
    session.add(run)
    session.flush()
    return StartedRun(run, older)


def mark_running(session: Session, *, run_id: int, check_run_id: int | None = None) -> TriageRun:
    """The job started (a superseded run stays superseded); remember the check run it reports to."""
    run = get_or_raise(session, TriageRun, run_id)
    if run.status == "queued":
        run.status, run.started_at = "running", utcnow()
    if check_run_id is not None:
        run.check_run_id = check_run_id
    return run


def is_current(session: Session, *, run_id: int) -> bool:
    """Whether the run's verdict may still be posted: not superseded, no newer run, the PR's head unchanged.

    Newer means a higher id: ids come from one sequence, unlike clocks on several worker machines.
    """
    run = get_or_raise(session, TriageRun, run_id)
    if run.status == "superseded":
        return False
    newer = exists().where(TriageRun.pull_request_id == run.pull_request_id, TriageRun.id > run.id)
    moved = exists().where(PullRequest.id == run.pull_request_id, PullRequest.head_sha != run.head_sha)
    return not session.scalar(select(newer | moved))


def finish_run(session: Session, *, run_id: int, conclusion: Conclusion, summary: Mapping[str, Any],
               suites: Iterable[Mapping[str, Any]], findings: Iterable[Mapping[str, Any]],
               timing: Mapping[str, Any] | None = None) -> TriageRun:
    """Store the run's report, suite outcomes and findings, and complete it.

    `suites`: `Suite.to_json()` shapes (`id`, `script`, `argv`) plus `base` and `head`, each an
    `Outcome.to_json()` or None. `findings`: `Finding.to_json()` shapes. A run superseded meanwhile keeps
    its status (its results stay as history); a second call, such as a retried job's, changes nothing.
    """
    run = get_or_raise(session, TriageRun, run_id, lock=True)
    if run.summary is not None:
        return run
    run.summary, run.timing = dict(summary), dict(timing) if timing is not None else None
    repository_id = run.pull_request.repository_id
    session.add_all(_suite_outcome(run.id, repository_id, suite) for suite in suites)
    session.add_all(_finding(run.id, finding) for finding in findings)
    if run.status in ACTIVE:
        run.status, run.conclusion, run.finished_at = "completed", conclusion, utcnow()
    session.flush()
    return run


def fail_run(session: Session, *, run_id: int, error: str) -> TriageRun:
    """The analysis could not run: failed, and its check is completed `action_required` with the reason."""
    run = get_or_raise(session, TriageRun, run_id, lock=True)
    run.error = error
    if run.status in ACTIVE:
        run.status, run.conclusion, run.finished_at = "failed", "action_required", utcnow()
    return run


def acknowledge_findings(session: Session, *, run_id: int, actor: str, reason: str) -> int:
    """Acknowledge the run's unacknowledged blocking findings (`/triage ack`); how many were."""
    result = session.execute(
        update(Finding)
        .where(Finding.run_id == run_id, Finding.severity == "blocking", Finding.acknowledged_by.is_(None))
        .values(acknowledged_by=actor, ack_reason=reason, acknowledged_at=utcnow()))
    acknowledged = int(getattr(result, "rowcount", 0))
    if acknowledged:
        add_run_event(session, run_id=run_id, actor=actor,
                      what=f"acknowledged {acknowledged} blocking finding(s): {reason}")
    return acknowledged


def acknowledge_run(session: Session, *, run_id: int, actor: str, reason: str) -> bool:
    """Let a run that could not conclude (`action_required`) through (`/triage ack`): who, when and why, on
    the run and in its events. False when it did not end so, or was acknowledged already."""
    run = get_or_raise(session, TriageRun, run_id, lock=True)
    if run.conclusion != "action_required" or run.acknowledged_by is not None:
        return False
    now = utcnow()
    run.acknowledged_by, run.ack_reason, run.acknowledged_at = actor, reason, now
    add_run_event(session, run_id=run_id, actor=actor, what=f"acknowledged (could not conclude): {reason}",
                  at=now)
    return True


def add_run_event(session: Session, *, run_id: int, actor: str, what: str,
                  at: datetime | None = None) -> None:
    session.add(RunEvent(run_id=run_id, actor=actor, what=what, at=at or utcnow()))


def get_run(session: Session, *, run_id: int) -> TriageRun | None:
    return session.get(TriageRun, run_id)


def pull_request_of_run(session: Session, *, run_id: int) -> int:
    return int(session.scalars(select(TriageRun.pull_request_id).where(TriageRun.id == run_id)).one())


def latest_run(session: Session, *, pr_id: int) -> TriageRun | None:
    return session.scalars(select(TriageRun).where(TriageRun.pull_request_id == pr_id)
                           .order_by(TriageRun.id.desc()).limit(1)).first()


def run_for_check_run(session: Session, *, check_run_id: int) -> TriageRun | None:
    """The run that reported to a check run (a `check_run` rerequested or requested_action event)."""
    return session.scalars(select(TriageRun).where(TriageRun.check_run_id == check_run_id)).first()


def _suite_outcome(run_id: int, repository_id: int, suite: Mapping[str, Any]) -> SuiteOutcome:
    return SuiteOutcome(run_id=run_id, repository_id=repository_id, suite_id=suite["id"],
                        script=suite["script"], argv=list(suite["argv"]), base=suite.get("base"),
                        head=suite.get("head"))


def _finding(run_id: int, finding: Mapping[str, Any]) -> Finding:
    return Finding(run_id=run_id, kind=finding["kind"], severity=finding["severity"],
                   path=finding.get("path"), line=finding.get("line"), in_diff=bool(finding.get("in_diff")),
                   message=finding["message"], suites=list(finding.get("suites", ())),
                   scripts=list(finding.get("scripts", ())))
