"""The dashboard's dependencies: the process's Services (set by `create_app` as `app.state.services`),
database sessions, and the viewer each request is allowed as (or refused)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.dashboard.auth import SESSION_COOKIE, Gate, Viewer, is_loopback_client, is_loopback_host
from app.dashboard.sessions import SessionBook, StoredSessions
from app.service.services import Services
from app.store.session import session_scope

NOT_LOOPBACK = ("no DASHBOARD_TOKEN is configured: the dashboard answers only on loopback "
                "(127.0.0.1, ::1, localhost)")


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def get_settings_of_app(services: ServicesDep) -> Settings:
    return services.settings


SettingsDep = Annotated[Settings, Depends(get_settings_of_app)]


def get_sessions(services: ServicesDep) -> sessionmaker[Session]:
    return services.sessions


SessionsDep = Annotated[sessionmaker[Session], Depends(get_sessions)]


def read_session(sessions: SessionsDep) -> Iterator[Session]:
    """A read-only transaction for one page or API read."""
    with session_scope(sessions, read_only=True) as session:
        yield session


ReadSession = Annotated[Session, Depends(read_session)]


def get_gate(settings: SettingsDep) -> Gate | None:
    """None when no DASHBOARD_TOKEN is configured (loopback-only mode)."""
    token = settings.dashboard_token.get_secret_value() if settings.dashboard_token else ""
    return Gate(token) if token else None


GateDep = Annotated[Gate | None, Depends(get_gate)]


def get_session_book(request: Request) -> SessionBook:
    """The logins: setup mode keeps its own (`app.state.session_book`), the service's are in the store."""
    book: SessionBook | None = getattr(request.app.state, "session_book", None)
    return book if book is not None else StoredSessions(get_services(request).sessions)


SessionBookDep = Annotated[SessionBook, Depends(get_session_book)]


def identify(request: Request, gate: Gate | None, book: SessionBook | None = None) -> Viewer | None:
    """The viewer the request proves to be; None when it proves nothing. 403 off loopback without a token.

    A session cookie counts only while its login is live in BOOK: not after logout."""
    if gate is None:
        client = request.client.host if request.client else None
        if not (is_loopback_client(client) and is_loopback_host(request.url.hostname)):
            raise HTTPException(403, NOT_LOOPBACK)
        return Viewer("loopback")
    if gate.bearer_ok(request.headers.get("authorization")):
        return Viewer("bearer")
    session_id = gate.session_id(request.cookies.get(SESSION_COOKIE))
    if session_id is None or book is None or not book.live(session_id):
        return None
    return Viewer("cookie", session_id, gate.csrf_token(session_id))


def page_viewer(request: Request, gate: GateDep, book: SessionBookDep) -> Viewer:
    """Pages: an unauthenticated reader is sent to the login form, never shown data."""
    viewer = identify(request, gate, book)
    if viewer is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise HTTPException(303, "log in first", headers={"Location": f"/login?next={quote(target)}"})
    return viewer


def api_viewer(request: Request, gate: GateDep, book: SessionBookDep) -> Viewer:
    """API: an unauthenticated client gets 401 and a JSON error."""
    viewer = identify(request, gate, book)
    if viewer is None:
        raise HTTPException(401, "authentication required: Authorization: Bearer <DASHBOARD_TOKEN>",
                            headers={"WWW-Authenticate": "Bearer"})
    return viewer


PageViewer = Annotated[Viewer, Depends(page_viewer)]
ApiViewer = Annotated[Viewer, Depends(api_viewer)]
