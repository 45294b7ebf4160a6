"""Each suite outcome names its run's repository (issue 26, the suite page): `suite_outcomes.repository_id`,
filled in from the run's pull request for the rows stored before, so that a suite's runs are one index range
of (repository, suite id) instead of the runs of every repository with a suite of that name (230 ms at the
dashboard benchmark's scale). The index by suite id alone, which 0007 added for that search, goes.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_suite_outcomes_suite_id_run_id", table_name="suite_outcomes")
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


def downgrade() -> None:
    op.drop_index("ix_suite_outcomes_repository_id_suite_id_run_id", table_name="suite_outcomes")
    with op.batch_alter_table("suite_outcomes") as batch:
        batch.drop_constraint("fk_suite_outcomes_repository_id_repositories", type_="foreignkey")
        batch.drop_column("repository_id")
    op.create_index("ix_suite_outcomes_suite_id_run_id", "suite_outcomes", ["suite_id", "run_id"])
