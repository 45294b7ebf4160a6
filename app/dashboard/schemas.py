"""The dashboard API's own models: its pages, the close request and errors. The windows and runs in them are
the store's JSON contract (app/store/shapes.py), defined once for the store and the API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.store.shapes import OutcomeOut, RepositoryOut, RiskWindowOut, RunOut


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RiskWindowPage(Shape):
    items: list[RiskWindowOut]
    next: str | None = Field(description="Cursor of the next page; null on the last one.")


class CloseRequest(Shape):
    reason: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)] = Field(
        description="Why the window is closed, e.g. \"superseded by #2223\"; recorded in its timeline.")


class RunPage(Shape):
    items: list[RunOut]
    next: str | None = Field(description="Cursor of the next page; null on the last one.")


class RepositoryList(Shape):
    items: list[RepositoryOut]
    next: str | None = Field(description="Cursor of the next page; null on the last one.")


class HealthSpanOut(Shape):
    outcome: str = Field(description="accepted, rejected, error; `absent`: not in the matrix; `blind`: the "
                                     "health could not see (it judges nothing)")
    first_sha: str
    first_at: datetime
    last_sha: str
    last_at: datetime
    checks: int = Field(description="consecutive healths of the default branch that judged the suite alike")
    detail: OutcomeOut | None = Field(description="the first of them's outcome of the suite; null when "
                                                  "absent")


class DeadRecordOut(Shape):
    window_id: int
    script: str
    outcome: str
    error: str
    path: str | None
    line: int | None
    since_sha: str | None = Field(description="the commit that broke it; null when not known")
    found_sha: str
    opened_at: datetime
    healed_sha: str | None = Field(description="the commit at which main accepted it again; null while dead")
    healed_at: datetime | None


class SuiteRunOut(Shape):
    run_id: int
    script: str
    number: int = Field(description="the pull request's number")
    title: str
    url: str
    author: str
    head_sha: str
    created_at: datetime
    verdict: str = Field(description="the run's conclusion, or its status while it has none")
    base: OutcomeOut | None
    head: OutcomeOut | None


class SuiteHistoryOut(Shape):
    repo: str
    suite: str
    script: str | None
    spans: list[HealthSpanOut] = Field(description="the default branch's last 90 healths, newest first, "
                                                   "consecutive ones that judged the suite alike as one")
    dead: list[DeadRecordOut] = Field(description="each time main broke it, newest first")
    rejected_by: list[SuiteRunOut] = Field(description="the 50 newest runs whose head rejected it")
    runs: int = Field(description="pull-request runs that validated it")
    rejected: int = Field(description="... whose head rejected it or errored on it")


class ErrorOut(Shape):
    detail: str
