"""What this process's jobs have in hand, claimed in the database and kept claimed while they work.

A job claims its delivery or run when it starts (a lease of LEASE); a keeper thread of each consumer process
renews the leases every RENEW_SECONDS and sweeps for lost work every SWEEP_SECONDS (recovery.py). A worker
that dies stops renewing: its delivery's lease lapses within LEASE and the next sweep queues it again; its
run's claim is judged by the pull-request lock, which dies with it (locks.py), so the next sweep takes it.
The sweep runs in this thread rather than as a queue job: behind a backlog of thousands of deliveries a
queued sweep would wait for all of them.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import TypeVar

from sqlalchemy.orm import Session

from app.store.leases import claim_delivery, claim_run, release_delivery, renew

log = logging.getLogger(__name__)

LEASE = timedelta(seconds=60)
RENEW_SECONDS = 15.0  # four renewals a lease: a slow database round trip does not let a live lease lapse
SWEEP_SECONDS = 30.0
# Longer than a queue backlog should ever last: a message this old is lost, not waiting.
QUEUED_GRACE = timedelta(minutes=10)

Key = TypeVar("Key", str, int)
Writing = Callable[[], AbstractContextManager[Session]]  # Services.writing: a write transaction


def holder_name() -> str:
    """This process, as its claims name it (operators read it: host and pid)."""
    return f"{socket.gethostname()[:200]}:{os.getpid()}"


class Leases:
    """The deliveries and runs this process's jobs have in hand."""

    def __init__(self, holder: str | None = None) -> None:
        self.holder = holder or holder_name()
        self._guard = threading.Lock()
        self._deliveries: dict[str, int] = {}  # guid -> jobs holding it in this process
        self._runs: dict[int, int] = {}

    @contextmanager
    def delivery(self, writing: Writing, guid: str) -> Iterator[bool]:
        """Claim the delivery while the block runs: True, or False when it is done or another job has it."""
        with writing() as session:
            claimed = claim_delivery(session, guid=guid, holder=self.holder, lease=LEASE)
        if not claimed:
            yield False
            return
        try:
            with self._holding(self._deliveries, guid):
                yield True
        except Exception:  # its retry, scheduled by the queue, may run on any worker at once
            with writing() as session:
                release_delivery(session, guid=guid, holder=self.holder, grace=QUEUED_GRACE)
            raise

    @contextmanager
    def run(self, writing: Writing, run_id: int) -> Iterator[None]:
        """Claim the run (its pull request's lock held) while the block runs."""
        with writing() as session:
            claim_run(session, run_id=run_id, holder=self.holder, lease=LEASE)
        with self._holding(self._runs, run_id):
            yield

    def renew(self, writing: Writing) -> None:
        with self._guard:
            guids, run_ids = list(self._deliveries), list(self._runs)
        if guids or run_ids:
            with writing() as session:
                renew(session, holder=self.holder, guids=guids, run_ids=run_ids, lease=LEASE)

    @contextmanager
    def _holding(self, held: dict[Key, int], key: Key) -> Iterator[None]:
        # Not released in the database when the job ends: a finished row is no longer active, and one
        # left active (its database write failed) is then taken over by the sweep once the lease lapses.
        with self._guard:
            held[key] = held.get(key, 0) + 1
        try:
            yield
        finally:
            with self._guard:
                held[key] -= 1
                if not held[key]:
                    del held[key]


class Keeper:
    """A thread that renews this process's leases and sweeps for lost work until stopped."""

    def __init__(self, renew_leases: Callable[[], None], sweep: Callable[[], None], *,
                 renew_seconds: float = RENEW_SECONDS, sweep_seconds: float = SWEEP_SECONDS) -> None:
        self._renew, self._sweep = renew_leases, sweep
        self._renew_seconds, self._sweep_seconds = renew_seconds, sweep_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="prtriage-keeper", daemon=True)

    def start(self) -> Keeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        since_sweep = 0.0
        while not self._stop.wait(self._renew_seconds):
            self._guarded(self._renew, "renewing the leases")
            since_sweep += self._renew_seconds
            if since_sweep >= self._sweep_seconds:
                since_sweep = 0.0
                self._guarded(self._sweep, "sweeping for lost work")

    @staticmethod
    def _guarded(step: Callable[[], None], what: str) -> None:
        try:
            step()
        except Exception:  # a database blip: the next round tries again
            log.warning("%s failed", what, exc_info=True)
