"""Jobs lost with a dead worker, found again. A Redis queue hands a job to one worker and forgets it; if that
worker dies (kill -9, OOM, a lost machine) the job is gone. The database remembers instead (leases.py):

- a delivery whose job's lease lapsed: its worker stopped renewing it;
- a triage run claimed by a job whose pull-request lock nobody holds: the job died (a live job holds the lock
  from before it claims the run until after it stores the result, and the lock dies with its holder);
- an unclaimed delivery or run whose message is nowhere in the queue (neither waiting nor scheduled): a
  worker took it and died before its job claimed the row, or Redis restarted. The caller reads the queue
  first, then the database, so a message taken by a live worker meanwhile shows as claimed; one taken just
  before, not yet claimed, is queued twice, which is harmless (below);
- a delivery or run whose message waited longer than QUEUED_GRACE, when the queue cannot be read.

Each is queued again, at the head of the queue (it already waited), and marked so: unclaimed, its new
message given QUEUED_GRACE to wait, so that a backlog of waiting work is not queued again at every sweep.
The jobs are idempotent (a run already completed, a delivery already processed, is left alone), so a job
queued twice runs once. Every worker sweeps when it starts and every SWEEP_SECONDS (leases.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy.orm import Session

from app.service.lease_keeper import QUEUED_GRACE
from app.service.services import Services
from app.store.leases import (
    handed_over,
    lapsed_deliveries,
    orphan_candidates,
    requeue_delivery,
    requeue_run,
    requeue_unsent_delivery,
    requeue_unsent_run,
    unclaimed_waiting,
)
from app.store.session import session_scope

log = logging.getLogger(__name__)
Key = TypeVar("Key", str, int)

__all__ = ["QUEUED_GRACE", "Lost", "Waiting", "find_lost", "queued"]

# A row this young may be between its commit and its message's push (the intake, a job queueing its runs).
UNSENT_AFTER = timedelta(seconds=15)


@dataclass(frozen=True)
class Lost:
    runs: list[int] = field(default_factory=list)
    deliveries: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Waiting:
    """The deliveries and runs whose messages the queue holds, waiting or scheduled, read before the sweep
    reads the database."""

    deliveries: frozenset[str]
    runs: frozenset[int]


def find_lost(services: Services, *, grace: timedelta = QUEUED_GRACE, waiting: Waiting | None = None) -> Lost:
    """The runs and deliveries whose job no live worker has or will have, each taken back (see above):
    the caller queues them again. WAITING: what the queue holds (None: it could not be read)."""
    with session_scope(services.sessions, read_only=True) as session:
        candidates = orphan_candidates(session, grace=grace)
        guids = lapsed_deliveries(session, grace=grace)
        unsent = unclaimed_waiting(session, older_than=UNSENT_AFTER) if waiting is not None else ({}, {})
    deliveries = [guid for guid in guids if _take_delivery(services, guid, grace)]
    runs = [run_id for run_id, pr_id in candidates if _take_run(services, run_id, pr_id, grace)]
    if waiting is not None:
        def delivery(session: Session, guid: str, seen: datetime | None) -> bool:
            return requeue_unsent_delivery(session, guid=guid, seen=seen, grace=grace)

        def run(session: Session, run_id: int, seen: datetime | None) -> bool:
            return requeue_unsent_run(session, run_id=run_id, seen=seen, grace=grace)

        deliveries += _take_unsent(services, unsent[0], waiting.deliveries, set(deliveries), delivery)
        runs += _take_unsent(services, unsent[1], waiting.runs, set(runs), run)
    if runs or deliveries:
        log.warning("sweep: queueing again %d lost triage run(s) %s and %d lost deliveries", len(runs), runs,
                    len(deliveries))
    return Lost(runs, deliveries)


def _take_unsent(services: Services, rows: Mapping[Key, datetime | None], queued: frozenset[Key],
                 taken: set[Key], take: Callable[[Session, Key, datetime | None], bool]) -> list[Key]:
    """The unclaimed rows whose messages the queue does not hold, each taken back (as the sweep saw it)."""
    lost = []
    for key, seen in rows.items():
        if key in queued or key in taken:
            continue
        with services.writing() as session:
            if take(session, key, seen):
                lost.append(key)
    return lost


def _take_delivery(services: Services, guid: str, grace: timedelta) -> bool:
    with services.writing() as session:
        return requeue_delivery(session, guid=guid, grace=grace)


def _take_run(services: Services, run_id: int, pr_id: int, grace: timedelta) -> bool:
    held = services.locks.try_acquire(pr_id)
    if held is None:
        return False  # a live worker has this pull request
    try:  # under the lock: the run may have finished, or been claimed again, meanwhile
        with services.writing() as session:
            return requeue_run(session, run_id=run_id, grace=grace)
    finally:
        held.release()


def queued(services: Services, run_ids: list[int]) -> None:
    """The new runs' messages are in the queue: from now on they wait with the long grace."""
    if run_ids:
        with services.writing() as session:
            handed_over(session, run_ids=run_ids, grace=QUEUED_GRACE)
