"""The dashboard's reads of risk windows: the list, one window's timeline, and the two charts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.store.days import as_date, check_range, midnight, utc_day
from app.store.models import PullRequest, Reference, Repository, RiskWindow, WindowEvent, window_awaits
from app.store.pages import after, next_cursor, page_size, repository_ids
from app.store.shapes import (
    AgeBucket,
    AwaitedOut,
    DayCount,
    PullRequestOut,
    RiskWindowDetailOut,
    RiskWindowOut,
)
from app.store.types import utcnow

StateFilter = Literal["open", "closed", "all"]
AGE_BUCKETS = ((0, 1, "under 1 day"), (1, 7, "1-7 days"), (7, 30, "7-30 days"), (30, 90, "30-90 days"),
               (90, None, "over 90 days"))


def list_windows(session: Session, *, state: StateFilter = "open", repo: str | None = None,
                 cursor: str | None = None, limit: int = 50) -> tuple[list[RiskWindowOut], str | None]:
    """Risk windows oldest first, and the cursor of the next page (None on the last).

    A cursor stays valid while windows open and close: a page never repeats or skips a window that
    existed when the first page was read.
    """
    size = page_size(limit)
    query = _windows_query()
    if state != "all":
        query = query.where(RiskWindow.state == state)
    if repo is not None:
        query = query.where(RiskWindow.repository_id.in_(repository_ids(repo)))
    if cursor is not None:
        query = query.where(after(RiskWindow.opened_at, RiskWindow.id, cursor))
    rows = session.execute(query.order_by(RiskWindow.opened_at, RiskWindow.id).limit(size + 1)).all()
    page = rows[:size]
    awaiting = _awaiting(session, [window.id for window, _, _ in page])
    items = [_window_view(window, pr, name, awaiting[window.id]) for window, pr, name in page]
    last = page[-1][0] if page else None
    return items, next_cursor(rows, size, last.opened_at, last.id) if last else None


def window_with_events(session: Session, *, window_id: int) -> RiskWindowDetailOut | None:
    """One window as in the list, plus its events in order."""
    row = session.execute(_windows_query().where(RiskWindow.id == window_id)).first()
    if row is None:
        return None
    window, pr, name = row
    events = session.scalars(select(WindowEvent).where(WindowEvent.window_id == window_id)
                             .order_by(WindowEvent.at, WindowEvent.id))
    view = _window_view(window, pr, name, _awaiting(session, [window_id])[window_id])
    return RiskWindowDetailOut(**view,
                               events=[{"at": e.at, "actor": e.actor, "what": e.what} for e in events])


def windows_over_time(session: Session, *, start: date, end: date, repo: str | None = None) -> list[DayCount]:
    """For each UTC day from `start` to `end`: how many windows were open at its end (today: by now)."""
    check_range(start, end)
    since, until = midnight(start), midnight(end + timedelta(days=1))
    scope: list[ColumnElement[bool]] = []
    if repo is not None:
        scope.append(RiskWindow.repository_id.in_(repository_ids(repo)))
    opened_before = session.scalar(select(func.count()).where(RiskWindow.opened_at < since, *scope)) or 0
    closed_before = session.scalar(select(func.count()).where(RiskWindow.closed_at < since, *scope)) or 0
    opened = _per_day(session, RiskWindow.opened_at, since, until, scope)
    closed = _per_day(session, RiskWindow.closed_at, since, until, scope)
    counts, open_now = [], opened_before - closed_before
    for offset in range((end - start).days + 1):
        day = start + timedelta(days=offset)
        open_now += opened.get(day, 0) - closed.get(day, 0)
        counts.append(DayCount(day=day, open=open_now))
    return counts


def window_ages(session: Session, *, repo: str | None = None, now: datetime | None = None) -> list[AgeBucket]:
    """How many open windows are how old, in fixed buckets (the ages chart)."""
    now = now or utcnow()
    opened = RiskWindow.opened_at
    columns = []
    for low, high, _ in AGE_BUCKETS:
        condition = opened <= now - timedelta(days=low)
        if high is not None:
            condition &= opened > now - timedelta(days=high)
        columns.append(func.count(RiskWindow.id).filter(condition))
    query = select(*columns).where(RiskWindow.state == "open")
    if repo is not None:
        query = query.where(RiskWindow.repository_id.in_(repository_ids(repo)))
    row = session.execute(query).one()
    return [AgeBucket(label=label, count=int(n)) for (_, _, label), n in zip(AGE_BUCKETS, row, strict=True)]


def pull_request_view(pr: PullRequest) -> PullRequestOut:
    return {"number": pr.number, "title": pr.title, "url": pr.url, "author": pr.author,
            "merged_at": pr.merged_at}


def _windows_query() -> Select[RiskWindow, PullRequest | None, str]:
    # outer: a dead-suite window has no pull request
    return (select(RiskWindow, PullRequest, Repository.full_name)
            .outerjoin(PullRequest, PullRequest.id == RiskWindow.pull_request_id)
            .join(Repository, Repository.id == RiskWindow.repository_id))


def _window_view(window: RiskWindow, pr: PullRequest | None, repo: str,
                 awaiting: list[AwaitedOut]) -> RiskWindowOut:
    return {"id": window.id, "repo": repo, "kind": window.kind,
            "pr": pull_request_view(pr) if pr is not None else None, "awaiting": awaiting,
            "state": window.state, "opened_at": window.opened_at, "closed_at": window.closed_at,
            "close_reason": window.close_reason, "risk": window.risk}


def _awaiting(session: Session, window_ids: list[int]) -> defaultdict[int, list[AwaitedOut]]:
    """What each window awaits, in one query for the whole page."""
    found: defaultdict[int, list[AwaitedOut]] = defaultdict(list)
    if not window_ids:
        return found
    rows = session.execute(select(window_awaits.c.window_id, Reference)
                           .join(Reference, Reference.id == window_awaits.c.reference_id)
                           .where(window_awaits.c.window_id.in_(window_ids)).order_by(Reference.id))
    for window_id, reference in rows:
        found[window_id].append({"ref": reference.ref, "kind": reference.kind, "state": reference.state,
                                 "url": reference.url})
    return found


def _per_day(session: Session, column: InstrumentedAttribute[Any], since: datetime, until: datetime,
             scope: Sequence[ColumnElement[bool]]) -> dict[date, int]:
    day = utc_day(session, column)
    rows = session.execute(select(day, func.count()).where(column >= since, column < until, *scope)
                           .group_by(day))
    return {as_date(value): int(count) for value, count in rows}


