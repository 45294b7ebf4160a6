"""The tables: GitHub installations and pull requests, deliveries, triage runs and risk windows.

History is never deleted: foreign keys have no ON DELETE CASCADE and no relationship cascades deletes, so a
closed risk window, a superseded run or a processed delivery stays readable. Datetimes are aware UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    Index,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from app.store.types import BigId, UTCDateTime, choice, literal_values, utcnow

InstallationState = Literal["active", "suspended", "deleted"]
DeliveryStatus = Literal["queued", "processed", "failed", "ignored"]
PullRequestState = Literal["open", "closed"]
RunStatus = Literal["queued", "running", "completed", "superseded", "failed"]
Conclusion = Literal["success", "failure", "neutral", "cancelled", "action_required"]
Severity = Literal["blocking", "warning", "info"]
ReferenceKind = Literal["prerequisite", "followup", "revert", "closes", "mention"]
ReferenceState = Literal["open", "draft", "merged", "closed_unmerged", "not_found", "no_access", "completed",
                         "not_planned"]
WindowState = Literal["open", "closed"]
WindowKind = Literal["followup", "dead_suite"]

SHA = String(64)  # 40 hex digits today; SHA-256 repositories use 64
LOGIN = String(255)

# Stable constraint names: Alembic can only alter or drop what it can name, on every backend.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Every table: the naming convention, and which column type each annotation means."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(), dict[str, Any]: JSON(),
                                                     list[str]: JSON()}


class Installation(Base):
    """A GitHub App installation; the id is GitHub's."""

    __tablename__ = "installations"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    account_login: Mapped[str] = mapped_column(LOGIN)
    account_type: Mapped[str | None] = mapped_column(String(32))  # User | Organization
    state: Mapped[InstallationState] = mapped_column(
        choice("installation_state", literal_values(InstallationState)), default="active")
    state_changed_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class Repository(Base):
    """A repository the App sees; the id is GitHub's, so a rename or transfer keeps its history."""

    __tablename__ = "repositories"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    full_name: Mapped[str] = mapped_column(String(255), index=True)  # owner/name, as GitHub spells it
    private: Mapped[bool]
    installation_id: Mapped[int | None] = mapped_column(ForeignKey("installations.id"), index=True)
    default_branch: Mapped[str | None] = mapped_column(String(255))  # as the last push or health named it
    removed_at: Mapped[datetime | None]  # removed from the installation; kept for its history
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class PullRequest(Base):
    """A pull request, keyed by its repository's GitHub id and its number; `github_id` is GitHub's own id of
    it (None for rows stored before it was kept), so a delivery that pairs them otherwise is told apart."""

    __tablename__ = "pull_requests"
    __table_args__ = (UniqueConstraint("repository_id", "number"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    github_id: Mapped[int | None] = mapped_column(BigInteger, unique=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    number: Mapped[int]
    title: Mapped[str] = mapped_column(Text)
    author: Mapped[str] = mapped_column(LOGIN)
    url: Mapped[str] = mapped_column(String(512))
    head_sha: Mapped[str] = mapped_column(SHA)
    base_sha: Mapped[str] = mapped_column(SHA)
    base_ref: Mapped[str] = mapped_column(String(255))
    state: Mapped[PullRequestState] = mapped_column(choice("pull_request_state",
                                                           literal_values(PullRequestState)))
    draft: Mapped[bool] = mapped_column(default=False)
    merged_at: Mapped[datetime | None]
    merge_commit_sha: Mapped[str | None] = mapped_column(SHA)  # only once merged: reverts name it
    body_sha256: Mapped[str | None] = mapped_column(String(64))  # an edit, without keeping the body
    github_updated_at: Mapped[datetime | None]  # orders webhook updates that arrive out of order
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    repository: Mapped[Repository] = relationship()


class Delivery(Base):
    """One webhook delivery; the unique GUID makes a redelivery or a concurrent duplicate a no-op.

    The raw body is not kept: only the few parsed fields the job needs (`payload_summary`).
    """

    __tablename__ = "deliveries"
    __table_args__ = (Index("ix_deliveries_status_received_at", "status", "received_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    guid: Mapped[str] = mapped_column(String(64), unique=True)
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    installation_id: Mapped[int | None] = mapped_column(BigInteger)  # not a foreign key: may precede the row
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
    status: Mapped[DeliveryStatus] = mapped_column(choice("delivery_status", literal_values(DeliveryStatus)),
                                                   default="queued")
    processed_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    payload_summary: Mapped[dict[str, Any]]
    claimed_by: Mapped[str | None] = mapped_column(String(255))  # the worker whose job has it (leases.py)
    lease_until: Mapped[datetime | None]  # then the sweep takes it for lost; None: received_at + the grace


class TriageRun(Base):
    """One triage of one head sha of a pull request; a newer head supersedes it."""

    __tablename__ = "triage_runs"
    __table_args__ = (Index("ix_triage_runs_pull_request_id_created_at", "pull_request_id", "created_at"),
                      Index("ix_triage_runs_created_at_id", "created_at", "id"),
                      Index("ix_triage_runs_status", "status"),
                      Index("ix_triage_runs_repository_id_created_at_id", "repository_id", "created_at",
                            "id"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    pull_request_id: Mapped[int] = mapped_column(ForeignKey("pull_requests.id"))
    # the pull request's, kept here so that a repository's newest runs are one index range (migration 0009)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    head_sha: Mapped[str] = mapped_column(SHA)
    base_sha: Mapped[str] = mapped_column(SHA)
    status: Mapped[RunStatus] = mapped_column(choice("run_status", literal_values(RunStatus)),
                                              default="queued")
    conclusion: Mapped[Conclusion | None] = mapped_column(choice("run_conclusion",
                                                                 literal_values(Conclusion)))
    check_run_id: Mapped[int | None] = mapped_column(BigInteger, index=True)  # check_run events name it
    superseded_by: Mapped[str | None] = mapped_column(SHA)  # the head sha of the run that replaced it
    error: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[dict[str, Any] | None]  # the report's JSON; set once, when the results are stored
    timing: Mapped[dict[str, Any] | None]  # seconds per step
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None] = mapped_column(String(255))  # the worker whose job has it (leases.py)
    lease_until: Mapped[datetime | None]  # then the sweep takes it for lost; None: created_at + the grace
    # `/triage ack` of a run that could not conclude (action_required): who let it through, when and why
    acknowledged_by: Mapped[str | None] = mapped_column(LOGIN)
    ack_reason: Mapped[str | None] = mapped_column(Text)
    acknowledged_at: Mapped[datetime | None]

    pull_request: Mapped[PullRequest] = relationship()
    events: Mapped[list[RunEvent]] = relationship(order_by="(RunEvent.at, RunEvent.id)")
    suites: Mapped[list[SuiteOutcome]] = relationship(back_populates="run", order_by="SuiteOutcome.id")
    findings: Mapped[list[Finding]] = relationship(back_populates="run", order_by="Finding.id")


class RunEvent(Base):
    """Something that happened to a triage run and who did it (an acknowledgement)."""

    __tablename__ = "run_events"
    __table_args__ = (Index("ix_run_events_run_id_at", "run_id", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("triage_runs.id"))
    at: Mapped[datetime] = mapped_column(default=utcnow)
    actor: Mapped[str] = mapped_column(LOGIN)
    what: Mapped[str] = mapped_column(Text)


class SuiteOutcome(Base):
    """How the base and the head revision's validation ended for one CI suite of a run."""

    __tablename__ = "suite_outcomes"
    __table_args__ = (UniqueConstraint("run_id", "suite_id"),
                      Index("ix_suite_outcomes_repository_id_suite_id_run_id", "repository_id", "suite_id",
                            "run_id"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("triage_runs.id"))
    # the run's pull request's repository, copied: a suite's page finds the suite's runs in one index range,
    # not by joining the runs of every repository that has a suite of that name
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    suite_id: Mapped[str] = mapped_column(String(255))
    script: Mapped[str] = mapped_column(String(1024))
    argv: Mapped[list[str]]
    base: Mapped[dict[str, Any] | None]  # Outcome.to_json(); None when the suite was not run at base
    head: Mapped[dict[str, Any] | None]

    run: Mapped[TriageRun] = relationship(back_populates="suites")


class Finding(Base):
    __tablename__ = "findings"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("triage_runs.id"), index=True)
    kind: Mapped[str] = mapped_column(String(64))  # open set: analysis and follow-ups add kinds
    severity: Mapped[Severity] = mapped_column(choice("finding_severity", literal_values(Severity)))
    path: Mapped[str | None] = mapped_column(String(1024))
    line: Mapped[int | None]
    in_diff: Mapped[bool] = mapped_column(default=False)
    message: Mapped[str] = mapped_column(Text)
    suites: Mapped[list[str]]
    scripts: Mapped[list[str]]
    acknowledged_by: Mapped[str | None] = mapped_column(LOGIN)
    ack_reason: Mapped[str | None] = mapped_column(Text)
    acknowledged_at: Mapped[datetime | None]

    run: Mapped[TriageRun] = relationship(back_populates="findings")


class Reference(Base):
    """A pull request or issue that a PR's text names, and its state when last resolved."""

    # "references" is an SQL keyword; a plain name keeps hand-written SQL and psql sessions simple.
    __tablename__ = "pr_references"
    __table_args__ = (
        UniqueConstraint("pull_request_id", "target_owner", "target_repo", "target_number", "kind",
                         name="uq_pr_references_pull_request_target"),
        Index("ix_pr_references_target", "target_number", "target_repo"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    pull_request_id: Mapped[int] = mapped_column(ForeignKey("pull_requests.id"))
    target_owner: Mapped[str] = mapped_column(LOGIN)
    target_repo: Mapped[str] = mapped_column(String(255))
    target_number: Mapped[int]
    kind: Mapped[ReferenceKind] = mapped_column(choice("reference_kind", literal_values(ReferenceKind)))
    sentence: Mapped[str] = mapped_column(Text)
    url: Mapped[str | None] = mapped_column(String(512))
    state: Mapped[ReferenceState | None] = mapped_column(  # None until first resolved
        choice("reference_state", literal_values(ReferenceState)))
    state_checked_at: Mapped[datetime | None]
    merged_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    pull_request: Mapped[PullRequest] = relationship()

    @property
    def ref(self) -> str:
        return f"{self.target_owner}/{self.target_repo}#{self.target_number}"


window_awaits = Table(
    "window_awaits",
    Base.metadata,
    Column("window_id", ForeignKey("risk_windows.id"), primary_key=True),
    Column("reference_id", ForeignKey("pr_references.id"), primary_key=True, index=True),
)


class RiskWindow(Base):
    """Merged work whose promised follow-up or prerequisite has not landed (kind `followup`, opened by a
    pull request), or a CI suite the default branch itself rejects (kind `dead_suite`, opened by a main
    health check, no pull request); closed windows stay."""

    __tablename__ = "risk_windows"
    __table_args__ = (
        Index("ix_risk_windows_state_opened_at", "state", "opened_at", "id"),
        Index("ix_risk_windows_repository_id_state_opened_at", "repository_id", "state", "opened_at", "id"),
        Index("ix_risk_windows_pull_request_id", "pull_request_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    pull_request_id: Mapped[int | None] = mapped_column(ForeignKey("pull_requests.id"))  # None: dead suite
    kind: Mapped[WindowKind] = mapped_column(choice("window_kind", literal_values(WindowKind)),
                                             default="followup", server_default="followup")
    state: Mapped[WindowState] = mapped_column(choice("window_state", literal_values(WindowState)),
                                               default="open")
    risk: Mapped[str] = mapped_column(Text)  # the sentence of the PR that states the risk
    opened_at: Mapped[datetime]
    closed_at: Mapped[datetime | None]
    close_reason: Mapped[str | None] = mapped_column(Text)

    repository: Mapped[Repository] = relationship()
    pull_request: Mapped[PullRequest | None] = relationship()
    awaiting: Mapped[list[Reference]] = relationship(secondary=window_awaits, order_by="Reference.id")
    events: Mapped[list[WindowEvent]] = relationship(back_populates="window",
                                                     order_by="(WindowEvent.at, WindowEvent.id)")


class WindowEvent(Base):
    """Something that happened to a risk window: opened, awaited ref resolved, closed, and by whom."""

    __tablename__ = "window_events"
    __table_args__ = (Index("ix_window_events_window_id_at", "window_id", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    window_id: Mapped[int] = mapped_column(ForeignKey("risk_windows.id"))
    at: Mapped[datetime] = mapped_column(default=utcnow)
    actor: Mapped[str] = mapped_column(LOGIN)
    what: Mapped[str] = mapped_column(Text)

    window: Mapped[RiskWindow] = relationship(back_populates="events")


class MainHealth(Base):
    """One `doctor` of a repository's default branch at one commit: how many captured CI suites it accepts,
    and how each suite ended (`outcomes`: suite id -> {script, outcome, exception, message, path, line}).
    `probe` rows are commits looked at only to find which one broke a suite (bisection): they are the
    cache of that search, not the branch's health over time."""

    __tablename__ = "main_health"
    __table_args__ = (Index("ix_main_health_repository_id_probe_at", "repository_id", "probe", "at", "id"),
                      Index("ix_main_health_repository_id_sha", "repository_id", "sha"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    branch: Mapped[str] = mapped_column(String(255))
    sha: Mapped[str] = mapped_column(SHA)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    probe: Mapped[bool] = mapped_column(default=False)
    suites: Mapped[int]
    accepted: Mapped[int]
    could_analyse: Mapped[bool]
    reason: Mapped[str] = mapped_column(Text)  # the health's sentence: what it saw, or why it is blind
    policy: Mapped[dict[str, Any]]  # {"source", "path", "repository", "environment"} (environment_facts)
    scripts: Mapped[dict[str, Any]]  # the capture: scripts considered, captured, failed, partial, disabled
    outcomes: Mapped[dict[str, Any]]


class DeadSuite(Base):
    """A CI suite the default branch rejects or errors on, with its risk window: the error and its line as
    first seen, the commit that broke it (None when no accepting commit is known) and the one that healed
    it."""

    __tablename__ = "dead_suites"
    __table_args__ = (Index("ix_dead_suites_repository_id_healed_sha", "repository_id", "healed_sha"),
                      Index("ix_dead_suites_window_id", "window_id"),
                      Index("ix_dead_suites_repository_id_suite", "repository_id", "suite"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    window_id: Mapped[int] = mapped_column(ForeignKey("risk_windows.id"))
    suite: Mapped[str] = mapped_column(String(255))
    script: Mapped[str] = mapped_column(String(1024))
    outcome: Mapped[str] = mapped_column(String(32))  # rejected | error
    error: Mapped[str] = mapped_column(Text)
    path: Mapped[str | None] = mapped_column(String(1024))
    line: Mapped[int | None]
    since_sha: Mapped[str | None] = mapped_column(SHA)  # the breaking commit
    found_sha: Mapped[str] = mapped_column(SHA)  # the health that found it
    healed_sha: Mapped[str | None] = mapped_column(SHA)
    opened_at: Mapped[datetime] = mapped_column(default=utcnow)
    healed_at: Mapped[datetime | None]


class DashboardSession(Base):
    """A login to the dashboard; its cookie is valid only while this row says so, so logging out ends it
    on the server too. The id is the SHA-256 of the cookie's session id: the table holds no credential."""

    __tablename__ = "dashboard_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(index=True)
    revoked_at: Mapped[datetime | None]
