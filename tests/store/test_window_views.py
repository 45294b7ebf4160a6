"""The dashboard's window list: INTERFACES.md's shape, oldest first, filters, stable keyset pages, charts."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.store.pages import MAX_LIMIT
from app.store.queries import (
    InvalidCursor,
    close_window,
    list_windows,
    window_ages,
    window_with_events,
    windows_over_time,
)
from app.store.session import session_scope

from .factories import Factory

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_items_have_the_dashboard_api_shape(session: Session, make: Factory) -> None:
    window = make.window(session, 2170, opened_at=T0, awaiting=2204)
    [item], next_page = list_windows(session)
    assert next_page is None
    assert item == {
        "id": window.id, "repo": "acme/widgets", "kind": "followup",
        "pr": {"number": 2170, "title": "Change 2170", "url": "https://github.com/acme/widgets/pull/2170",
               "author": "octocat", "merged_at": T0},
        "awaiting": [{"ref": "acme/widgets#2204", "kind": "followup", "state": None,
                      "url": "https://github.com/acme/widgets/pull/2204"}],
        "state": "open", "opened_at": T0, "closed_at": None, "close_reason": None, "risk": "risk of #2170",
    }
    json.dumps(item, default=datetime.isoformat)  # the route only serialises
    detail = window_with_events(session, window_id=window.id)
    assert detail is not None and set(detail) == {*item, "events"}
    assert window_with_events(session, window_id=window.id + 1000) is None


def test_oldest_first_with_state_and_repo_filters(session: Session, make: Factory) -> None:
    newer = make.window(session, 1, opened_at=T0 + timedelta(hours=2))
    older = make.window(session, 2, opened_at=T0)
    elsewhere = make.window(session, 3, opened_at=T0 + timedelta(hours=1), repo="acme/gadgets")
    closed = make.window(session, 4, opened_at=T0 - timedelta(days=1))
    close_window(session, window_id=closed.id, actor="maintainer", reason="done")

    def ids(**filters: str) -> list[int]:
        return [item["id"] for item in list_windows(session, **filters)[0]]  # type: ignore[arg-type]

    assert ids() == [older.id, elsewhere.id, newer.id]
    assert ids(state="closed") == [closed.id]
    assert ids(state="all") == [closed.id, older.id, elsewhere.id, newer.id]
    assert ids(repo="acme/gadgets") == [elsewhere.id]
    assert ids(repo="ACME/Widgets", state="all") == [closed.id, older.id, newer.id]
    assert ids(repo="acme/nothing") == []


def test_pages_neither_repeat_nor_skip_while_windows_open_and_close(db: Engine, make: Factory) -> None:
    with session_scope(db) as session:
        # Three windows share each opening time: the id breaks the ties.
        originals = [make.window(session, n, opened_at=T0 + timedelta(minutes=n // 3)).id for n in range(23)]
    seen: list[int] = []
    cursor: str | None = None
    pages = 0
    while True:
        with session_scope(db, read_only=True) as session:
            items, cursor = list_windows(session, state="all", cursor=cursor, limit=5)
        seen += [item["id"] for item in items]
        pages += 1
        if pages == 1:  # between pages: a newer and an older window open, an unseen one closes
            with session_scope(db) as session:
                newest = make.window(session, 100, opened_at=T0 + timedelta(days=1)).id
                make.window(session, 101, opened_at=T0 - timedelta(days=1))
                close_window(session, window_id=originals[-1], actor="maintainer", reason="done")
        if cursor is None:
            break
    assert seen == [*originals, newest]  # the older newcomer sorts before the cursor: next visit's first page
    assert pages == 5


def test_cursor_and_limit_are_checked(session: Session, make: Factory) -> None:
    for n in range(3):
        make.window(session, n, opened_at=T0 + timedelta(minutes=n))
    first, cursor = list_windows(session, limit=2)
    assert len(first) == 2 and cursor is not None
    rest, end = list_windows(session, limit=2, cursor=cursor)
    assert len(rest) == 1 and end is None
    with pytest.raises(InvalidCursor):
        list_windows(session, cursor="not-a-cursor")
    with pytest.raises(InvalidCursor):
        list_windows(session, cursor=cursor[:-3] + "!!!")
    with pytest.raises(ValueError, match="limit"):
        list_windows(session, limit=0)
    assert len(list_windows(session, limit=MAX_LIMIT + 1000)[0]) == 3


def test_windows_over_time_counts_open_windows_at_each_utc_day_end(session: Session, make: Factory) -> None:
    day = [datetime(2026, 3, d, tzinfo=UTC) for d in range(1, 8)]
    gone = make.window(session, 1, opened_at=day[0])  # closed before the chart starts
    close_window(session, window_id=gone.id, actor="m", reason="done", at=day[1] + timedelta(hours=1))
    make.window(session, 2, opened_at=day[2] + timedelta(hours=6))  # before the chart, still open
    closes = make.window(session, 3, opened_at=day[3] + timedelta(hours=10))
    close_window(session, window_id=closes.id, actor="m", reason="done", at=day[5] + timedelta(hours=9))
    make.window(session, 4, opened_at=day[4] + timedelta(hours=23, minutes=59))
    # 23:30 at UTC-2 on the 5th is 01:30 UTC on the 6th.
    make.window(session, 5, opened_at=datetime(2026, 3, 5, 23, 30, tzinfo=timezone(timedelta(hours=-2))))
    make.window(session, 6, opened_at=day[6] + timedelta(hours=1))  # after the chart
    make.window(session, 7, opened_at=day[4], repo="acme/gadgets")
    chart = windows_over_time(session, start=date(2026, 3, 4), end=date(2026, 3, 6), repo="acme/widgets")
    assert chart == [{"day": date(2026, 3, 4), "open": 2}, {"day": date(2026, 3, 5), "open": 3},
                     {"day": date(2026, 3, 6), "open": 3}]
    everywhere = windows_over_time(session, start=date(2026, 3, 4), end=date(2026, 3, 6))
    assert [d["open"] for d in everywhere] == [2, 4, 4]
    with pytest.raises(ValueError):
        windows_over_time(session, start=date(2026, 3, 6), end=date(2026, 3, 4))


def test_window_ages_bucket_the_open_windows(session: Session, make: Factory) -> None:
    now = T0 + timedelta(days=365)
    for n, age_days in enumerate([0.5, 3, 10, 12, 40, 200]):
        make.window(session, n, opened_at=now - timedelta(days=age_days))
    closed = make.window(session, 99, opened_at=now - timedelta(days=3))
    close_window(session, window_id=closed.id, actor="m", reason="done")
    assert window_ages(session, now=now) == [
        {"label": "under 1 day", "count": 1}, {"label": "1-7 days", "count": 1},
        {"label": "7-30 days", "count": 2}, {"label": "30-90 days", "count": 1},
        {"label": "over 90 days", "count": 1}]
    assert sum(b["count"] for b in window_ages(session, now=now, repo="acme/gadgets")) == 0
