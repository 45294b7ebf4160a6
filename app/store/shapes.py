"""The dashboard's JSON (INTERFACES.md, "Dashboard and its API"), defined once: what the store's views return
and what the API answers with (its response models, so the OpenAPI schema documents them).

TypedDicts that pydantic reads as models: the store builds plain dicts with aware UTC `datetime`s (pages
compute ages from them); the API writes them as ISO 8601. The names are the API schema's names.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from Python 3.12

CLOSED = ConfigDict(extra="forbid")


@with_config(CLOSED)
class PullRequestOut(TypedDict):
    number: int
    title: Annotated[str, Field(description="Private repositories' titles are why the dashboard needs a "
                                            "token.")]
    url: str
    author: str
    merged_at: datetime | None


@with_config(CLOSED)
class AwaitedOut(TypedDict):
    ref: Annotated[str, Field(description="owner/repo#N", examples=["radixark/miles#2204"])]
    kind: Literal["followup", "prerequisite"]  # the kinds a window awaits
    state: Annotated[str | None, Field(description="open, draft, merged, closed_unmerged, not_found, "
                                                   "no_access, completed, not_planned; null until first "
                                                   "resolved")]
    url: str | None


@with_config(CLOSED)
class RiskWindowOut(TypedDict):
    id: int
    repo: Annotated[str, Field(description="owner/name")]
    kind: Annotated[Literal["followup", "dead_suite"], Field(
        description="`followup`: a merged PR awaits a follow-up or prerequisite (or merged a blocking "
                    "finding); `dead_suite`: the default branch rejects a CI suite (no pull request).")]
    pr: Annotated[PullRequestOut | None, Field(description="null for a dead suite")]
    awaiting: list[AwaitedOut]
    state: Literal["open", "closed"]
    opened_at: datetime
    closed_at: datetime | None
    close_reason: str | None
    risk: Annotated[str, Field(description="The sentence of the PR that states the risk.")]


@with_config(CLOSED)
class EventOut(TypedDict):
    at: datetime
    actor: str
    what: str


@with_config(CLOSED)
class RiskWindowDetailOut(RiskWindowOut):
    events: list[EventOut]


@with_config(CLOSED)
class FindingOut(TypedDict):
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


@with_config(CLOSED)
class RunOut(TypedDict):
    id: int
    repo: str
    pr: PullRequestOut
    head_sha: str
    base_sha: str
    status: Annotated[str, Field(description="queued, running, completed, superseded, failed")]
    conclusion: Annotated[str | None, Field(description="success, failure, neutral, cancelled, "
                                                        "action_required")]
    check_run_id: int | None
    superseded_by: str | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    findings: list[FindingOut]


# A suite's outcome at one revision (`Outcome.to_json()`); the store fills in the keys an older row lacks, as
# null. Open to keys a later version adds (extra="ignore"), as the API has always been.
@with_config(ConfigDict(extra="ignore"))
class OutcomeOut(TypedDict):
    outcome: Annotated[str, Field(description="accepted, rejected or error")]
    exception: NotRequired[str | None]
    message: NotRequired[str | None]
    path: NotRequired[str | None]
    line: NotRequired[int | None]


@with_config(CLOSED)
class SuiteOut(TypedDict):
    id: str
    script: str
    argv: list[str]
    base: Annotated[OutcomeOut | None, Field(description="null when the suite was not run at base")]
    head: OutcomeOut | None


@with_config(CLOSED)
class RunDetailOut(RunOut):
    summary: dict[str, Any] | None
    timing: dict[str, Any] | None
    suites: list[SuiteOut]
    acknowledged_by: Annotated[str | None, Field(description="Who let a run that could not conclude through "
                                                             "(`/triage ack`); null otherwise.")]
    ack_reason: str | None
    acknowledged_at: datetime | None
    events: list[EventOut]


class DayCount(TypedDict):
    day: date
    open: int  # windows open at the end of that UTC day


class RunDay(TypedDict):
    day: date
    outcomes: dict[str, int]  # runs created that UTC day by outcome: a conclusion, else the run's status


class AgeBucket(TypedDict):
    label: str  # e.g. "1-7 days"
    count: int


def outcome_out(stored: dict[str, Any] | None) -> OutcomeOut | None:
    """A stored outcome with every key of the contract (null where an older row has none)."""
    if stored is None:
        return None
    return {"outcome": str(stored["outcome"]), "exception": stored.get("exception"),
            "message": stored.get("message"), "path": stored.get("path"), "line": stored.get("line")}


@with_config(CLOSED)
class EnvironmentOut(TypedDict):
    """The analysis environment a health ran under (docs/policy.md, "The analysis environment")."""

    python: Annotated[str, Field(description="the Python version the harness ran under", examples=["3.11.7"])]
    python_asked: Annotated[list[str], Field(description="`harness.python`: the versions the policy asks "
                                                         "for, most wanted first; empty: prtriage's own")]
    requirements: Annotated[list[str], Field(description="`harness.requirements`, with those read by "
                                                         "`harness.requirements_from`")]
    installed: Annotated[list[str], Field(description="the environment's `pip freeze` (name==version); "
                                                      "empty: no requirement, the standard library alone")]
    digest: Annotated[str, Field(description="the environment's content (its Python and every installed "
                                             "version), part of every cache key")]
    stub_modules: Annotated[list[str], Field(description="`harness.stub_modules`: stubbed even when "
                                                         "installed")]
    stub_missing_modules: Annotated[bool, Field(description="`harness.stub_missing_modules`: a module the "
                                                            "environment lacks is stubbed (else its import "
                                                            "fails)")]


@with_config(CLOSED)
class PolicyOut(TypedDict):
    source: Annotated[str, Field(description="base (the repository's own .github/pr-triage.yml), builtin or "
                                             "default")]
    path: str | None
    repository: str
    environment: Annotated[EnvironmentOut | None, Field(
        description="An extension of INTERFACES.md: the analysis environment the health ran under; null when "
                    "not recorded (a health stored before it was, or one that could not run)")]


@with_config(CLOSED)
class HealthOut(TypedDict):
    sha: str
    at: datetime
    suites: Annotated[int, Field(description="CI suites captured on the default branch")]
    accepted: Annotated[int, Field(description="how many of them the default branch accepts")]
    could_analyse: Annotated[bool, Field(description="false: the harness is blind here (no dead suite is "
                                                     "judged from such a health)")]


@with_config(CLOSED)
class DeadSuiteOut(TypedDict):
    suite: str
    script: str
    error: str
    path: str | None
    line: int | None
    since_sha: Annotated[str | None, Field(description="the commit that broke it; null when not known")]
    window_id: int


@with_config(CLOSED)
class RepositoryOut(TypedDict):
    repo: Annotated[str, Field(description="owner/name")]
    default_branch: str | None
    policy: Annotated[PolicyOut | None, Field(description="the policy of the last health; null before one")]
    last_health: HealthOut | None
    dead_suites: Annotated[list[DeadSuiteOut], Field(description="CI suites the default branch rejects now")]
