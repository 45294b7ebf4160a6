"""UTC days of stored timestamps, as the dashboard's charts count them, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

from sqlalchemy import ColumnElement, func
from sqlalchemy.orm import InstrumentedAttribute, Session

MAX_CHART_DAYS = 3660


def check_range(start: date, end: date) -> None:
    if end < start or (end - start).days > MAX_CHART_DAYS:
        raise ValueError(f"a chart runs from a start to a later end, within {MAX_CHART_DAYS} days")


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


def utc_day(session: Session, column: InstrumentedAttribute[Any]) -> ColumnElement[Any]:
    """The UTC day of a timestamp column, in SQL."""
    if session.get_bind().dialect.name == "postgresql":
        # date() of a timestamptz uses the session's zone: name UTC rather than trust the connection.
        return func.date(func.timezone("UTC", column))
    return func.date(column)  # SQLite keeps UTC text: 'YYYY-MM-DD'


def as_date(value: date | str) -> date:
    return value if isinstance(value, date) else date.fromisoformat(value)
