"""The dashboard's pages: open risk windows with their charts, one window's timeline and close form, recent
triage runs and one run suite by suite. Routes only parse, call app.store queries and render."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, TypeVar, cast
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from app.dashboard import charts
from app.dashboard.actions import AlreadyClosed, close_from_dashboard
from app.dashboard.api import MAX_SUITE, NAME_PATTERN, REPO_PATTERN
from app.dashboard.auth import Viewer
from app.dashboard.deps import GateDep, PageViewer, ReadSession, SessionsDep, page_viewer
from app.dashboard.forms import FormFields
from app.dashboard.run_explained import explained_findings, suites_by_script
from app.dashboard.views import error_page, render
from app.store.queries import (
    InvalidCursor,
    dead_suite_of_window,
    list_repositories,
    list_runs,
    list_windows,
    repository_page,
    run_with_suites,
    runs_over_time,
    suite_page,
    window_ages,
    window_with_events,
    windows_over_time,
)
from app.store.session import session_scope
from app.store.shapes import RiskWindowDetailOut
from app.store.types import BIGINT_MAX, INTEGER_MAX, utcnow
from app.store.window_views import StateFilter

CHART_DAYS = 90
RUN_CHART_DAYS = 30  # the runs page: a month of outcomes, a bar a day
PAGE_SIZE = 50
MAX_REASON = 2000
IdPath = Annotated[int, Path(ge=1, le=BIGINT_MAX)]
NamePath = Annotated[str, Path(pattern=NAME_PATTERN, max_length=100)]
RECENT_RUNS = 10  # on the home and repository pages
REPOSITORY_WINDOWS = 20  # the oldest open ones on a repository's page; its link to the list has them all
MAX_LIMIT = 200
STATES = ("open", "closed", "all")
T = TypeVar("T")

router = APIRouter(include_in_schema=False, dependencies=[Depends(page_viewer)])


def _number(text: str) -> int | None:
    """TEXT as a small decimal number; None for anything else (other digits than 0-9, 20 digits or more)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 20 else None


class Problems:
    """Query values a page cannot use: each is replaced by its default and said above the page (status 400),
    so that a mistyped link still shows the page, not an error."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.restarted = False  # the cursor was refused: the first page is shown

    def __bool__(self) -> bool:
        return bool(self.messages)

    @property
    def status(self) -> int:
        return 400 if self.messages else 200

    def choice(self, name: str, value: str, allowed: tuple[str, ...], default: str) -> str:
        if value in allowed:
            return value
        self.messages.append(f"{name}: {value[:40]!r} is not one of {', '.join(allowed)}; showing {default}")
        return default

    def limit(self, value: str) -> int:
        if not value.strip():
            return PAGE_SIZE
        if _number(value.strip()) in range(1, MAX_LIMIT + 1):
            return int(value)
        self.messages.append(f"limit: {value[:20]!r} is not a number from 1 to {MAX_LIMIT}; showing "
                             f"{PAGE_SIZE} a page")
        return PAGE_SIZE

    def repo(self, value: str) -> str | None:
        value = value.strip()
        if value and not re.fullmatch(REPO_PATTERN, value):
            self.messages.append(f"not a repository name (owner/name): {value[:100]!r}; showing every "
                                 "repository")
            return None
        return value or None

    def pr(self, value: str) -> int | None:
        value = value.strip().lstrip("#")
        number = _number(value)
        # not `number in range(...)`: for None that compares with each of the range's 2**31 numbers in turn
        if value and (number is None or not 1 <= number <= INTEGER_MAX):
            self.messages.append(f"not a pull request number: {value[:20]!r}; showing every pull request")
            return None
        return number

    def page(self, listing: Callable[[str | None], tuple[list[T], str | None]], cursor: str,
             ) -> tuple[list[T], str | None]:
        """LISTING at CURSOR; the first page instead when the cursor is not one this page made."""
        try:
            return listing(cursor or None)
        except InvalidCursor as exc:
            self.messages.append(f"cursor: {exc}; showing the first page")
            self.restarted = True
            return listing(None)


def _page_url(path: str, **params: str | int | None) -> str:
    """A link to another page of the same list, keeping its filters."""
    kept = {name: value for name, value in params.items() if value not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def _kept(limit: int) -> int | None:
    return None if limit == PAGE_SIZE else limit


@router.get("/")
def windows_page(request: Request, viewer: PageViewer, session: ReadSession, state: str = "open",
                 repo: str = "", cursor: str = "", limit: str = "") -> Response:
    problems = Problems()
    state_filter = cast(StateFilter, problems.choice("state", state, STATES, "open"))
    size = problems.limit(limit)
    repo_name = problems.repo(repo)
    items, following = problems.page(lambda at: list_windows(session, state=state_filter, repo=repo_name,
                                                            cursor=at, limit=size), cursor)
    today = utcnow().date()
    over_time = windows_over_time(session, start=today - timedelta(days=CHART_DAYS - 1), end=today,
                                  repo=repo_name)
    return render(request, "windows.html", {
        "windows": items, "state": state_filter, "repo": repo_name or "", "problems": problems.messages,
        "paged": bool(cursor) and not problems.restarted,
        "next_url": following and _page_url("/", state=state_filter, repo=repo_name, limit=_kept(size),
                                            cursor=following),
        "first_url": _page_url("/", state=state_filter, repo=repo_name, limit=_kept(size)),
        "over_time_chart": charts.open_over_time(over_time), "chart_days": CHART_DAYS,
        "ages_chart": charts.ages(window_ages(session, repo=repo_name)),
        "recent_runs": list_runs(session, repo=repo_name, limit=RECENT_RUNS)[0],
    }, viewer=viewer, status_code=problems.status)


@router.get("/windows/{window_id}")
def window_page(request: Request, viewer: PageViewer, session: ReadSession, window_id: IdPath) -> Response:
    detail = window_with_events(session, window_id=window_id)
    if detail is None:
        return error_page(request, 404, f"no risk window {window_id}", viewer=viewer)
    suite = dead_suite_of_window(session, window_id=window_id) if detail["kind"] == "dead_suite" else None
    return _window(request, viewer, detail, suite=suite)


def _window(request: Request, viewer: Viewer, detail: RiskWindowDetailOut, *, problem: str | None = None,
            status_code: int = 200, suite: str | None = None) -> Response:
    return render(request, "window.html", {"window": detail, "csrf": viewer.csrf, "problem": problem,
                                           "suite": suite}, viewer=viewer, status_code=status_code)


@router.post("/windows/{window_id}/close")
def close_page(request: Request, viewer: PageViewer, gate: GateDep, sessions: SessionsDep, form: FormFields,
               window_id: IdPath) -> Response:
    """The close form: login required, the session's CSRF token checked, a reason required."""
    if not viewer.can_close or gate is None:
        return error_page(request, 403, "closing a window needs DASHBOARD_TOKEN and a login", viewer=viewer)
    if viewer.session_id is not None and not gate.csrf_ok(viewer.session_id, form.get("csrf")):
        return error_page(request, 403, "the form has expired: reload the page and try again", viewer=viewer)
    reason = form.get("reason", "").strip()[:MAX_REASON]
    try:
        if not reason:
            return _reason_missing(request, viewer, sessions, window_id)
        close_from_dashboard(sessions, window_id=window_id, reason=reason)
    except LookupError:
        return error_page(request, 404, f"no risk window {window_id}", viewer=viewer)
    except AlreadyClosed as exc:
        return error_page(request, 409, str(exc), viewer=viewer)
    return RedirectResponse(f"/windows/{window_id}", status_code=303)  # reloading it posts nothing again


def _reason_missing(request: Request, viewer: Viewer, sessions: SessionsDep, window_id: int) -> Response:
    with session_scope(sessions, read_only=True) as session:
        detail = window_with_events(session, window_id=window_id)
    if detail is None:
        raise LookupError(f"no risk window {window_id}")
    return _window(request, viewer, detail, problem="Say why the window closes.", status_code=400)


@router.get("/runs")
def runs_page(request: Request, viewer: PageViewer, session: ReadSession, repo: str = "", pr: str = "",
              cursor: str = "", limit: str = "") -> Response:
    problems = Problems()
    size = problems.limit(limit)
    repo_name, number = problems.repo(repo), problems.pr(pr)
    items, following = problems.page(lambda at: list_runs(session, repo=repo_name, pr=number, cursor=at,
                                                          limit=size), cursor)
    today = utcnow().date()
    days = runs_over_time(session, start=today - timedelta(days=RUN_CHART_DAYS - 1), end=today,
                          repo=repo_name)
    return render(request, "runs.html", {
        "runs": items, "repo": repo_name or "", "pr": number or "", "problems": problems.messages,
        "runs_chart": charts.runs_over_time(days), "run_outcomes": charts.run_outcomes(days),
        "run_chart_days": RUN_CHART_DAYS,
        "paged": bool(cursor) and not problems.restarted,
        "next_url": following and _page_url("/runs", repo=repo_name, pr=number, limit=_kept(size),
                                            cursor=following),
        "first_url": _page_url("/runs", repo=repo_name, pr=number, limit=_kept(size)),
    }, viewer=viewer, status_code=problems.status)


@router.get("/runs/{run_id}")
def run_page(request: Request, viewer: PageViewer, session: ReadSession, run_id: IdPath) -> Response:
    detail = run_with_suites(session, run_id=run_id)
    if detail is None:
        return error_page(request, 404, f"no triage run {run_id}", viewer=viewer)
    return render(request, "run.html", {"run": detail, "findings": explained_findings(detail),
                                        "groups": suites_by_script(detail["suites"])}, viewer=viewer)


@router.get("/repositories")
def repositories_page(request: Request, viewer: PageViewer, session: ReadSession, cursor: str = "",
                      limit: str = "") -> Response:
    problems = Problems()
    size = problems.limit(limit)
    items, following = problems.page(lambda at: list_repositories(session, cursor=at, limit=size), cursor)
    return render(request, "repositories.html", {
        "repositories": items, "problems": problems.messages,
        "paged": bool(cursor) and not problems.restarted,
        "next_url": following and _page_url("/repositories", limit=_kept(size), cursor=following),
        "first_url": _page_url("/repositories", limit=_kept(size)),
    }, viewer=viewer, status_code=problems.status)


@router.get("/repositories/{owner}/{name}")
def repository_page_view(request: Request, viewer: PageViewer, session: ReadSession, owner: NamePath,
                         name: NamePath) -> Response:
    full_name = f"{owner}/{name}"
    page = repository_page(session, repo=full_name)
    if page is None:
        return error_page(request, 404, f"no repository {full_name}", viewer=viewer)
    return render(request, "repository.html", {
        "page": page, "repo": page.view, "reason": page.reason,
        "acceptance_chart": charts.acceptance(page.history),
        "windows": list_windows(session, state="open", repo=page.view["repo"], limit=REPOSITORY_WINDOWS)[0],
        "runs": list_runs(session, repo=page.view["repo"], limit=RECENT_RUNS)[0],
    }, viewer=viewer)


@router.get("/repositories/{owner}/{name}/suites/{suite:path}")
def suite_page_view(request: Request, viewer: PageViewer, session: ReadSession, owner: NamePath,
                    name: NamePath, suite: str) -> Response:
    """One CI suite across the default branch's healths and the pull requests' runs. Links encode the id
    whole (`/` as %2F, see views.suite_url); a path with its slashes plain finds the same suite."""
    full_name = f"{owner}/{name}"
    page = suite_page(session, repo=full_name, suite=suite) if 0 < len(suite) <= MAX_SUITE else None
    if page is None:
        return error_page(request, 404, f"no CI suite {suite[:MAX_SUITE]!r} in {full_name}", viewer=viewer)
    return render(request, "suite.html", {"page": page}, viewer=viewer)
