"""Each triage run names its pull request's repository (issue 26, the repository page):
`triage_runs.repository_id`, filled in from the run's pull request for the rows stored before, with an index
(repository_id, created_at, id) so that a repository's newest runs are one index range read newest first.
Before, PostgreSQL joined every pull request of the repository to its runs and sorted them all for the page
(16-27 ms of the repository page for 4,000 runs at the dashboard benchmark's scale).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _foreign_keys(state: str) -> None:
    # SQLite's batch mode copies triage_runs and drops the old table: an implicit delete that the findings,
    # events and suite outcomes of stored runs would refuse (even deferred: the copy does not count as their
    # parent). SQLite obeys the pragma only outside a transaction; the copy keeps every id.
    if op.get_bind().dialect.name == "sqlite":
        with op.get_context().autocommit_block():
            op.execute(f"PRAGMA foreign_keys={state}")


def upgrade() -> None:
    _foreign_keys("OFF")
    with op.batch_alter_table("triage_runs") as batch:
        batch.add_column(sa.Column("repository_id", sa.BigInteger(), nullable=True))
    op.execute("UPDATE triage_runs SET repository_id = (SELECT pull_requests.repository_id "
               "FROM pull_requests WHERE pull_requests.id = triage_runs.pull_request_id)")
    with op.batch_alter_table("triage_runs") as batch:
        batch.alter_column("repository_id", existing_type=sa.BigInteger(), nullable=False)
        batch.create_foreign_key("fk_triage_runs_repository_id_repositories", "repositories",
                                 ["repository_id"], ["id"])
    op.create_index("ix_triage_runs_repository_id_created_at_id", "triage_runs",
                    ["repository_id", "created_at", "id"])
    _foreign_keys("ON")


def downgrade() -> None:
    _foreign_keys("OFF")
    op.drop_index("ix_triage_runs_repository_id_created_at_id", table_name="triage_runs")
    with op.batch_alter_table("triage_runs") as batch:
        batch.drop_constraint("fk_triage_runs_repository_id_repositories", type_="foreignkey")
        batch.drop_column("repository_id")
    _foreign_keys("ON")
