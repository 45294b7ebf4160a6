"""Column types that behave the same on SQLite and PostgreSQL: UTC datetimes, closed choices, big ids."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, get_args

from sqlalchemy import BigInteger, DateTime, Dialect, Enum, Integer
from sqlalchemy.types import TypeDecorator

# The largest values the columns hold: ids are 64-bit, pull request numbers 32-bit. A query for a larger one
# is answered as not found or refused before it reaches the database, whose driver would overflow.
BIGINT_MAX = 2**63 - 1
INTEGER_MAX = 2**31 - 1

# SQLite only auto-assigns ids to an INTEGER primary key (the rowid); PostgreSQL gets a BIGINT sequence.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """An aware datetime, stored in UTC and read back aware in UTC on every backend.

    SQLite has no time zones: its values are kept as naive UTC text (fixed width, so they sort and compare
    correctly); PostgreSQL keeps `timestamptz`. A naive datetime is refused rather than guessed at.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware datetime (UTC)")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def choice(name: str, values: Iterable[str]) -> Enum:
    """A closed set of strings as VARCHAR plus a CHECK constraint (no PostgreSQL ENUM type to migrate)."""
    members = tuple(values)
    # A roomy length: adding a value later only changes the CHECK constraint, not the column.
    return Enum(*members, name=name, native_enum=False, create_constraint=True, length=32,
                validate_strings=True)


def literal_values(literal: Any) -> tuple[str, ...]:
    """The strings of a `Literal[...]` alias, so a model's type and its CHECK constraint share one source."""
    return tuple(get_args(literal))
