"""Datetimes are aware UTC on the way out, whatever offset they had on the way in, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import StatementError

from app.store.models import Installation
from app.store.session import session_scope

KOLKATA = timezone(timedelta(hours=5, minutes=30))


def test_aware_datetimes_round_trip_as_utc(db: Engine) -> None:
    moment = datetime(2026, 3, 1, 23, 45, 12, 345678, tzinfo=KOLKATA)
    with session_scope(db) as session:
        session.add(Installation(id=1, account_login="acme", state_changed_at=moment))
    with session_scope(db) as session:
        stored = session.scalars(select(Installation.state_changed_at)).one()
    assert stored == moment
    assert stored is not None and stored.tzinfo == UTC
    assert stored.isoformat() == "2026-03-01T18:15:12.345678+00:00"


def test_comparisons_use_the_instant_not_the_wall_clock(db: Engine) -> None:
    # 10:00 in Kolkata is 04:30 UTC: earlier than 05:00 UTC though its wall clock reads later.
    with session_scope(db) as session:
        session.add(Installation(id=1, account_login="kolkata",
                                 state_changed_at=datetime(2026, 3, 1, 10, 0, tzinfo=KOLKATA)))
        session.add(Installation(id=2, account_login="utc",
                                 state_changed_at=datetime(2026, 3, 1, 5, 0, tzinfo=UTC)))
    with session_scope(db) as session:
        ordered = session.scalars(select(Installation.account_login)
                                  .order_by(Installation.state_changed_at)).all()
        before = session.scalars(select(Installation.account_login).where(
            Installation.state_changed_at < datetime(2026, 3, 1, 10, 15, tzinfo=KOLKATA))).all()
    assert ordered == ["kolkata", "utc"]
    assert before == ["kolkata"]


def test_a_naive_datetime_is_refused(db: Engine) -> None:
    with pytest.raises(StatementError, match="naive datetime"), session_scope(db) as session:
        session.add(Installation(id=1, account_login="acme", state_changed_at=datetime(2026, 3, 1, 12, 0)))
        session.flush()
