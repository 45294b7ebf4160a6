"""The login form (`GET/POST /login`, field `token`), logout, and the stylesheet: the only dashboard paths
that answer without credentials, and none of them shows data."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, RedirectResponse
from starlette.responses import Response

from app.bundled import package_file
from app.dashboard.auth import SESSION_COOKIE, SESSION_SECONDS, safe_next
from app.dashboard.deps import GateDep, SessionBookDep, SettingsDep
from app.dashboard.forms import FormFields
from app.dashboard.views import error_page, render
from app.store.types import utcnow

STATIC = package_file("app.dashboard", "static")
STATIC_FILES = {"dashboard.css": "text/css"}

router = APIRouter(include_in_schema=False)


@router.get("/login")
def login_form(request: Request, gate: GateDep, next: str = "/") -> Response:
    return render(request, "login.html", {"next": safe_next(next), "protected": gate is not None})


@router.post("/login")
def login(request: Request, gate: GateDep, form: FormFields, book: SessionBookDep,
          settings: SettingsDep) -> Response:
    target = safe_next(form.get("next"))
    if gate is None:
        return render(request, "login.html", {"next": target, "protected": False}, status_code=400)
    if not gate.token_ok(form.get("token", "")):
        return render(request, "login.html", {"next": target, "protected": True, "refused": True},
                      status_code=401)
    cookie = gate.issue()
    book.open(str(gate.session_id(cookie)), utcnow() + timedelta(seconds=SESSION_SECONDS))
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, cookie, max_age=SESSION_SECONDS, path="/", httponly=True,
                        samesite="strict", secure=settings.secure_cookies(request.url.scheme))
    return response


@router.post("/logout")
def logout(request: Request, gate: GateDep, form: FormFields, book: SessionBookDep,
           settings: SettingsDep) -> Response:
    """Ends the session from its own form only (its CSRF token): a forged cross-site POST gets no Set-Cookie
    that would end it, whether or not the browser sent the cookie along. The session ends on the server
    too: a copy of the cookie is refused from then on."""
    session_id = gate.session_id(request.cookies.get(SESSION_COOKIE)) if gate is not None else None
    if gate is None or session_id is None:  # no session to end
        return RedirectResponse("/login", status_code=303)
    if not gate.csrf_ok(session_id, form.get("csrf")):
        return error_page(request, 403, "the form has expired: reload the page and try again")
    book.end(session_id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict",
                           secure=settings.secure_cookies(request.url.scheme))
    return response


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC_FILES:  # a fixed list: no path from the URL ever reaches the file system
        raise HTTPException(404, "no such file")
    return FileResponse(STATIC / name, media_type=STATIC_FILES[name],
                        headers={"Cache-Control": "public, max-age=3600"})
