"""Alembic, configured in code, so `prtriage db upgrade` works from any directory."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from app.bundled import bundled
from app.store.session import make_engine

MIGRATIONS = bundled("migrations")


def alembic_config(url: str) -> Config:
    """Alembic's configuration for `url`, with the package's migrations as the script location."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolation would read a % in a password as a reference.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Apply the migrations up to `revision` (all of them by default)."""
    command.upgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    """The revision the database is at; None for a database never migrated."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
