"""One CI suite's history, for the suite page (issue 26): each suite outcome names its run's repository
(`suite_outcomes.repository_id`, filled in from the run's pull request for the rows stored before), so that a
suite's runs are found by (repository, suite id) alone, and a repository's dead-suite records of one suite.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("suite_outcomes") as batch:
        batch.add_column(sa.Column("repository_id", sa.BigInteger(), nullable=True))
    op.execute("UPDATE suite_outcomes SET repository_id = (SELECT pull_requests.repository_id "
               "FROM triage_runs JOIN pull_requests ON pull_requests.id = triage_runs.pull_request_id "
               "WHERE triage_runs.id = suite_outcomes.run_id)")
    with op.batch_alter_table("suite_outcomes") as batch:
        batch.alter_column("repository_id", existing_type=sa.BigInteger(), nullable=False)
        batch.create_foreign_key("fk_suite_outcomes_repository_id_repositories", "repositories",
                                 ["repository_id"], ["id"])
    op.create_index("ix_suite_outcomes_repository_id_suite_id_run_id", "suite_outcomes",
                    ["repository_id", "suite_id", "run_id"])
    op.create_index("ix_dead_suites_repository_id_suite", "dead_suites", ["repository_id", "suite"])


def downgrade() -> None:
    op.drop_index("ix_dead_suites_repository_id_suite", table_name="dead_suites")
    op.drop_index("ix_suite_outcomes_repository_id_suite_id_run_id", table_name="suite_outcomes")
    with op.batch_alter_table("suite_outcomes") as batch:
        batch.drop_constraint("fk_suite_outcomes_repository_id_repositories", type_="foreignkey")
        batch.drop_column("repository_id")
