"""GitHub's immutable ids beside the names: a pull request keeps GitHub's id, so a delivery that names the
same (repository, number) with another pull request id is told apart and refused (issue 23).

- `pull_requests.github_id`: GitHub's id of the pull request (unique; null for rows stored before it);

Names stay labels: `repositories.full_name` may be held by several rows (a repository deleted or renamed,
another created under its name); lookups go by `repositories.id`.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pull_requests") as batch:
        batch.add_column(sa.Column("github_id", sa.BigInteger(), nullable=True))
        batch.create_unique_constraint("uq_pull_requests_github_id", ["github_id"])


def downgrade() -> None:
    with op.batch_alter_table("pull_requests") as batch:
        batch.drop_constraint("uq_pull_requests_github_id", type_="unique")
        batch.drop_column("github_id")
