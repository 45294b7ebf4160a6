"""Engines from URLs: the driver each URL gets, SQLite's settings, UTC sessions, transaction scopes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.exc import DBAPIError

from app.store.models import Installation
from app.store.session import make_engine, normalize_url, session_factory, session_scope

from .databases import PostgresDatabases


@pytest.mark.parametrize(("url", "driver", "database"), [
    ("postgres://u:p@db:5432/prtriage", "postgresql+psycopg", "prtriage"),
    ("postgresql://u:p@db/prtriage", "postgresql+psycopg", "prtriage"),
    ("postgresql+psycopg://u@db/prtriage", "postgresql+psycopg", "prtriage"),
    ("sqlite:////var/lib/prtriage/prtriage.db", "sqlite", "/var/lib/prtriage/prtriage.db"),
])
def test_postgres_urls_use_psycopg_3(url: str, driver: str, database: str) -> None:
    normalized = normalize_url(url)
    assert (normalized.drivername, normalized.database) == (driver, database)


def test_sqlite_engine_creates_its_directory_and_sets_pragmas(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'deep' / 'prtriage.db'}")
    with engine.connect() as connection:
        pragma = {name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
                  for name in ("journal_mode", "foreign_keys", "busy_timeout")}
    engine.dispose()
    assert (tmp_path / "data" / "deep" / "prtriage.db").exists()
    assert pragma == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 15000}


def test_postgres_sessions_run_in_utc(postgres: PostgresDatabases) -> None:
    url = postgres.create().replace("postgresql://", "postgres://")
    engine = make_engine(url)
    try:
        assert engine.dialect.driver == "psycopg"
        with engine.connect() as connection:
            assert connection.execute(text("SHOW TimeZone")).scalar() == "UTC"
    finally:
        engine.dispose()


def test_session_scope_commits_or_rolls_back(db: Engine) -> None:
    with session_scope(db) as session:
        session.add(Installation(id=1, account_login="kept"))
    with pytest.raises(RuntimeError), session_scope(db) as session:
        session.add(Installation(id=2, account_login="dropped"))
        session.flush()
        raise RuntimeError("the job failed")
    with session_scope(session_factory(db), read_only=True) as session:
        assert session.scalars(select(Installation.account_login)).all() == ["kept"]


def test_postgres_enforces_read_only_scopes(postgres: PostgresDatabases) -> None:
    engine = make_engine(postgres.create())
    try:
        with pytest.raises(DBAPIError, match="read-only transaction"), \
                session_scope(engine, read_only=True) as session:
            session.execute(text("CREATE TABLE refused (n integer)"))
        with session_scope(engine) as session:  # the pooled connection is writable again
            session.execute(text("CREATE TABLE written (n integer)"))
    finally:
        engine.dispose()


def test_a_reader_does_not_wait_for_a_writer(db: Engine) -> None:
    """The dashboard reads while a worker holds the write lock (SQLite: a WAL snapshot)."""
    writing, done = threading.Event(), threading.Event()

    def writer() -> None:
        with session_scope(db) as session:
            session.add(Installation(id=7, account_login="slow"))
            session.flush()
            writing.set()
            done.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert writing.wait(10)
        started = time.monotonic()
        with session_scope(db, read_only=True) as session:
            assert session.scalars(select(Installation)).all() == []  # not committed yet
        assert time.monotonic() - started < 2
    finally:
        done.set()
        thread.join()
