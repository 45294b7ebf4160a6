"""The default branch's own health (issue 26): each repository's default branch, every `doctor` of it
(`main_health`), and the CI suites it rejects as risk windows of a new kind, "dead suite" (`dead_suites`).

- `repositories.default_branch`: as the last push or health check named it (null until then);
- `risk_windows.kind`: `followup` (every existing window) or `dead_suite`; a dead-suite window has no pull
  request, so `risk_windows.pull_request_id` becomes nullable;
- `main_health`: one row per check of a commit (`probe` rows: commits looked at to find a breaking one);
- `dead_suites`: a suite the default branch rejects, its error and line, the breaking and healing commits.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

Self-contained on purpose: a migration is a frozen snapshot and must not change when app code does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MOMENT = sa.DateTime(timezone=True)
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
SHA = sa.String(64)
WINDOW_KIND = sa.Enum("followup", "dead_suite", name="window_kind", native_enum=False, create_constraint=True,
                      length=32)


def upgrade() -> None:
    with op.batch_alter_table("repositories") as batch:
        batch.add_column(sa.Column("default_branch", sa.String(255), nullable=True))
    with op.batch_alter_table("risk_windows") as batch:
        batch.add_column(sa.Column("kind", WINDOW_KIND, nullable=False, server_default="followup"))
        batch.alter_column("pull_request_id", existing_type=ID, nullable=True)
    op.create_table(
        "main_health",
        sa.Column("id", ID, nullable=False),
        sa.Column("repository_id", sa.BigInteger(), nullable=False),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("sha", SHA, nullable=False),
        sa.Column("at", MOMENT, nullable=False),
        sa.Column("probe", sa.Boolean(), nullable=False),
        sa.Column("suites", sa.Integer(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("could_analyse", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("policy", sa.JSON(), nullable=False),
        sa.Column("scripts", sa.JSON(), nullable=False),
        sa.Column("outcomes", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["repository_id"], ["repositories.id"],
                                name="fk_main_health_repository_id_repositories"),
        sa.PrimaryKeyConstraint("id", name="pk_main_health"),
    )
    op.create_index("ix_main_health_repository_id_probe_at", "main_health",
                    ["repository_id", "probe", "at", "id"])
    op.create_index("ix_main_health_repository_id_sha", "main_health", ["repository_id", "sha"])
    op.create_table(
        "dead_suites",
        sa.Column("id", ID, nullable=False),
        sa.Column("repository_id", sa.BigInteger(), nullable=False),
        sa.Column("window_id", ID, nullable=False),
        sa.Column("suite", sa.String(255), nullable=False),
        sa.Column("script", sa.String(1024), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("path", sa.String(1024), nullable=True),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("since_sha", SHA, nullable=True),
        sa.Column("found_sha", SHA, nullable=False),
        sa.Column("healed_sha", SHA, nullable=True),
        sa.Column("opened_at", MOMENT, nullable=False),
        sa.Column("healed_at", MOMENT, nullable=True),
        sa.ForeignKeyConstraint(["repository_id"], ["repositories.id"],
                                name="fk_dead_suites_repository_id_repositories"),
        sa.ForeignKeyConstraint(["window_id"], ["risk_windows.id"],
                                name="fk_dead_suites_window_id_risk_windows"),
        sa.PrimaryKeyConstraint("id", name="pk_dead_suites"),
    )
    op.create_index("ix_dead_suites_repository_id_healed_sha", "dead_suites", ["repository_id", "healed_sha"])
    op.create_index("ix_dead_suites_window_id", "dead_suites", ["window_id"])


def downgrade() -> None:
    op.drop_index("ix_dead_suites_window_id", table_name="dead_suites")
    op.drop_index("ix_dead_suites_repository_id_healed_sha", table_name="dead_suites")
    op.drop_table("dead_suites")
    op.drop_index("ix_main_health_repository_id_sha", table_name="main_health")
    op.drop_index("ix_main_health_repository_id_probe_at", table_name="main_health")
    op.drop_table("main_health")
    op.execute("DELETE FROM window_events WHERE window_id IN (SELECT id FROM risk_windows "
               "WHERE pull_request_id IS NULL)")
    op.execute("DELETE FROM risk_windows WHERE pull_request_id IS NULL")
    with op.batch_alter_table("risk_windows") as batch:
        batch.alter_column("pull_request_id", existing_type=ID, nullable=False)
        batch.drop_constraint(op.f("ck_risk_windows_window_kind"), type_="check")
        batch.drop_column("kind")
    with op.batch_alter_table("repositories") as batch:
        batch.drop_column("default_branch")
