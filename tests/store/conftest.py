"""Databases for the store's tests: every test runs against a SQLite file and a fresh PostgreSQL database.

PostgreSQL databases are created for the session and dropped after it (see databases.py); when the server
is unreachable the PostgreSQL cases skip with the reason, and under CI=true they fail instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session

from app.store.migrate import upgrade
from app.store.models import Base
from app.store.session import make_engine, session_scope

from .databases import PostgresDatabases
from .factories import Factory

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases()
    yield databases
    databases.drop_all()


@pytest.fixture(params=BACKENDS)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database with nothing in it, on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    postgres: PostgresDatabases = request.getfixturevalue("postgres")
    return postgres.create()


@pytest.fixture(scope="session", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """A migrated database per backend, shared by the session's tests (each test leaves it empty)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'prtriage.db'}"
    else:
        url = request.getfixturevalue("postgres").create()
    upgrade(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    """The backend's engine; every row the test wrote is deleted afterwards (children first)."""
    yield engine
    with session_scope(engine) as session:
        for table in reversed(Base.metadata.sorted_tables):
            session.execute(delete(table))


@pytest.fixture
def session(db: Engine) -> Iterator[Session]:
    """One transaction for the test body, committed at its end."""
    with session_scope(db) as session:
        yield session


@pytest.fixture
def make() -> Factory:
    return Factory()

