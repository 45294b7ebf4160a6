"""Risk windows: opened with what they await, closed with a reason, every change an event, nothing deleted."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.models import PullRequest, RiskWindow
from app.store.queries import (
    add_window_event,
    awaited_references,
    close_window,
    list_windows,
    open_window,
    resolve_reference,
    window_with_events,
    windows_awaiting,
    windows_of_pull_request,
)
from app.store.session import session_scope

from .factories import Factory

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_opening_records_what_the_window_awaits(session: Session, make: Factory) -> None:
    pr = make.pull_request(session, 2170, merged_at=T0)
    followup = make.reference(session, pr, 2204)
    prerequisite = make.reference(session, pr, 812, kind="prerequisite", target="acme/base-lib")
    window = open_window(session, pr=pr, risk="a 30-minute NCCL timeout",
                         awaiting=[followup, prerequisite.id])
    assert (window.state, window.opened_at, window.repository_id) == ("open", T0, pr.repository_id)
    detail = window_with_events(session, window_id=window.id)
    assert detail is not None
    assert [a["ref"] for a in detail["awaiting"]] == ["acme/widgets#2204", "acme/base-lib#812"]
    assert [(e["actor"], e["what"]) for e in detail["events"]] == [
        ("prtriage", "opened, awaiting acme/widgets#2204 (followup), acme/base-lib#812 (prerequisite)")]


def test_opening_again_adds_to_the_open_window(session: Session, make: Factory) -> None:
    pr = make.pull_request(session, 2170, merged_at=T0)
    first = open_window(session, pr=pr, risk="risk", awaiting=[make.reference(session, pr, 2204)])
    again = open_window(session, pr=pr.id, risk="risk", awaiting=[make.reference(session, pr, 2204),
                                                                 make.reference(session, pr, 2205)])
    assert again.id == first.id
    assert [r.target_number for r in again.awaiting] == [2204, 2205]
    detail = window_with_events(session, window_id=first.id)
    assert detail is not None
    assert detail["events"][-1]["what"] == "now also awaiting acme/widgets#2205 (followup)"
    assert windows_of_pull_request(session, pr_id=pr.id) == [first]


def test_closing_records_an_event_and_the_window_stays_listable(db: Engine, make: Factory) -> None:
    with session_scope(db) as session:
        window = make.window(session, 2170, opened_at=T0, awaiting=2204)
    closed_at = T0 + timedelta(days=3)
    with session_scope(db) as session:
        close_window(session, window_id=window.id, actor="maintainer", reason="superseded by #2223",
                     at=closed_at)
    with session_scope(db) as session:
        again = close_window(session, window_id=window.id, actor="someone", reason="twice")
        assert again.close_reason == "superseded by #2223"  # already closed: unchanged, no event
    with session_scope(db, read_only=True) as session:
        detail = window_with_events(session, window_id=window.id)
        closed, _ = list_windows(session, state="closed")
        every, _ = list_windows(session, state="all")
        still_open, _ = list_windows(session, state="open")
    assert detail is not None
    assert (detail["state"], detail["closed_at"], detail["close_reason"]) == (
        "closed", closed_at, "superseded by #2223")
    assert [(e["actor"], e["what"], e["at"]) for e in detail["events"]][1:] == [
        ("maintainer", "closed: superseded by #2223", closed_at)]
    assert [w["id"] for w in closed] == [w["id"] for w in every] == [window.id]
    assert still_open == []


def test_resolving_an_awaited_reference_is_an_event(session: Session, make: Factory) -> None:
    window = make.window(session, 2170, opened_at=T0, awaiting=2204)
    [reference] = window.awaiting
    merged = T0 + timedelta(days=1)
    resolve_reference(session, reference_id=reference.id, state="open")
    resolve_reference(session, reference_id=reference.id, state="open")  # unchanged: no event
    resolve_reference(session, reference_id=reference.id, state="merged", merged_at=merged)
    assert (reference.state, reference.merged_at) == ("merged", merged)
    assert reference.state_checked_at is not None
    detail = window_with_events(session, window_id=window.id)
    assert detail is not None
    assert [e["what"] for e in detail["events"]][1:] == ["acme/widgets#2204 is now open",
                                                         "acme/widgets#2204 is now merged"]
    assert detail["awaiting"][0]["state"] == "merged"


def test_windows_awaiting_a_merged_pr_ignore_case(session: Session, make: Factory) -> None:
    waiting = make.window(session, 2170, opened_at=T0, awaiting=2204)
    make.window(session, 2171, opened_at=T0, awaiting=2300)
    assert windows_awaiting(session, repo="ACME/Widgets", number=2204) == [waiting]
    assert windows_awaiting(session, repo="acme/other", number=2204) == []
    close_window(session, window_id=waiting.id, actor="prtriage", reason="acme/widgets#2204 merged")
    assert windows_awaiting(session, repo="acme/widgets", number=2204) == []
    assert windows_awaiting(session, repo="acme/widgets", number=2204, state="closed") == [waiting]


def test_awaited_references_are_those_of_open_windows(session: Session, make: Factory) -> None:
    open_one = make.window(session, 1, opened_at=T0, awaiting=10)
    closed_one = make.window(session, 2, opened_at=T0, awaiting=20)
    close_window(session, window_id=closed_one.id, actor="maintainer", reason="done")
    assert [r.target_number for r in awaited_references(session)] == [10]
    assert open_one.awaiting[0].ref == "acme/widgets#10"


def test_add_window_event(session: Session, make: Factory) -> None:
    window = make.window(session, 1, opened_at=T0)
    later = T0 + timedelta(hours=1)
    add_window_event(session, window_id=window.id, actor="alice", what="pinged the author", at=later)
    detail = window_with_events(session, window_id=window.id)
    assert detail is not None
    assert [(e["at"], e["actor"], e["what"]) for e in detail["events"]] == [
        (T0, "prtriage", "opened"), (later, "alice", "pinged the author")]


def test_history_cannot_be_deleted_from_under_a_window(db: Engine, make: Factory) -> None:
    """No ON DELETE CASCADE: deleting a window with events, or its PR, is refused by the database."""
    with session_scope(db) as session:
        window = make.window(session, 1, opened_at=T0, awaiting=10)
    for statement in (delete(RiskWindow).where(RiskWindow.id == window.id),
                      delete(PullRequest).where(PullRequest.id == window.pull_request_id)):
        with pytest.raises(IntegrityError), session_scope(db) as session:
            session.execute(statement)
    with session_scope(db, read_only=True) as session:
        assert session.scalar(select(RiskWindow.id)) == window.id


def test_two_workers_handling_one_merge_open_one_window(db: Engine, make: Factory) -> None:
    with session_scope(db) as session:
        pr = make.pull_request(session, 2170, merged_at=T0)
        reference_ids = [make.reference(session, pr, n).id for n in (2204, 2205)]
    start = threading.Barrier(2)

    def handle(reference_id: int) -> int:
        start.wait(10)
        with session_scope(db) as session:
            return open_window(session, pr=pr.id, risk="risk", awaiting=[reference_id]).id

    with ThreadPoolExecutor(2) as pool:
        window_ids = set(pool.map(handle, reference_ids))
    assert len(window_ids) == 1
    with session_scope(db, read_only=True) as session:
        [item], _ = list_windows(session)
    assert sorted(a["ref"] for a in item["awaiting"]) == ["acme/widgets#2204", "acme/widgets#2205"]
