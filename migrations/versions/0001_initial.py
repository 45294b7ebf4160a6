"""Initial schema: installations, repositories, pull requests, deliveries, runs, findings, risk windows.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLite assigns ids only to an INTEGER primary key; PostgreSQL gets BIGINT everywhere.
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
UTC = sa.DateTime(timezone=True)
SHA = sa.String(length=64)
LOGIN = sa.String(length=255)


def _choice(name: str, *values: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=32)


def _pk(table: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint("id", name=f"pk_{table}")


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}")


def _stamps() -> list[sa.Column[object]]:
    return [sa.Column("created_at", UTC, nullable=False), sa.Column("updated_at", UTC, nullable=False)]


def upgrade() -> None:
    _github_side()
    _runs()
    _windows()


def _github_side() -> None:
    op.create_table(
        "installations",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("account_login", LOGIN, nullable=False),
        sa.Column("account_type", sa.String(length=32), nullable=True),
        sa.Column("state", _choice("installation_state", "active", "suspended", "deleted"), nullable=False),
        sa.Column("state_changed_at", UTC, nullable=True),
        *_stamps(),
        _pk("installations"),
    )
    op.create_table(
        "repositories",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("full_name", sa.String(length=255), nullable=False),
        sa.Column("private", sa.Boolean(), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("removed_at", UTC, nullable=True),
        *_stamps(),
        _fk("repositories", "installation_id", "installations"),
        _pk("repositories"),
    )
    op.create_index("ix_repositories_full_name", "repositories", ["full_name"])
    op.create_index("ix_repositories_installation_id", "repositories", ["installation_id"])
    op.create_table(
        "pull_requests",
        sa.Column("id", ID, nullable=False),
        sa.Column("repository_id", sa.BigInteger(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("author", LOGIN, nullable=False),
        sa.Column("url", sa.String(length=512), nullable=False),
        sa.Column("head_sha", SHA, nullable=False),
        sa.Column("base_sha", SHA, nullable=False),
        sa.Column("base_ref", sa.String(length=255), nullable=False),
        sa.Column("state", _choice("pull_request_state", "open", "closed"), nullable=False),
        sa.Column("draft", sa.Boolean(), nullable=False),
        sa.Column("merged_at", UTC, nullable=True),
        sa.Column("merge_commit_sha", SHA, nullable=True),
        sa.Column("body_sha256", sa.String(length=64), nullable=True),
        sa.Column("github_updated_at", UTC, nullable=True),
        *_stamps(),
        _fk("pull_requests", "repository_id", "repositories"),
        _pk("pull_requests"),
        sa.UniqueConstraint("repository_id", "number", name="uq_pull_requests_repository_id_number"),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", ID, nullable=False),
        sa.Column("guid", sa.String(length=64), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=True),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("received_at", UTC, nullable=False),
        sa.Column("status", _choice("delivery_status", "queued", "processed", "failed", "ignored"),
                  nullable=False),
        sa.Column("processed_at", UTC, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("payload_summary", sa.JSON(), nullable=False),
        _pk("deliveries"),
        sa.UniqueConstraint("guid", name="uq_deliveries_guid"),
    )


def _runs() -> None:
    op.create_table(
        "triage_runs",
        sa.Column("id", ID, nullable=False),
        sa.Column("pull_request_id", ID, nullable=False),
        sa.Column("head_sha", SHA, nullable=False),
        sa.Column("base_sha", SHA, nullable=False),
        sa.Column("status", _choice("run_status", "queued", "running", "completed", "superseded", "failed"),
                  nullable=False),
        sa.Column("conclusion", _choice("run_conclusion", "success", "failure", "neutral", "cancelled"),
                  nullable=True),
        sa.Column("check_run_id", sa.BigInteger(), nullable=True),
        sa.Column("superseded_by", SHA, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.Column("timing", sa.JSON(), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("started_at", UTC, nullable=True),
        sa.Column("finished_at", UTC, nullable=True),
        _fk("triage_runs", "pull_request_id", "pull_requests"),
        _pk("triage_runs"),
    )
    op.create_index("ix_triage_runs_pull_request_id_created_at", "triage_runs",
                    ["pull_request_id", "created_at"])
    op.create_index("ix_triage_runs_created_at_id", "triage_runs", ["created_at", "id"])
    op.create_index("ix_triage_runs_check_run_id", "triage_runs", ["check_run_id"])
    op.create_table(
        "suite_outcomes",
        sa.Column("id", ID, nullable=False),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("suite_id", sa.String(length=255), nullable=False),
        sa.Column("script", sa.String(length=1024), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("base", sa.JSON(), nullable=True),
        sa.Column("head", sa.JSON(), nullable=True),
        _fk("suite_outcomes", "run_id", "triage_runs"),
        _pk("suite_outcomes"),
        sa.UniqueConstraint("run_id", "suite_id", name="uq_suite_outcomes_run_id_suite_id"),
    )
    op.create_table(
        "findings",
        sa.Column("id", ID, nullable=False),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("severity", _choice("finding_severity", "blocking", "warning", "info"), nullable=False),
        sa.Column("path", sa.String(length=1024), nullable=True),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("in_diff", sa.Boolean(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("suites", sa.JSON(), nullable=False),
        sa.Column("scripts", sa.JSON(), nullable=False),
        sa.Column("acknowledged_by", LOGIN, nullable=True),
        sa.Column("ack_reason", sa.Text(), nullable=True),
        sa.Column("acknowledged_at", UTC, nullable=True),
        _fk("findings", "run_id", "triage_runs"),
        _pk("findings"),
    )
    op.create_index("ix_findings_run_id", "findings", ["run_id"])


def _windows() -> None:
    op.create_table(
        "pr_references",
        sa.Column("id", ID, nullable=False),
        sa.Column("pull_request_id", ID, nullable=False),
        sa.Column("target_owner", LOGIN, nullable=False),
        sa.Column("target_repo", sa.String(length=255), nullable=False),
        sa.Column("target_number", sa.Integer(), nullable=False),
        sa.Column("kind", _choice("reference_kind", "prerequisite", "followup", "revert", "closes",
                                  "mention"), nullable=False),
        sa.Column("sentence", sa.Text(), nullable=False),
        sa.Column("url", sa.String(length=512), nullable=True),
        sa.Column("state", _choice("reference_state", "open", "draft", "merged", "closed_unmerged",
                                   "not_found", "no_access", "completed", "not_planned"), nullable=True),
        sa.Column("state_checked_at", UTC, nullable=True),
        sa.Column("merged_at", UTC, nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        _fk("pr_references", "pull_request_id", "pull_requests"),
        _pk("pr_references"),
        sa.UniqueConstraint("pull_request_id", "target_owner", "target_repo", "target_number", "kind",
                            name="uq_pr_references_pull_request_target"),
    )
    op.create_index("ix_pr_references_target", "pr_references", ["target_number", "target_repo"])
    op.create_table(
        "risk_windows",
        sa.Column("id", ID, nullable=False),
        sa.Column("repository_id", sa.BigInteger(), nullable=False),
        sa.Column("pull_request_id", ID, nullable=False),
        sa.Column("state", _choice("window_state", "open", "closed"), nullable=False),
        sa.Column("risk", sa.Text(), nullable=False),
        sa.Column("opened_at", UTC, nullable=False),
        sa.Column("closed_at", UTC, nullable=True),
        sa.Column("close_reason", sa.Text(), nullable=True),
        _fk("risk_windows", "repository_id", "repositories"),
        _fk("risk_windows", "pull_request_id", "pull_requests"),
        _pk("risk_windows"),
    )
    op.create_index("ix_risk_windows_state_opened_at", "risk_windows", ["state", "opened_at", "id"])
    op.create_index("ix_risk_windows_repository_id_state_opened_at", "risk_windows",
                    ["repository_id", "state", "opened_at", "id"])
    op.create_index("ix_risk_windows_pull_request_id", "risk_windows", ["pull_request_id"])
    op.create_table(
        "window_awaits",
        sa.Column("window_id", ID, nullable=False),
        sa.Column("reference_id", ID, nullable=False),
        _fk("window_awaits", "window_id", "risk_windows"),
        _fk("window_awaits", "reference_id", "pr_references"),
        sa.PrimaryKeyConstraint("window_id", "reference_id", name="pk_window_awaits"),
    )
    op.create_index("ix_window_awaits_reference_id", "window_awaits", ["reference_id"])
    op.create_table(
        "window_events",
        sa.Column("id", ID, nullable=False),
        sa.Column("window_id", ID, nullable=False),
        sa.Column("at", UTC, nullable=False),
        sa.Column("actor", LOGIN, nullable=False),
        sa.Column("what", sa.Text(), nullable=False),
        _fk("window_events", "window_id", "risk_windows"),
        _pk("window_events"),
    )
    op.create_index("ix_window_events_window_id_at", "window_events", ["window_id", "at"])


def downgrade() -> None:
    for table in ("window_events", "window_awaits", "risk_windows", "pr_references", "findings",
                  "suite_outcomes", "triage_runs", "deliveries", "pull_requests", "repositories",
                  "installations"):
        op.drop_table(table)  # drops the table's indexes with it
