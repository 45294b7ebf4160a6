"""The dashboard: risk windows and triage runs as pages and as a JSON API under /api.

`create_app` only includes `router`; the routes find the process's Services at `app.state.services`.
`startup_notice` is the line `prtriage serve` prints about it.
"""

from __future__ import annotations

from fastapi import APIRouter

from app.config import Settings
from app.dashboard import api, login, routes
from app.dashboard.auth import is_loopback_host
from app.dashboard.deps import ReadSession, get_services, read_session

router = APIRouter()
router.include_router(login.router)
router.include_router(routes.router)
router.include_router(api.router)


def startup_notice(settings: Settings, url: str) -> str:
    """Where the dashboard is and who it answers, for the serve command to print at start-up."""
    if settings.dashboard_token and settings.dashboard_token.get_secret_value():
        return (f"dashboard {url} (protected by DASHBOARD_TOKEN: log in at {url.rstrip('/')}/login, or send "
                "Authorization: Bearer)")
    notice = (f"dashboard {url} (no DASHBOARD_TOKEN: it answers loopback clients only, read-only; set "
              "DASHBOARD_TOKEN to serve other clients and to close windows from it)")
    if not is_loopback_host(settings.host):
        notice += f"; listening on {settings.host}, other clients get 403"
    return notice


__all__ = ["ReadSession", "get_services", "read_session", "router", "startup_notice"]
