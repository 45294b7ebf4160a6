"""The dashboard's reads of one CI suite of a repository: how the default branch's healths judged it (runs of
the same outcome: when main broke it and when it healed), its dead-suite records, and the pull requests
whose head rejected it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from app.store.models import DeadSuite, MainHealth, PullRequest, SuiteOutcome, TriageRun
from app.store.repository_views import repository_named
from app.store.shapes import OutcomeOut, outcome_out

HISTORY = 90  # healths read, newest first, as on the repository page
REJECTIONS = 50  # pull-request runs listed; the counts cover them all
FAILED = ("rejected", "error")


@dataclass(frozen=True)
class HealthSpan:
    """Consecutive healths of the default branch that judged the suite alike, oldest first inside."""

    outcome: str  # accepted, rejected, error; `absent`: not in the matrix; `blind`: the health could not see
    first_sha: str
    first_at: datetime
    last_sha: str
    last_at: datetime
    checks: int
    detail: OutcomeOut | None  # the first health's outcome of the suite (its error), None when absent


@dataclass(frozen=True)
class DeadRecord:
    """One time the default branch broke the suite: found, breaking commit, healed (or not yet)."""

    window_id: int
    script: str
    outcome: str
    error: str
    path: str | None
    line: int | None
    since_sha: str | None
    found_sha: str
    opened_at: datetime
    healed_sha: str | None
    healed_at: datetime | None


@dataclass(frozen=True)
class SuiteRun:
    """A triage run of a pull request and how its base and head judged the suite."""

    run_id: int
    script: str
    number: int
    title: str
    url: str
    author: str
    head_sha: str
    created_at: datetime
    verdict: str  # the run's conclusion, or its status while it has none
    base: OutcomeOut | None
    head: OutcomeOut | None


@dataclass(frozen=True)
class SuitePage:
    repo: str
    suite: str
    script: str | None
    spans: list[HealthSpan]  # newest first
    dead: list[DeadRecord]  # newest first
    rejected_by: list[SuiteRun]  # newest first, at most REJECTIONS
    runs: int  # pull-request runs that validated the suite
    rejected: int  # ... whose head rejected it or errored on it


def suite_page(session: Session, *, repo: str, suite: str) -> SuitePage | None:
    """SUITE of the repository named REPO (any case); None when neither main nor a run ever saw it."""
    repository = repository_named(session, repo)
    if repository is None:
        return None
    healths = _healths(session, repository.id, suite)
    dead = _dead(session, repository.id, suite)
    runs, rejected = _counts(session, repository.id, suite)
    if not healths and not dead and not runs:
        return None
    rejected_by = _rejected_by(session, repository.id, suite) if rejected else []
    scripts = [str(h[3]["script"]) for h in healths if h[3] and h[3].get("script")]
    scripts += [record.script for record in dead] + [run.script for run in rejected_by]
    return SuitePage(repo=repository.full_name, suite=suite, script=scripts[0] if scripts else None,
                     spans=health_spans(healths), dead=dead, rejected_by=rejected_by, runs=runs,
                     rejected=rejected)


def health_spans(healths: list[tuple[str, datetime, bool, dict[str, Any] | None]]) -> list[HealthSpan]:
    """HEALTHS (sha, at, could_analyse, the suite's outcome), newest first, as runs of one outcome."""
    found: list[HealthSpan] = []
    for sha, at, could_analyse, stored in reversed(healths):
        outcome = "blind" if not could_analyse else "absent" if not stored else str(stored.get("outcome"))
        last = found[-1] if found else None
        if last is not None and last.outcome == outcome:
            found[-1] = HealthSpan(outcome, last.first_sha, last.first_at, sha, at, last.checks + 1,
                                   last.detail)
        else:
            found.append(HealthSpan(outcome, sha, at, sha, at, 1, outcome_out(stored) if stored else None))
    return found[::-1]


def _healths(session: Session, repository_id: int,
             suite: str) -> list[tuple[str, datetime, bool, dict[str, Any] | None]]:
    """The latest healths and the suite's entry of each one's outcomes, extracted by the database: a
    health's outcomes hold every suite of the matrix, hundreds on a real repository, and one is wanted."""
    # SQLite's JSON path cannot quote a key holding `"`: then the whole map, and the entry picked here
    whole = session.get_bind().dialect.name == "sqlite" and '"' in suite
    entry_column = MainHealth.outcomes if whole else MainHealth.outcomes[suite]
    rows = session.execute(select(MainHealth.sha, MainHealth.at, MainHealth.could_analyse, entry_column)
                           .where(MainHealth.repository_id == repository_id, MainHealth.probe.is_(False))
                           .order_by(MainHealth.at.desc(), MainHealth.id.desc()).limit(HISTORY)).all()
    found = []
    for sha, at, could_analyse, stored in rows:
        entry = stored.get(suite) if whole and isinstance(stored, dict) else stored
        found.append((sha, at, could_analyse, entry if isinstance(entry, dict) else None))
    if not any(entry for *_, entry in found):
        return []  # no health ever listed the suite: its page says nothing of main
    return found


def _dead(session: Session, repository_id: int, suite: str) -> list[DeadRecord]:
    rows = session.scalars(select(DeadSuite).where(DeadSuite.repository_id == repository_id,
                                                   DeadSuite.suite == suite)
                           .order_by(DeadSuite.opened_at.desc(), DeadSuite.id.desc()))
    return [DeadRecord(window_id=d.window_id, script=d.script, outcome=d.outcome, error=d.error,
                       path=d.path, line=d.line, since_sha=d.since_sha, found_sha=d.found_sha,
                       opened_at=d.opened_at, healed_sha=d.healed_sha, healed_at=d.healed_at) for d in rows]


def _head_failed() -> ColumnElement[bool]:
    failed: ColumnElement[bool] = SuiteOutcome.head["outcome"].as_string().in_(FAILED)
    return failed


def _counts(session: Session, repository_id: int, suite: str) -> tuple[int, int]:
    row = session.execute(select(func.count(), func.count().filter(_head_failed()))
                          .where(SuiteOutcome.repository_id == repository_id, SuiteOutcome.suite_id == suite)
                          ).one()
    return int(row[0]), int(row[1])


def _rejected_by(session: Session, repository_id: int, suite: str) -> list[SuiteRun]:
    # columns, not objects: the page shows a few fields of each run and pull request
    rows = session.execute(select(SuiteOutcome.script, SuiteOutcome.base, SuiteOutcome.head, TriageRun.id,
                                  TriageRun.head_sha, TriageRun.created_at, TriageRun.conclusion,
                                  TriageRun.status, PullRequest.number, PullRequest.title, PullRequest.url,
                                  PullRequest.author)
                           .join(TriageRun, TriageRun.id == SuiteOutcome.run_id)
                           .join(PullRequest, PullRequest.id == TriageRun.pull_request_id)
                           .where(SuiteOutcome.repository_id == repository_id, SuiteOutcome.suite_id == suite,
                                  _head_failed())
                           .order_by(TriageRun.created_at.desc(), TriageRun.id.desc()).limit(REJECTIONS))
    return [SuiteRun(run_id=row.id, script=row.script, number=row.number, title=row.title, url=row.url,
                     author=row.author, head_sha=row.head_sha, created_at=row.created_at,
                     verdict=row.conclusion or row.status, base=outcome_out(row.base),
                     head=outcome_out(row.head)) for row in rows]


def dead_suite_of_window(session: Session, *, window_id: int) -> str | None:
    """The suite a dead-suite window is about; None for another window."""
    return session.scalar(select(DeadSuite.suite).where(DeadSuite.window_id == window_id).limit(1))
