"""The dashboard's reads of triage runs: recent runs with their findings, and one run suite by suite."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session

from app.store.days import as_date, check_range, midnight, utc_day
from app.store.models import Finding, PullRequest, Repository, SuiteOutcome, TriageRun
from app.store.pages import after, next_cursor, page_size, repository_ids
from app.store.shapes import EventOut, FindingOut, RunDay, RunDetailOut, RunOut, SuiteOut, outcome_out
from app.store.window_views import pull_request_view


def list_runs(session: Session, *, repo: str | None = None, pr: int | None = None, cursor: str | None = None,
              limit: int = 50) -> tuple[list[RunOut], str | None]:
    """Triage runs newest first, with their findings, and the cursor of the next page (None on the last)."""
    size = page_size(limit)
    query = _runs_query()
    if repo is not None:
        query = query.where(_of_repository(session, repo))
    if pr is not None:
        query = query.where(PullRequest.number == pr)
    if cursor is not None:
        query = query.where(after(TriageRun.created_at, TriageRun.id, cursor, descending=True))
    newest_first = (TriageRun.created_at.desc(), TriageRun.id.desc())
    rows = session.execute(query.order_by(*newest_first).limit(size + 1)).all()
    page = rows[:size]
    findings = _findings(session, [run.id for run, _, _ in page])
    items = [_run_view(run, pull, name, findings[run.id]) for run, pull, name in page]
    last = page[-1][0] if page else None
    return items, next_cursor(rows, size, last.created_at, last.id) if last else None


def runs_over_time(session: Session, *, start: date, end: date, repo: str | None = None) -> list[RunDay]:
    """For each UTC day from `start` to `end`: the runs created that day, by outcome (a run's conclusion,
    or its status while it has none: queued, running, superseded, failed)."""
    check_range(start, end)
    day = utc_day(session, TriageRun.created_at)
    query = (select(day, TriageRun.conclusion, TriageRun.status, func.count())
             .where(TriageRun.created_at >= midnight(start),
                    TriageRun.created_at < midnight(end + timedelta(days=1)))
             .group_by(day, TriageRun.conclusion, TriageRun.status))
    if repo is not None:
        query = query.where(_of_repository(session, repo))
    counted: dict[date, dict[str, int]] = defaultdict(dict)
    for value, conclusion, status, count in session.execute(query):
        outcomes = counted[as_date(value)]
        key = conclusion or status
        outcomes[key] = outcomes.get(key, 0) + int(count)
    days = [start + timedelta(days=offset) for offset in range((end - start).days + 1)]
    return [RunDay(day=day, outcomes=counted.get(day, {})) for day in days]


def run_with_suites(session: Session, *, run_id: int) -> RunDetailOut | None:
    """One run as in the list, plus its report summary, timing and every suite's base and head outcome."""
    row = session.execute(_runs_query().where(TriageRun.id == run_id)).first()
    if row is None:
        return None
    run, pull, name = row
    suites = session.scalars(select(SuiteOutcome).where(SuiteOutcome.run_id == run_id)
                             .order_by(SuiteOutcome.id))
    view = _run_view(run, pull, name, _findings(session, [run_id])[run_id])
    events = [EventOut(at=event.at, actor=event.actor, what=event.what) for event in run.events]
    return RunDetailOut(**view, summary=run.summary, timing=run.timing,
                        suites=[_suite_view(s) for s in suites], acknowledged_by=run.acknowledged_by,
                        ack_reason=run.ack_reason, acknowledged_at=run.acknowledged_at, events=events)


def _of_repository(session: Session, repo: str) -> ColumnElement[bool]:
    """The runs of the repository named REPO, on the runs' own column (no join through pull requests).

    The ids first: with one, `=` lets both backends read (repository_id, created_at, id) in order and stop
    at a page or a day range; SQLite sorted all of a repository's runs for an IN of a subquery (75 ms)."""
    ids = list(session.scalars(repository_ids(repo)))
    return TriageRun.repository_id == ids[0] if len(ids) == 1 else TriageRun.repository_id.in_(ids)


def _runs_query() -> Select[TriageRun, PullRequest, str]:
    return (select(TriageRun, PullRequest, Repository.full_name)
            .join(PullRequest, PullRequest.id == TriageRun.pull_request_id)
            .join(Repository, Repository.id == PullRequest.repository_id))


def _run_view(run: TriageRun, pr: PullRequest, repo: str, findings: list[FindingOut]) -> RunOut:
    return {"id": run.id, "repo": repo, "pr": pull_request_view(pr), "head_sha": run.head_sha,
            "base_sha": run.base_sha, "status": run.status, "conclusion": run.conclusion,
            "check_run_id": run.check_run_id, "superseded_by": run.superseded_by, "error": run.error,
            "created_at": run.created_at, "started_at": run.started_at, "finished_at": run.finished_at,
            "findings": findings}


def _findings(session: Session, run_ids: list[int]) -> defaultdict[int, list[FindingOut]]:
    """The findings of each run, in one query for the whole page."""
    found: defaultdict[int, list[FindingOut]] = defaultdict(list)
    if run_ids:
        query = select(Finding).where(Finding.run_id.in_(run_ids)).order_by(Finding.id)
        for finding in session.scalars(query):
            found[finding.run_id].append(_finding_view(finding))
    return found


def _finding_view(finding: Finding) -> FindingOut:
    return {"id": finding.id, "kind": finding.kind, "severity": finding.severity, "path": finding.path,
            "line": finding.line, "in_diff": finding.in_diff, "message": finding.message,
            "suites": finding.suites, "scripts": finding.scripts, "acknowledged_by": finding.acknowledged_by,
            "ack_reason": finding.ack_reason, "acknowledged_at": finding.acknowledged_at}


def _suite_view(suite: SuiteOutcome) -> SuiteOut:
    return {"id": suite.suite_id, "script": suite.script, "argv": suite.argv, "base": outcome_out(suite.base),
            "head": outcome_out(suite.head)}
