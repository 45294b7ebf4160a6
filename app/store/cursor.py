"""Opaque keyset-pagination cursors: the sort key (a time, or a name) and id of the last row a page showed."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime


class InvalidCursor(ValueError):
    """A cursor this service did not make (or a damaged one); the route answers 400."""


def encode_cursor(at: datetime, row_id: int) -> str:
    raw = f"{at.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at_text, id_text = raw.split("|")
        at, row_id = datetime.fromisoformat(at_text), int(id_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursor(f"not a cursor: {cursor[:40]!r}") from None
    if at.tzinfo is None:
        raise InvalidCursor(f"not a cursor: {cursor[:40]!r}")
    return at, row_id


NAME_PREFIX = "n|"  # a name cursor never decodes as a time cursor, nor the other way round


def encode_name_cursor(name: str, row_id: int) -> str:
    raw = f"{NAME_PREFIX}{row_id}|{name}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_name_cursor(cursor: str) -> tuple[str, int]:
    """The (name, id) of a list sorted by name; the name last, so that it may hold any character."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not raw.startswith(NAME_PREFIX):
            raise ValueError(raw)
        id_text, name = raw[len(NAME_PREFIX):].split("|", 1)
        return name, int(id_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursor(f"not a cursor: {cursor[:40]!r}") from None
