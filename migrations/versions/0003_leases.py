"""Leases on the work a job has in hand, and acknowledgements of runs that could not conclude.

- `deliveries` and `triage_runs` gain `claimed_by` (the worker whose job has it) and `lease_until` (when the
  sweep may take it for lost: a claim's lease, renewed while the job works, or the deadline of a message
  waiting in the queue);
- `triage_runs` gains who acknowledged an `action_required` run (`/triage ack`), when and why;
- `run_events`: what happened to a run, and who did it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-09

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MOMENT = sa.DateTime(timezone=True)
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _lease_columns(table: str) -> None:
    with op.batch_alter_table(table) as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(255), nullable=True))
        batch.add_column(sa.Column("lease_until", MOMENT, nullable=True))


def upgrade() -> None:
    _lease_columns("deliveries")
    _lease_columns("triage_runs")
    with op.batch_alter_table("triage_runs") as batch:
        batch.add_column(sa.Column("acknowledged_by", sa.String(255), nullable=True))
        batch.add_column(sa.Column("ack_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("acknowledged_at", MOMENT, nullable=True))
    # the sweep reads the active rows of tables that keep their whole history
    op.create_index("ix_deliveries_status_received_at", "deliveries", ["status", "received_at"])
    op.create_index("ix_triage_runs_status", "triage_runs", ["status"])
    op.create_table(
        "run_events",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("run_id", BIG_ID, nullable=False),
        sa.Column("at", MOMENT, nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("what", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["triage_runs.id"], name="fk_run_events_run_id_triage_runs"),
        sa.PrimaryKeyConstraint("id", name="pk_run_events"),
    )
    op.create_index("ix_run_events_run_id_at", "run_events", ["run_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_run_events_run_id_at", table_name="run_events")
    op.drop_table("run_events")
    op.drop_index("ix_triage_runs_status", table_name="triage_runs")
    op.drop_index("ix_deliveries_status_received_at", table_name="deliveries")
    with op.batch_alter_table("triage_runs") as batch:
        for column in ("acknowledged_at", "ack_reason", "acknowledged_by", "lease_until", "claimed_by"):
            batch.drop_column(column)
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("lease_until")
        batch.drop_column("claimed_by")
