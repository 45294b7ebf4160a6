"""The migrations build exactly the models' schema, on both backends, from any working directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from app.store.migrate import current_revision, head_revision, upgrade
from app.store.models import Base
from app.store.session import make_engine


def schema_diff(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_migrated_schema_equals_the_models(empty_database_url: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # `prtriage db upgrade` runs from anywhere
    assert current_revision(empty_database_url) is None
    upgrade(empty_database_url)
    assert current_revision(empty_database_url) == head_revision() == "0007"
    assert schema_diff(empty_database_url) == []


def test_the_comparison_sees_a_drifted_schema(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    engine = make_engine(empty_database_url)
    with engine.begin() as connection:
        connection.execute(text("DROP INDEX ix_risk_windows_state_opened_at"))
    engine.dispose()
    diff = schema_diff(empty_database_url)
    assert [entry[0] for entry in diff] == ["add_index"]  # type: ignore[index]


def test_upgrade_twice_and_downgrade_round_trip(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    upgrade(empty_database_url)  # nothing to do: no error
    from alembic import command

    from app.store.migrate import alembic_config

    command.downgrade(alembic_config(empty_database_url), "base")
    assert current_revision(empty_database_url) is None
    upgrade(empty_database_url)
    assert schema_diff(empty_database_url) == []
