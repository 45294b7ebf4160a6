"""Alembic environment: migrate the database named by the configuration, on the service's own engine setup."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection, text

from app.store.models import Base
from app.store.session import make_engine

# Two processes starting at once (serve and a worker) must not both apply a migration.
POSTGRES_MIGRATION_LOCK = 7_326_100_001


def _url() -> str:
    url = context.config.get_main_option("sqlalchemy.url")
    if url:
        return url
    # The `alembic` command line from the repository root (for `alembic revision --autogenerate`).
    from app.config import Settings

    return os.environ.get("DATABASE_URL") or Settings().effective_database_url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        compare_type=True,
        # SQLite can alter a table only by copying it; batch mode makes later migrations do that.
        render_as_batch=connection.dialect.name == "sqlite",
    )


def run_migrations_online() -> None:
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                if connection.dialect.name == "postgresql":
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                       {"key": POSTGRES_MIGRATION_LOCK})
                context.run_migrations()
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=Base.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
