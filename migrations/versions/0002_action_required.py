"""Runs may conclude `action_required`: the analysis could not run or could not see (its health).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = ("success", "failure", "neutral", "cancelled")
AFTER = (*BEFORE, "action_required")


def _conclusion(values: Sequence[str]) -> sa.Enum:
    return sa.Enum(*values, name="run_conclusion", native_enum=False, create_constraint=True, length=32)


def _swap(old: Sequence[str], new: Sequence[str]) -> None:
    # batch mode: SQLite changes a CHECK constraint only by copying the table
    with op.batch_alter_table("triage_runs") as batch:
        batch.alter_column("conclusion", existing_type=_conclusion(old), type_=_conclusion(new),
                           existing_nullable=True)


def upgrade() -> None:
    _swap(BEFORE, AFTER)


def downgrade() -> None:
    # a run concluded action_required reads as neutral in the older schema, as it was recorded before
    op.execute("UPDATE triage_runs SET conclusion = 'neutral' WHERE conclusion = 'action_required'")
    _swap(AFTER, BEFORE)
