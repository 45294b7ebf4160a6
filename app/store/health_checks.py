"""The default branch's health: each `doctor` of it, and the CI suites it rejects (dead suites), each with
a risk window of kind `dead_suite` that opens when main breaks the suite and closes when main accepts it
again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import DeadSuite, MainHealth, Repository, RiskWindow
from app.store.rows import get_or_raise
from app.store.types import utcnow
from app.store.windows import SYSTEM_ACTOR, add_window_event, close_window

ACCEPTING_LOOKBACK = 200  # health rows searched for the last commit that accepted a suite


@dataclass(frozen=True)
class HealthRecord:
    """One doctor of one commit, as the store keeps it."""

    branch: str
    sha: str
    suites: int
    accepted: int
    could_analyse: bool
    reason: str
    policy: dict[str, Any]
    scripts: dict[str, Any]
    outcomes: dict[str, dict[str, Any]]  # suite id -> {script, outcome, exception, message, path, line}


@dataclass(frozen=True)
class Breakage:
    """A suite main rejects, as a health found it, and the commit that broke it (None: not known)."""

    suite: str
    script: str
    outcome: str
    error: str
    path: str | None
    line: int | None
    since_sha: str | None


def set_default_branch(session: Session, *, repository_id: int, branch: str) -> None:
    repository = session.get(Repository, repository_id)
    if repository is not None and repository.default_branch != branch:
        repository.default_branch = branch


def record_health(session: Session, *, repository_id: int, record: HealthRecord, probe: bool = False,
                  at: datetime | None = None) -> MainHealth:
    row = MainHealth(repository_id=repository_id, branch=record.branch, sha=record.sha, at=at or utcnow(),
                     probe=probe, suites=record.suites, accepted=record.accepted,
                     could_analyse=record.could_analyse, reason=record.reason, policy=record.policy,
                     scripts=record.scripts, outcomes=record.outcomes)
    session.add(row)
    session.flush()
    return row


def health_at(session: Session, *, repository_id: int, sha: str) -> MainHealth | None:
    """The latest doctor of commit SHA, probe or not: a bisection reuses it instead of running again."""
    return session.scalars(select(MainHealth).where(MainHealth.repository_id == repository_id,
                                                    MainHealth.sha == sha)
                           .order_by(MainHealth.at.desc(), MainHealth.id.desc()).limit(1)).first()


def last_health(session: Session, *, repository_id: int) -> MainHealth | None:
    """The latest health of the default branch (bisection probes left out)."""
    return session.scalars(select(MainHealth).where(MainHealth.repository_id == repository_id,
                                                    MainHealth.probe.is_(False))
                           .order_by(MainHealth.at.desc(), MainHealth.id.desc()).limit(1)).first()


def last_accepting(session: Session, *, repository_id: int, suite: str) -> str | None:
    """The sha of the latest seeing health (probe or not) at which SUITE was accepted, or None."""
    rows = session.scalars(select(MainHealth).where(MainHealth.repository_id == repository_id,
                                                    MainHealth.could_analyse.is_(True))
                           .order_by(MainHealth.at.desc(), MainHealth.id.desc()).limit(ACCEPTING_LOOKBACK))
    for row in rows:
        if row.outcomes.get(suite, {}).get("outcome") == "accepted":
            return row.sha
    return None


def dead_suites(session: Session, *, repository_id: int) -> list[DeadSuite]:
    """The suites main rejects now (not healed), oldest first."""
    return list(session.scalars(select(DeadSuite).where(DeadSuite.repository_id == repository_id,
                                                        DeadSuite.healed_sha.is_(None))
                                .order_by(DeadSuite.opened_at, DeadSuite.id)))


def open_dead_suite(session: Session, *, repository_id: int, breakage: Breakage, found_sha: str,
                    at: datetime | None = None) -> DeadSuite:
    """A dead suite and its risk window, opened with an event that names the error and the breaking commit."""
    moment = at or utcnow()
    where = f" at {breakage.path}:{breakage.line}" if breakage.path and breakage.line else ""
    since = f"since {breakage.since_sha[:12]}" if breakage.since_sha else "breaking commit not known"
    risk = (f"The default branch {breakage.outcome} CI suite {breakage.suite} ({breakage.script}): "
            f"{breakage.error}{where}; {since}. CI spends a runner on it every time it runs.")
    window = RiskWindow(repository_id=repository_id, pull_request_id=None, kind="dead_suite", state="open",
                        risk=risk, opened_at=moment)
    session.add(window)
    session.flush()
    add_window_event(session, window_id=window.id, actor=SYSTEM_ACTOR, at=moment,
                     what=f"opened: main {found_sha[:12]} {breakage.outcome} {breakage.suite}; {since}")
    dead = DeadSuite(repository_id=repository_id, window_id=window.id, suite=breakage.suite,
                     script=breakage.script, outcome=breakage.outcome, error=breakage.error,
                     path=breakage.path, line=breakage.line, since_sha=breakage.since_sha,
                     found_sha=found_sha, opened_at=moment)
    session.add(dead)
    session.flush()
    return dead


def heal_dead_suite(session: Session, *, dead_suite_id: int, sha: str, reason: str,
                    at: datetime | None = None) -> DeadSuite:
    """Main accepts the suite again at SHA (or no longer runs it): the suite healed, its window closed."""
    dead = get_or_raise(session, DeadSuite, dead_suite_id, lock=True)
    if dead.healed_sha is not None:
        return dead
    dead.healed_sha, dead.healed_at = sha, at or utcnow()
    close_window(session, window_id=dead.window_id, actor=SYSTEM_ACTOR, reason=reason, at=dead.healed_at)
    return dead
