"""Rendering the pages: the Jinja2 environment, its filters (ages, times), and the headers every page
carries (no caching of private titles, no framing, no scripts from anywhere)."""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from starlette.responses import Response

from app.bundled import package_file
from app.dashboard.auth import Viewer

TEMPLATES = Jinja2Templates(directory=package_file("app.dashboard", "templates"))
PAGE_HEADERS = {
    # Titles of private repositories: never kept by a shared cache or the browser's disk cache.
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    # Links to GitHub must not tell it which dashboard page (and filter) the reader came from.
    "Referrer-Policy": "no-referrer",
}


def age(since: datetime, now: datetime | None = None) -> str:
    """How long ago, in the largest unit that reads well: 45 min, 20 h, 12 days."""
    seconds = max(0, int(((now or datetime.now(UTC)) - since).total_seconds()))
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


def when(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def iso(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).isoformat()


def breakable(text: str) -> Markup:
    """TEXT escaped, with a line break allowed (<wbr>) after each separator of a path or an id (/ _ . - #):
    a suite id longer than its column wraps between its words, where a browser would otherwise cut it
    anywhere ("…dist_di / st_optimizer…")."""
    return Markup("<wbr>").join(escape(part) for part in re.split(r"(?<=[/_.#-])", text))


def suite_url(repo: str, suite: str) -> str:
    """The suite page's address: the suite id as one path segment (its `/`, `#`, `?` and spaces
    percent-encoded), so that no browser or proxy splits, cuts or normalises it."""
    return f"/repositories/{repo}/suites/{quote(suite, safe='')}"


TEMPLATES.env.filters.update(age=age, when=when, iso=iso, breakable=breakable, suite_url=suite_url,
                             shell=shlex.join)  # shell: argv as CI would type it


def render(request: Request, name: str, context: dict[str, Any], *, viewer: Viewer | None = None,
           status_code: int = 200) -> Response:
    response = TEMPLATES.TemplateResponse(request, name, {"viewer": viewer, **context},
                                          status_code=status_code)
    response.headers.update(PAGE_HEADERS)
    return response


def error_page(request: Request, status_code: int, message: str, *, viewer: Viewer | None = None) -> Response:
    return render(request, "error.html", {"status": status_code, "message": message}, viewer=viewer,
                  status_code=status_code)
