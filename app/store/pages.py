"""Keyset pagination shared by the dashboard's lists: page size, cursor predicates, repository filter."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, or_, select
from sqlalchemy.orm import InstrumentedAttribute

from app.store.cursor import decode_cursor, encode_cursor
from app.store.models import Repository

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def page_size(limit: int) -> int:
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    return min(limit, MAX_LIMIT)


def after(at_column: InstrumentedAttribute[datetime], id_column: InstrumentedAttribute[int], cursor: str,
          *, descending: bool = False) -> ColumnElement[bool]:
    """Rows after the cursor's (time, id) in the list's order.

    Spelled out rather than as a row-value comparison: the leading `>=` (or `<=`) lets both backends use an
    index on (…, time, id), and each comparison goes through the column's type (UTC text on SQLite).
    """
    at, row_id = decode_cursor(cursor)
    if descending:
        return and_(at_column <= at, or_(at_column < at, id_column < row_id))
    return and_(at_column >= at, or_(at_column > at, id_column > row_id))


def next_cursor(rows: Sequence[Any], size: int, at: datetime, row_id: int) -> str | None:
    """The cursor for the next page; the query fetched `size + 1` rows to learn whether there is one."""
    return encode_cursor(at, row_id) if len(rows) > size else None


def repository_ids(full_name: str) -> Select[int]:
    """Ids of the repository named `owner/name` (GitHub names ignore case; a renamed one keeps its id)."""
    return select(Repository.id).where(func.lower(Repository.full_name) == full_name.lower())
