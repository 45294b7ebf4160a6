"""The dashboard's JSON API under /api: risk windows, triage runs, repositories and CI suites, the twins
of the pages."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request

from app.dashboard.actions import AlreadyClosed, close_from_dashboard
from app.dashboard.deps import ApiViewer, GateDep, ReadSession, SessionsDep, api_viewer
from app.dashboard.schemas import (
    CloseRequest,
    ErrorOut,
    RepositoryList,
    RiskWindowPage,
    RunPage,
    SuiteHistoryOut,
)
from app.store.queries import (
    InvalidCursor,
    list_repositories,
    list_runs,
    list_windows,
    repository_view,
    run_with_suites,
    suite_page,
    window_with_events,
)
from app.store.shapes import RepositoryOut, RiskWindowDetailOut, RunDetailOut
from app.store.types import BIGINT_MAX, INTEGER_MAX
from app.store.window_views import StateFilter

REPO_PATTERN = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"  # an owner or a repository name
MAX_SUITE = 255  # the longest suite id stored
CSRF_HEADER = "X-CSRF-Token"

RepoQuery = Annotated[str | None, Query(pattern=REPO_PATTERN, max_length=255,
                                        description="Only this repository, `owner/name` (any case).")]
CursorQuery = Annotated[str | None, Query(max_length=200, description="`next` of the previous page.")]
LimitQuery = Annotated[int, Query(ge=1, le=200, description="Items per page.")]
IdPath = Annotated[int, Path(ge=1, le=BIGINT_MAX)]
NamePath = Annotated[str, Path(pattern=NAME_PATTERN, max_length=100)]

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "No valid token or session cookie (DASHBOARD_TOKEN is set)."},
    403: {"model": ErrorOut, "description": "No DASHBOARD_TOKEN is configured and the client is not on "
                                            "loopback."},
}
router = APIRouter(prefix="/api", dependencies=[Depends(api_viewer)], responses=ERRORS)


def _bad_cursor(exc: InvalidCursor) -> HTTPException:
    return HTTPException(400, f"invalid cursor: {exc}")


@router.get("/risk-windows", tags=["risk windows"], response_model=RiskWindowPage,
            responses={400: {"model": ErrorOut, "description": "An invalid cursor."}})
def risk_windows(session: ReadSession, state: StateFilter = "open", repo: RepoQuery = None,
                 cursor: CursorQuery = None, limit: LimitQuery = 50) -> dict[str, Any]:
    """Risk windows, oldest first (closed ones stay listable forever), a page at a time."""
    try:
        items, following = list_windows(session, state=state, repo=repo, cursor=cursor, limit=limit)
    except InvalidCursor as exc:
        raise _bad_cursor(exc) from None
    return {"items": items, "next": following}


@router.get("/risk-windows/{window_id}", tags=["risk windows"], response_model=RiskWindowDetailOut,
            responses={404: {"model": ErrorOut}})
def risk_window(session: ReadSession, window_id: IdPath) -> dict[str, Any]:
    """One risk window with its timeline: every event, when and by whom."""
    detail = window_with_events(session, window_id=window_id)
    if detail is None:
        raise HTTPException(404, f"no risk window {window_id}")
    return dict(detail)


@router.post("/risk-windows/{window_id}/close", tags=["risk windows"], response_model=RiskWindowDetailOut,
             responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut, "description": "Already closed."}})
def close_risk_window(request: Request, viewer: ApiViewer, gate: GateDep, sessions: SessionsDep,
                      window_id: IdPath, body: CloseRequest) -> dict[str, Any]:
    """Close an open risk window with a reason (recorded as an event). Needs DASHBOARD_TOKEN: a bearer
    token, or the login cookie plus its CSRF token in the `X-CSRF-Token` header."""
    if not viewer.can_close:
        raise HTTPException(403, "closing a risk window needs DASHBOARD_TOKEN to be configured")
    if viewer.session_id is not None and gate is not None and \
            not gate.csrf_ok(viewer.session_id, request.headers.get(CSRF_HEADER)):
        raise HTTPException(403, f"a cookie session must send its CSRF token in {CSRF_HEADER}")
    try:
        return dict(close_from_dashboard(sessions, window_id=window_id, reason=body.reason))
    except LookupError:
        raise HTTPException(404, f"no risk window {window_id}") from None
    except AlreadyClosed as exc:
        raise HTTPException(409, str(exc)) from None


@router.get("/runs", tags=["triage runs"], response_model=RunPage,
            responses={400: {"model": ErrorOut, "description": "An invalid cursor."}})
def runs(session: ReadSession, repo: RepoQuery = None,
         pr: Annotated[int | None, Query(ge=1, le=INTEGER_MAX,
                                         description="Only this pull request number.")] = None,
         cursor: CursorQuery = None, limit: LimitQuery = 50) -> dict[str, Any]:
    """Triage runs, newest first, with their findings."""
    try:
        items, following = list_runs(session, repo=repo, pr=pr, cursor=cursor, limit=limit)
    except InvalidCursor as exc:
        raise _bad_cursor(exc) from None
    return {"items": items, "next": following}


@router.get("/runs/{run_id}", tags=["triage runs"], response_model=RunDetailOut,
            responses={404: {"model": ErrorOut}})
def run(session: ReadSession, run_id: IdPath) -> dict[str, Any]:
    """One run: its findings, report summary, timing, and every suite's argv with base and head outcome."""
    detail = run_with_suites(session, run_id=run_id)
    if detail is None:
        raise HTTPException(404, f"no triage run {run_id}")
    return dict(detail)


@router.get("/repositories", tags=["repositories"], response_model=RepositoryList,
            responses={400: {"model": ErrorOut, "description": "An invalid cursor."}})
def repositories(session: ReadSession, cursor: CursorQuery = None, limit: LimitQuery = 50) -> dict[str, Any]:
    """The repositories the App sees, by name, a page at a time: each one's default branch, the policy and
    result of the default branch's last health, and the CI suites the default branch rejects now (dead
    suites)."""
    try:
        items, following = list_repositories(session, cursor=cursor, limit=limit)
    except InvalidCursor as exc:
        raise _bad_cursor(exc) from None
    return {"items": items, "next": following}


@router.get("/repositories/{owner}/{name}", tags=["repositories"], response_model=RepositoryOut,
            responses={404: {"model": ErrorOut}})
def repository(session: ReadSession, owner: NamePath, name: NamePath) -> dict[str, Any]:
    """One repository (`owner/name`, any case): default branch, policy, last health, dead suites."""
    view = repository_view(session, repo=f"{owner}/{name}")
    if view is None:
        raise HTTPException(404, f"no repository {owner}/{name}")
    return dict(view)


@router.get("/repositories/{owner}/{name}/suites/{suite:path}", tags=["repositories"],
            response_model=SuiteHistoryOut, responses={404: {"model": ErrorOut}})
def suite(session: ReadSession, owner: NamePath, name: NamePath,
          suite: Annotated[str, Path(description="The suite's id, percent-encoded whole (`/` as %2F).")],
          ) -> dict[str, Any]:
    """One CI suite of a repository: how the default branch's healths judged it, each time main broke it,
    and the pull requests whose head rejected it."""
    page = suite_page(session, repo=f"{owner}/{name}", suite=suite) if 0 < len(suite) <= MAX_SUITE else None
    if page is None:
        raise HTTPException(404, f"no CI suite {suite[:MAX_SUITE]!r} in {owner}/{name}")
    return asdict(page)
