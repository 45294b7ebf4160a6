"""`serve` before any App is registered: `/setup` offers GitHub's manifest flow in one button;
GitHub's redirect to `/setup/callback` exchanges the code, stores the App in PRTRIAGE_DATA_DIR, and the
service proper takes over in the same process (`Switch`). Once it has, no setup path exists any more.

Who may register: whoever may see the dashboard (a loopback client without DASHBOARD_TOKEN, else a login).
The `state` GitHub carries back is issued to that viewer, bound to their browser by a cookie, used once, and
expires with GitHub's code (an hour): a callback forged from elsewhere cannot make this service adopt an App.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.config import ConfigError, Settings, StartupError
from app.dashboard import login
from app.dashboard.auth import same_secret
from app.dashboard.deps import GateDep, PageViewer, get_settings_of_app, identify
from app.dashboard.sessions import MemorySessions
from app.dashboard.views import PAGE_HEADERS, error_page, render
from app.github.errors import GitHubError
from app.github.manifest import convert_manifest, registration_url, web_url
from app.processes import registration

STATE_COOKIE = "prtriage_setup_state"
STATE_SECONDS = 3600  # GitHub's code lives an hour
ORGANIZATION = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?")
OnRegistered = Callable[[Settings], Awaitable[None]]


class States:
    """The `state` values handed out, each good once and for STATE_SECONDS."""

    def __init__(self) -> None:
        self._issued: dict[str, float] = {}

    def issue(self) -> str:
        now = time.monotonic()
        self._issued = {state: at for state, at in self._issued.items() if now - at < STATE_SECONDS}
        state = secrets.token_urlsafe(32)
        self._issued[state] = now
        return state

    def take(self, state: str) -> bool:
        issued = self._issued.pop(state, None)
        return issued is not None and time.monotonic() - issued < STATE_SECONDS


def public_base(given: str, request: Request) -> str:
    """The address GitHub is to send webhooks to: GIVEN when it is a plain http(s) URL, else the request's."""
    parts = urlsplit(given.strip())
    if given and parts.scheme in ("http", "https") and parts.hostname and not (
            parts.query or parts.fragment or parts.username or parts.password):
        return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    return str(request.base_url).rstrip("/")


def create_setup_app(settings: Settings, on_registered: OnRegistered) -> FastAPI:
    app = FastAPI(title="prtriage (setup)", openapi_url=None, docs_url=None, redoc_url=None)
    app.dependency_overrides[get_settings_of_app] = lambda: settings  # the gate needs only the settings
    app.include_router(login.router)
    app.state.session_book = MemorySessions()  # no database before the App is registered
    states, lock, registered = States(), asyncio.Lock(), asyncio.Event()

    @app.get("/setup", include_in_schema=False)
    def setup_page(request: Request, viewer: PageViewer, url: str = "", org: str = "") -> Response:
        problem = None
        if org and not ORGANIZATION.fullmatch(org):
            problem, org = f"not an organization name: {org[:40]!r}", ""
        base = public_base(url, request)
        state = states.issue()
        response = render(request, "setup.html", {
            "github": web_url(settings.github_api_url), "base_url": base, "organization": org,
            "webhook_url": f"{base}/webhooks/github", "problem": problem,
            "action": f"{registration_url(settings.github_api_url, org or None)}?state={state}",
            "manifest": json.dumps(registration.manifest(base))}, viewer=viewer)
        # The one form of this service that posts elsewhere: to the GitHub the App is registered on.
        response.headers["Content-Security-Policy"] = PAGE_HEADERS["Content-Security-Policy"].replace(
            "form-action 'self'", f"form-action 'self' {web_url(settings.github_api_url)}")
        # Lax, not Strict: GitHub's redirect back is a cross-site navigation, which Strict cookies miss.
        response.set_cookie(STATE_COOKIE, state, max_age=STATE_SECONDS, path="/setup", httponly=True,
                            samesite="lax", secure=settings.secure_cookies(request.url.scheme))
        return response

    @app.get("/setup/callback", include_in_schema=False)
    async def callback(request: Request, gate: GateDep, code: str = "", state: str = "") -> Response:
        if gate is None:
            identify(request, None)  # loopback only, as the page that issued the state
        cookie = request.cookies.get(STATE_COOKIE, "")
        if not (state and cookie and same_secret(state, cookie) and states.take(state)):
            return error_page(request, 403, "this registration was not started from this browser's /setup "
                                             "page, or it expired: start again at /setup")
        async with lock:
            if registered.is_set():
                return error_page(request, 409, "the App is registered already")
            return await _register(request, code)

    async def _register(request: Request, code: str) -> Response:
        try:
            conversion = await run_in_threadpool(convert_manifest, settings.github_api_url, code)
        except GitHubError as exc:
            return error_page(request, 502, f"GitHub did not hand over the new App: {exc}; start again at "
                                            "/setup")
        stored = await run_in_threadpool(registration.save, settings.data_dir, conversion)
        registered.set()
        try:
            await on_registered(registration.with_registration(settings))
        except (ConfigError, StartupError) as exc:
            return error_page(request, 500, f"the App {stored.name} is registered and stored in "
                                            f"{settings.data_dir}, but the service could not start: {exc}. "
                                            "Fix that and start `prtriage serve` again.")
        response = render(request, "registered.html", {"registration": stored,
                                                       "data_dir": str(settings.data_dir)})
        response.delete_cookie(STATE_COOKIE, path="/setup")
        return response

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> JSONResponse:
        return JSONResponse({"status": "setup", "setup": "no GitHub App registered yet: open /setup"})

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
    def elsewhere(request: Request, path: str) -> Response:
        if request.method == "GET" and path == "":
            return RedirectResponse("/setup", status_code=303)
        return JSONResponse({"detail": "no GitHub App is registered yet: open /setup"}, status_code=503)

    return app


class Switch:
    """The ASGI app `serve` runs in setup mode: the setup app until `replace`, then the service's app, whose
    lifespan (queue consumers, the intake's writer) it starts then and ends at shutdown."""

    def __init__(self, current: ASGIApp) -> None:
        self.current = current
        self._lifespans = AsyncExitStack()

    async def replace(self, app: FastAPI) -> None:
        await self._lifespans.enter_async_context(app.router.lifespan_context(app))
        self.current = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        else:
            await self.current(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message: dict[str, Any] = dict(await receive())
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._lifespans.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return
