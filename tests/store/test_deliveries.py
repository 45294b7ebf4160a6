"""Deliveries: each GUID is stored once, also when two intakes race on it (the unique constraint decides)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.store.models import Delivery
from app.store.queries import get_delivery, mark_delivery, record_delivery
from app.store.session import session_scope

GUID = "75a1e280-f215-11ea-91f8-4bbe86492996"
SUMMARY = {"repository": "acme/widgets", "number": 7, "head_sha": "a" * 40}


def record(session: Session, guid: str = GUID) -> bool:
    return record_delivery(session, guid=guid, event="pull_request", action="opened",
                           installation_id=28513985, payload_summary=SUMMARY)


def count(engine: Engine) -> int:
    with session_scope(engine, read_only=True) as session:
        return session.scalar(select(func.count()).select_from(Delivery)) or 0


def test_a_redelivery_is_refused(session: Session) -> None:
    assert record(session) is True
    assert record(session) is False
    delivery = get_delivery(session, guid=GUID)
    assert delivery is not None
    assert (delivery.event, delivery.action, delivery.status) == ("pull_request", "opened", "queued")
    assert delivery.payload_summary == SUMMARY
    assert delivery.received_at.tzinfo is not None


def test_the_refusal_leaves_the_transaction_usable(db: Engine) -> None:
    with session_scope(db) as session:
        assert record(session)
    with session_scope(db) as session:
        assert record(session) is False
        assert record(session, "another-guid") is True  # the savepoint rolled back only the duplicate
    assert count(db) == 2


def test_a_concurrent_duplicate_waits_and_is_refused(db: Engine) -> None:
    """The second intake inserts while the first has not committed: it waits for it, then sees a duplicate."""
    inserted = threading.Event()

    def first() -> bool:
        with session_scope(db) as session:
            stored = record(session)
            inserted.set()
            time.sleep(0.3)  # still uncommitted while the second intake tries
            return stored

    def second() -> bool:
        assert inserted.wait(10)
        with session_scope(db) as session:
            return record(session)

    with ThreadPoolExecutor(2) as pool:
        results = [pool.submit(first), pool.submit(second)]
        assert [r.result(timeout=30) for r in results] == [True, False]
    assert count(db) == 1


def test_a_duplicate_of_a_rolled_back_delivery_is_stored(db: Engine) -> None:
    """If the first intake fails to queue the job (503), GitHub's redelivery must get through."""
    inserted = threading.Event()

    def first() -> None:
        try:
            with session_scope(db) as session:
                record(session)
                inserted.set()
                time.sleep(0.3)
                raise ConnectionError("queue down")
        except ConnectionError:
            pass

    def second() -> bool:
        assert inserted.wait(10)
        with session_scope(db) as session:
            return record(session)

    with ThreadPoolExecutor(2) as pool:
        pool.submit(first)
        assert pool.submit(second).result(timeout=30) is True
    assert count(db) == 1


def test_many_racing_intakes_store_one(db: Engine) -> None:
    senders = 8
    start = threading.Barrier(senders)

    def send(_: int) -> bool:
        start.wait(10)
        with session_scope(db) as session:
            return record(session)

    with ThreadPoolExecutor(senders) as pool:
        results = list(pool.map(send, range(senders)))
    assert sorted(results) == [False] * (senders - 1) + [True]
    assert count(db) == 1


def test_mark_delivery(session: Session) -> None:
    record(session)
    assert mark_delivery(session, guid=GUID, status="failed", error="GitHub answered 502") is True
    delivery = get_delivery(session, guid=GUID)
    assert delivery is not None
    assert (delivery.status, delivery.error) == ("failed", "GitHub answered 502")
    assert delivery.processed_at is not None
    assert mark_delivery(session, guid=GUID, status="processed") is True
    assert (delivery.status, delivery.error) == ("processed", None)
    assert mark_delivery(session, guid="unknown", status="processed") is False
