"""One CI suite's history, for the suite page (issue 26): the runs that validated a suite, found by its id
(`suite_outcomes.suite_id`), and a repository's dead-suite records of one suite.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_suite_outcomes_suite_id_run_id", "suite_outcomes", ["suite_id", "run_id"])
    op.create_index("ix_dead_suites_repository_id_suite", "dead_suites", ["repository_id", "suite"])


def downgrade() -> None:
    op.drop_index("ix_dead_suites_repository_id_suite", table_name="dead_suites")
    op.drop_index("ix_suite_outcomes_suite_id_run_id", table_name="suite_outcomes")
