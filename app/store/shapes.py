"""The shapes the queries return: INTERFACES.md's dashboard JSON, with datetimes left for the route to format.

Datetimes are aware UTC `datetime`s: the JSON route writes them as ISO 8601, pages compute ages from them.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, TypedDict


class PullRequestView(TypedDict):
    number: int
    title: str
    url: str
    author: str
    merged_at: datetime | None


class AwaitedView(TypedDict):
    ref: str  # owner/repo#N
    kind: str  # followup | prerequisite (the kinds a window awaits)
    state: str | None  # None until first resolved
    url: str | None


class WindowView(TypedDict):
    id: int
    repo: str
    pr: PullRequestView
    awaiting: list[AwaitedView]
    state: str
    opened_at: datetime
    closed_at: datetime | None
    close_reason: str | None
    risk: str


class EventView(TypedDict):
    at: datetime
    actor: str
    what: str


class WindowDetail(WindowView):
    events: list[EventView]


class FindingView(TypedDict):
    id: int
    kind: str
    severity: str
    path: str | None
    line: int | None
    in_diff: bool
    message: str
    suites: list[str]
    scripts: list[str]
    acknowledged_by: str | None
    ack_reason: str | None
    acknowledged_at: datetime | None


class RunView(TypedDict):
    id: int
    repo: str
    pr: PullRequestView
    head_sha: str
    base_sha: str
    status: str
    conclusion: str | None
    check_run_id: int | None
    superseded_by: str | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    findings: list[FindingView]


class SuiteView(TypedDict):
    id: str
    script: str
    argv: list[str]
    base: dict[str, Any] | None  # Outcome.to_json(): outcome, exception, message, path, line
    head: dict[str, Any] | None


class RunDetail(RunView):
    summary: dict[str, Any] | None
    timing: dict[str, Any] | None
    suites: list[SuiteView]
    acknowledged_by: str | None  # `/triage ack` of a run that could not conclude
    ack_reason: str | None
    acknowledged_at: datetime | None
    events: list[EventView]


class DayCount(TypedDict):
    day: date
    open: int  # windows open at the end of that UTC day


class AgeBucket(TypedDict):
    label: str  # e.g. "1-7 days"
    count: int
