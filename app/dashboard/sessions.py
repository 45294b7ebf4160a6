"""Where dashboard logins are kept, so that logging out ends a session on the server: in the store for the
service (every process sees the same logins), in memory for setup mode (one process, no database yet)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.store.queries import dashboard_session_live, end_dashboard_session, open_dashboard_session
from app.store.session import session_scope
from app.store.types import utcnow


class SessionBook(Protocol):
    def open(self, session_id: str, expires_at: datetime) -> None: ...
    def live(self, session_id: str) -> bool: ...
    def end(self, session_id: str) -> None: ...


class StoredSessions:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def open(self, session_id: str, expires_at: datetime) -> None:
        with session_scope(self._sessions) as session:
            open_dashboard_session(session, session_id=session_id, expires_at=expires_at)

    def live(self, session_id: str) -> bool:
        with session_scope(self._sessions, read_only=True) as session:
            return dashboard_session_live(session, session_id=session_id)

    def end(self, session_id: str) -> None:
        with session_scope(self._sessions) as session:
            end_dashboard_session(session, session_id=session_id)


class MemorySessions:
    def __init__(self) -> None:
        self._expiry: dict[str, datetime] = {}

    def open(self, session_id: str, expires_at: datetime) -> None:
        self._expiry[session_id] = expires_at

    def live(self, session_id: str) -> bool:
        expires_at = self._expiry.get(session_id)
        return expires_at is not None and expires_at > utcnow()

    def end(self, session_id: str) -> None:
        self._expiry.pop(session_id, None)
