"""The dashboard: risk windows and triage runs as pages and as a JSON API under /api.

`attach(app)` adds it to an app: the routes (which find the process's Services at `app.state.services`), the
API's reference at /docs, and HTML answers for page paths that do not parse. `startup_notice` is the line
`prtriage serve` prints about it.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response

from app.config import Settings
from app.dashboard import api, apidocs, login, routes
from app.dashboard.auth import is_loopback_host
from app.dashboard.deps import ReadSession, get_services, read_session
from app.dashboard.views import error_page

router = APIRouter()
router.include_router(login.router)
router.include_router(routes.router)
router.include_router(api.router)
router.include_router(apidocs.router)
MACHINE_PATHS = ("/api/", "/webhooks/", "/metrics", "/healthz", "/openapi.json")


def attach(app: FastAPI) -> None:
    """The dashboard on APP, whose own /docs and /redoc must be off (FastAPI's load from a CDN)."""
    app.include_router(router)
    app.add_exception_handler(RequestValidationError, _unparsed)  # type: ignore[arg-type]


async def _unparsed(request: Request, exc: RequestValidationError) -> Response:
    """A page path that does not parse (`/windows/abc`) is a page that does not exist: an HTML 404 for
    people; machine paths keep FastAPI's JSON 422."""
    if request.url.path.startswith(MACHINE_PATHS):
        return await request_validation_exception_handler(request, exc)
    return error_page(request, 404, f"no such page: {request.url.path[:200]}")


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


__all__ = ["ReadSession", "attach", "get_services", "read_session", "router", "startup_notice"]
