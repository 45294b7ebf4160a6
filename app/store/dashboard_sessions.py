"""Dashboard logins kept on the server: a session cookie is valid only while its row is live, so logging out
ends the session even for whoever copied the cookie."""

from __future__ import annotations

import hashlib
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.store.models import DashboardSession
from app.store.types import utcnow


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_dashboard_session(session: Session, *, session_id: str, expires_at: datetime) -> None:
    """Record a new login; logins that expired are dropped meanwhile, so the table stays small."""
    now = utcnow()
    session.execute(delete(DashboardSession).where(DashboardSession.expires_at < now))
    session.add(DashboardSession(id=_key(session_id), created_at=now, expires_at=expires_at))


def dashboard_session_live(session: Session, *, session_id: str) -> bool:
    query = select(DashboardSession.id).where(
        DashboardSession.id == _key(session_id), DashboardSession.revoked_at.is_(None),
        DashboardSession.expires_at > utcnow())
    return session.scalars(query).first() is not None


def end_dashboard_session(session: Session, *, session_id: str) -> None:
    row = session.get(DashboardSession, _key(session_id))
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()
