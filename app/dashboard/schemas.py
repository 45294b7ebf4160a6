"""The JSON shapes of the dashboard's API (INTERFACES.md, "Dashboard and its API"), as response models so
that the OpenAPI schema documents them. Datetimes are ISO 8601 in UTC."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PullRequestOut(Shape):
    number: int
    title: str = Field(description="Private repositories' titles are why the dashboard needs a token.")
    url: str
    author: str
    merged_at: datetime | None


class AwaitedOut(Shape):
    ref: str = Field(description="owner/repo#N", examples=["radixark/miles#2204"])
    kind: Literal["followup", "prerequisite"]
    state: str | None = Field(description="open, draft, merged, closed_unmerged, not_found, no_access, "
                                          "completed, not_planned; null until first resolved")
    url: str | None


class RiskWindowOut(Shape):
    id: int
    repo: str = Field(description="owner/name")
    pr: PullRequestOut
    awaiting: list[AwaitedOut]
    state: Literal["open", "closed"]
    opened_at: datetime
    closed_at: datetime | None
    close_reason: str | None
    risk: str = Field(description="The sentence of the PR that states the risk.")


class RiskWindowPage(Shape):
    items: list[RiskWindowOut]
    next: str | None = Field(description="Cursor of the next page; null on the last one.")


class EventOut(Shape):
    at: datetime
    actor: str
    what: str


class RiskWindowDetailOut(RiskWindowOut):
    events: list[EventOut]


class CloseRequest(Shape):
    reason: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)] = Field(
        description="Why the window is closed, e.g. \"superseded by #2223\"; recorded in its timeline.")


class FindingOut(Shape):
    id: int
    kind: str
    severity: Literal["blocking", "warning", "info"]
    path: str | None
    line: int | None
    in_diff: bool
    message: str
    suites: list[str]
    scripts: list[str]
    acknowledged_by: str | None
    ack_reason: str | None
    acknowledged_at: datetime | None


class RunOut(Shape):
    id: int
    repo: str
    pr: PullRequestOut
    head_sha: str
    base_sha: str
    status: str = Field(description="queued, running, completed, superseded, failed")
    conclusion: str | None = Field(description="success, failure, neutral, cancelled, action_required")
    check_run_id: int | None
    superseded_by: str | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    findings: list[FindingOut]


class RunPage(Shape):
    items: list[RunOut]
    next: str | None = Field(description="Cursor of the next page; null on the last one.")


class OutcomeOut(BaseModel):
    outcome: str = Field(description="accepted, rejected or error")
    exception: str | None = None
    message: str | None = None
    path: str | None = None
    line: int | None = None


class SuiteOut(Shape):
    id: str
    script: str
    argv: list[str]
    base: OutcomeOut | None = Field(description="null when the suite was not run at base")
    head: OutcomeOut | None


class RunDetailOut(RunOut):
    summary: dict[str, Any] | None
    timing: dict[str, Any] | None
    suites: list[SuiteOut]
    acknowledged_by: str | None = Field(description="Who let a run that could not conclude through (`/triage "
                                                    "ack`); null otherwise.")
    ack_reason: str | None
    acknowledged_at: datetime | None
    events: list[EventOut]


class ErrorOut(Shape):
    detail: str
