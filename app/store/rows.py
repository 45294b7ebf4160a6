"""Row helpers: INSERT … ON CONFLICT DO UPDATE on both backends, reloading, fetching by id or failing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.store.models import Base

ModelT = TypeVar("ModelT", bound=Base)
Excluded = Any  # the row the INSERT proposed: `excluded.<column>`


def upsert(session: Session, model: type[Base], values: dict[str, Any], *, key: Sequence[str],
           keep: Sequence[str] = (), extra: Callable[[Excluded], dict[str, Any]] | None = None,
           where: Callable[[Excluded], ColumnElement[bool]] | None = None) -> None:
    """Insert `values`, or update the row with the same `key`; atomic where SELECT-then-INSERT would race.

    Columns in `key` and `keep` keep their stored value; `extra` computes columns from the stored row;
    `where` limits which conflicting rows are updated.
    """
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = insert(model).values(values)
    excluded = statement.excluded
    changes: dict[str, Any] = {c: excluded[c] for c in values if c not in key and c not in keep}
    if extra is not None:
        changes |= extra(excluded)
    session.execute(statement.on_conflict_do_update(
        index_elements=key, set_=changes, where=where(excluded) if where is not None else None))


def reload(session: Session, model: type[ModelT], **keys: Any) -> ModelT:
    """The row as stored now: an upsert bypasses the identity map, so refresh any object already held."""
    query = select(model).filter_by(**keys).execution_options(populate_existing=True)
    return session.scalars(query).one()


def get_or_raise(session: Session, model: type[ModelT], row_id: int, *, lock: bool = False) -> ModelT:
    """The row with this id (locked FOR UPDATE on PostgreSQL when `lock`); LookupError when there is none."""
    row = session.get(model, row_id, with_for_update=lock, populate_existing=lock)
    if row is None:
        raise LookupError(f"no {model.__name__} with id {row_id}")
    return row
