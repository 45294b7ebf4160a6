"""One worker per pull request at a time: locks that the operating system or the database releases by
themselves when their holder dies, so that a worker killed mid-job never leaves a pull request locked.

PostgreSQL: a session-level advisory lock on a connection held for the job (the server drops it with the
connection). SQLite (one machine by nature): `flock` on a file per pull request (the kernel drops it with
the process). Holding the lock is also how the sweep tells a live job from a dead one (recovery.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from pathlib import Path
from typing import Protocol

from sqlalchemy import Connection, Engine, text

log = logging.getLogger(__name__)


class HeldLock(Protocol):
    def release(self) -> None: ...


class PullRequestLocks(Protocol):
    def try_acquire(self, pr_id: int) -> HeldLock | None:
        """The lock of pull request PR_ID (its database id), or None at once when another holds it."""
        ...


class _FileLock:
    def __init__(self, descriptor: int) -> None:
        self._descriptor: int | None = descriptor

    def release(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing the description drops the flock
            self._descriptor = None


class FileLocks:
    """flock(2) locks in DIRECTORY; they exclude each other across threads and processes of one machine
    (each acquisition opens its own file description)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def try_acquire(self, pr_id: int) -> HeldLock | None:
        self.directory.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.directory / f"pr-{int(pr_id)}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return None
        return _FileLock(descriptor)


def advisory_key(pr_id: int) -> int:
    """A signed 64-bit advisory-lock key for the pull request, apart from other users of advisory locks."""
    digest = hashlib.blake2b(f"prtriage:pull-request:{int(pr_id)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _AdvisoryLock:
    def __init__(self, connection: Connection, key: int) -> None:
        self._connection: Connection | None = connection
        self._key = key

    def release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
        except Exception:
            # a connection that may still hold the lock must never go back to the pool
            log.warning("advisory unlock failed; dropping the connection", exc_info=True)
            connection.invalidate()
        finally:
            connection.close()


class AdvisoryLocks:
    """PostgreSQL session-level advisory locks, one pooled connection held per lock."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def try_acquire(self, pr_id: int) -> HeldLock | None:
        key = advisory_key(pr_id)
        connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            taken = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar()
        except BaseException:
            connection.close()
            raise
        if not taken:
            connection.close()
            return None
        return _AdvisoryLock(connection, key)


def locks_for(engine: Engine, data_dir: Path) -> PullRequestLocks:
    if engine.dialect.name == "postgresql":
        return AdvisoryLocks(engine)
    return FileLocks(data_dir / "locks")
