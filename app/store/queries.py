"""Every data function the service calls, in one place; each takes a Session and keyword-only arguments.

The functions live in small modules by concern; import them from here. None commits: the caller's
`session_scope` decides the transaction.
"""

from __future__ import annotations

from app.store.cursor import InvalidCursor
from app.store.dashboard_sessions import dashboard_session_live, end_dashboard_session, open_dashboard_session
from app.store.deliveries import get_delivery, mark_delivery, record_delivery, record_new_deliveries
from app.store.learned import last_validation_imports
from app.store.repos import (
    get_pull_request,
    has_installation,
    identity_conflicts,
    mark_repository_removed,
    open_pull_numbers_at,
    pull_request_by_id,
    pull_request_head,
    pull_request_of,
    stored_installation_of,
    upsert_installation,
    upsert_pull_request,
    upsert_repository,
)
from app.store.repository_views import list_repositories, repository_page, repository_view
from app.store.run_views import list_runs, run_with_suites, runs_over_time
from app.store.runs import (
    StartedRun,
    acknowledge_findings,
    acknowledge_run,
    fail_run,
    finish_run,
    get_run,
    is_current,
    latest_run,
    mark_running,
    pull_request_of_run,
    run_for_check_run,
    start_run,
)
from app.store.suite_views import dead_suite_of_window, suite_page
from app.store.window_views import list_windows, window_ages, window_with_events, windows_over_time
from app.store.windows import (
    add_window_event,
    awaited_references,
    close_window,
    closing_references,
    open_window,
    resolve_reference,
    upsert_reference,
    windows_awaiting,
    windows_of_pull_request,
)

__all__ = [
    "InvalidCursor",
    "StartedRun",
    "acknowledge_findings",
    "acknowledge_run",
    "add_window_event",
    "awaited_references",
    "close_window",
    "closing_references",
    "dashboard_session_live",
    "dead_suite_of_window",
    "end_dashboard_session",
    "fail_run",
    "finish_run",
    "get_delivery",
    "get_pull_request",
    "get_run",
    "has_installation",
    "identity_conflicts",
    "is_current",
    "last_validation_imports",
    "latest_run",
    "list_repositories",
    "list_runs",
    "list_windows",
    "mark_delivery",
    "mark_repository_removed",
    "mark_running",
    "open_dashboard_session",
    "open_pull_numbers_at",
    "open_window",
    "pull_request_by_id",
    "pull_request_head",
    "pull_request_of",
    "pull_request_of_run",
    "record_delivery",
    "record_new_deliveries",
    "repository_page",
    "repository_view",
    "resolve_reference",
    "run_for_check_run",
    "run_with_suites",
    "runs_over_time",
    "start_run",
    "stored_installation_of",
    "suite_page",
    "upsert_installation",
    "upsert_pull_request",
    "upsert_reference",
    "upsert_repository",
    "window_ages",
    "window_with_events",
    "windows_awaiting",
    "windows_of_pull_request",
    "windows_over_time",
]
