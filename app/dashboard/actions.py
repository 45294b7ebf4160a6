"""The dashboard's one write: closing a risk window with a reason, committed before the answer is sent."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from app.store.queries import close_window, window_with_events
from app.store.session import session_scope
from app.store.shapes import RiskWindowDetailOut

# The dashboard knows a token, not a GitHub login: the event says where the close came from.
DASHBOARD_ACTOR = "dashboard"


class AlreadyClosed(Exception):
    """The window was closed before (its first reason stays)."""


def close_from_dashboard(sessions: sessionmaker[Session], *, window_id: int,
                         reason: str) -> RiskWindowDetailOut:
    """Close the window; LookupError when there is none, AlreadyClosed when it is not open."""
    with session_scope(sessions) as session:
        before = window_with_events(session, window_id=window_id)
        if before is None:
            raise LookupError(f"no risk window {window_id}")
        if before["state"] == "closed":
            raise AlreadyClosed(f"risk window {window_id} is already closed")
        close_window(session, window_id=window_id, actor=DASHBOARD_ACTOR, reason=reason)
        after = window_with_events(session, window_id=window_id)
    assert after is not None  # closed windows stay
    return after
