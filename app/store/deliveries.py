"""Webhook deliveries: record each GUID once, then mark how its job ended."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.models import Delivery, DeliveryStatus
from app.store.types import utcnow


def record_delivery(session: Session, *, guid: str, event: str, action: str | None,
                    installation_id: int | None, payload_summary: dict[str, Any]) -> bool:
    """Store a new delivery as queued; False when its GUID is already stored (a redelivery or duplicate).

    The unique constraint decides, not a prior SELECT: two intakes racing on one GUID both pass a check,
    but only one insert commits. On PostgreSQL the second waits for the first and then fails here.
    """
    delivery = Delivery(guid=guid, event=event, action=action, installation_id=installation_id,
                        payload_summary=payload_summary, status="queued", received_at=utcnow())
    try:
        with session.begin_nested():
            session.add(delivery)
    except IntegrityError:
        if get_delivery(session, guid=guid) is None:
            raise  # some other constraint: a bug, not a duplicate
        return False
    return True


def record_new_deliveries(session: Session, rows: Sequence[dict[str, Any]]) -> set[str]:
    """Insert the deliveries whose GUID is not stored yet, in one statement; the GUIDs inserted. For the
    intake's group commit (app/webhooks/batching.py); record_delivery does one row per transaction."""
    if not rows:
        return set()
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table = cast(Table, Delivery.__table__)
    statement = insert(table).on_conflict_do_nothing(index_elements=["guid"]).returning(table.c.guid)
    return set(session.connection().execute(statement, list(rows)).scalars())


def get_delivery(session: Session, *, guid: str) -> Delivery | None:
    return session.scalars(select(Delivery).where(Delivery.guid == guid)).one_or_none()


def mark_delivery(session: Session, *, guid: str, status: DeliveryStatus, error: str | None = None) -> bool:
    """Record how the delivery's job ended; False for an unknown GUID."""
    delivery = get_delivery(session, guid=guid)
    if delivery is None:
        return False
    delivery.status = status
    delivery.error = error
    delivery.processed_at = None if status == "queued" else utcnow()
    return True
