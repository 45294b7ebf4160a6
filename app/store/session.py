"""Engines and sessions from a database URL: SQLite (the embedded default) or PostgreSQL through psycopg 3."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_MS = 15_000  # writers queue for the database lock rather than fail at once
POSTGRES_DRIVER = "postgresql+psycopg"
READ_ONLY = "prtriage_read_only"  # execution option: this transaction will not write


def normalize_url(url: str) -> URL:
    """`postgres://` and `postgresql://` (as Heroku-style DATABASE_URLs give them) use psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql"):
        parsed = parsed.set(drivername=POSTGRES_DRIVER)
    return parsed


def make_engine(url: str, **options: Any) -> Engine:
    """An engine for `url`, set up for this service; extra keyword arguments go to `create_engine`."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, options)
    if parsed.get_backend_name() == "postgresql":
        # Timestamps come back in UTC and date() buckets by UTC day, whatever the server's default zone.
        connect_args = {"options": "-c timezone=UTC", **options.pop("connect_args", {})}
        return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args, **options)
    return create_engine(parsed, **options)


def _sqlite_engine(url: URL, options: dict[str, Any]) -> Engine:
    if url.database and url.database != ":memory:" and not url.database.startswith("file:"):
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    connect_args = {"check_same_thread": False, "timeout": SQLITE_BUSY_MS / 1000,
                    **options.pop("connect_args", {})}
    engine = create_engine(url, connect_args=connect_args, **options)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from the sqlite3 module (its implicit BEGIN breaks SAVEPOINT); see _on_begin.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer, nor it them
        cursor.execute("PRAGMA synchronous=NORMAL")  # durable at each checkpoint; safe with WAL
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    finally:
        cursor.close()


def _sqlite_on_begin(connection: Any) -> None:
    # IMMEDIATE takes the write lock up front, waiting up to the busy timeout. A deferred transaction that
    # reads and then writes fails at once with SQLITE_BUSY when another writer committed in between.
    # A read-only one (the dashboard) reads a WAL snapshot and need not wait for writers.
    options = connection.get_execution_options()
    if options.get("isolation_level") == "AUTOCOMMIT":  # a migration's pragma, obeyed outside a transaction
        return
    read_only = options.get(READ_ONLY, False)
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    # Objects stay readable after commit: callers hand them to reporting once the transaction is done.
    return sessionmaker(engine, expire_on_commit=False)


def ping(session: Session) -> None:
    """A round trip to the database; raises when it does not answer (the health check)."""
    session.execute(text("SELECT 1"))


@contextmanager
def session_scope(engine: Engine | sessionmaker[Session], *, read_only: bool = False) -> Iterator[Session]:
    """One transaction: committed when the block ends, rolled back when it raises.

    `read_only=True` for pages and reports: PostgreSQL refuses writes in it, and on SQLite it reads a
    snapshot instead of queueing behind writers.
    """
    factory = engine if isinstance(engine, sessionmaker) else session_factory(engine)
    options = {READ_ONLY: True, "postgresql_readonly": True} if read_only else {}
    with factory(execution_options=options) as session, session.begin():
        yield session
