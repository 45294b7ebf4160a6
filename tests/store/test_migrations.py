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
    assert current_revision(empty_database_url) == head_revision() == "0009"
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


def test_outcomes_and_runs_stored_before_0008_and_0009_get_their_repository(empty_database_url: str) -> None:
    upgrade(empty_database_url, "0007")
    engine = make_engine(empty_database_url)
    now = "2026-12-01 10:00:00"
    with engine.begin() as connection:
        for statement in (
                "INSERT INTO installations (id, account_login, state, created_at, updated_at) "
                f"VALUES (1, 'acme', 'active', '{now}', '{now}')",
                *("INSERT INTO repositories (id, full_name, private, installation_id, created_at, "
                  f"updated_at) VALUES ({repo}, 'acme/r{repo}', false, 1, '{now}', '{now}')"
                  for repo in (11, 12)),
                *("INSERT INTO pull_requests (id, repository_id, number, title, author, url, head_sha, "
                  "base_sha, base_ref, state, draft, created_at, updated_at) VALUES "
                  f"({pr}, {repo}, 1, 't', 'a', 'u', 'h', 'b', 'main', 'open', false, '{now}', '{now}')"
                  for pr, repo in ((1, 11), (2, 12))),
                *("INSERT INTO triage_runs (id, pull_request_id, head_sha, base_sha, status, created_at) "
                  f"VALUES ({run}, {run}, 'h', 'b', 'completed', '{now}')" for run in (1, 2)),
                *("INSERT INTO suite_outcomes (run_id, suite_id, script, argv) "
                  f"VALUES ({run}, 's#1', 's', '[]')" for run in (1, 2))):
            connection.execute(text(statement))
    engine.dispose()
    upgrade(empty_database_url)
    engine = make_engine(empty_database_url)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT run_id, repository_id FROM suite_outcomes ORDER BY run_id"))
        assert [tuple(row) for row in rows] == [(1, 11), (2, 12)]
        rows = connection.execute(text("SELECT id, repository_id FROM triage_runs ORDER BY id"))
        assert [tuple(row) for row in rows] == [(1, 11), (2, 12)]
    engine.dispose()
    assert schema_diff(empty_database_url) == []
