"""Jobs lost with a dead worker, found again. A Redis queue hands a job to one worker and forgets it; if that
worker dies (kill -9, OOM, a lost machine) the job is gone. The database remembers instead:

- a triage run `running` whose pull-request lock nobody holds was being run by a worker that died (a live
  job holds the lock from before it marks the run running until after it stores the result, and the lock
  dies with its holder: locks.py);
- a run still `queued`, or a delivery still `queued`, long after it was made lost its queue message.

Each is queued again; the jobs are idempotent (a run already completed, a delivery already processed, is
left alone), so a job queued twice runs once. Every worker sweeps when it starts and once a minute.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.services import Services
from app.store.models import Delivery, TriageRun
from app.store.session import session_scope
from app.store.types import utcnow

log = logging.getLogger(__name__)

# Longer than a queue backlog should ever last: a message this old is lost, not waiting.
QUEUED_GRACE = timedelta(minutes=10)


@dataclass(frozen=True)
class Lost:
    runs: list[int] = field(default_factory=list)
    deliveries: list[str] = field(default_factory=list)


# Store adapter: the two reads the sweep needs (candidates for app/store/runs.py and deliveries.py).


def active_runs(session: Session, *, queued_before: datetime) -> list[tuple[int, int]]:
    """(run id, pull request id) of runs `running`, or `queued` since before QUEUED_BEFORE."""
    query = select(TriageRun.id, TriageRun.pull_request_id).where(or_(
        TriageRun.status == "running",
        (TriageRun.status == "queued") & (TriageRun.created_at < queued_before))).order_by(TriageRun.id)
    return [(run_id, pr_id) for run_id, pr_id in session.execute(query)]


def queued_deliveries(session: Session, *, received_before: datetime) -> list[str]:
    query = select(Delivery.guid).where(Delivery.status == "queued", Delivery.received_at < received_before)
    return list(session.scalars(query.order_by(Delivery.id)))


def _still_active(services: Services, run_id: int) -> bool:
    with session_scope(services.sessions, read_only=True) as session:
        run = session.get(TriageRun, run_id)
        return run is not None and run.status in ("queued", "running")


def find_lost(services: Services, *, grace: timedelta = QUEUED_GRACE) -> Lost:
    """The runs and deliveries whose job no live worker has or will have."""
    before = utcnow() - grace
    with session_scope(services.sessions, read_only=True) as session:
        candidates = active_runs(session, queued_before=before)
        deliveries = queued_deliveries(session, received_before=before)
    runs = []
    for run_id, pr_id in candidates:
        held = services.locks.try_acquire(pr_id)
        if held is None:
            continue  # a live worker has this pull request
        try:
            if _still_active(services, run_id):  # read under the lock: it may have finished meanwhile
                runs.append(run_id)
        finally:
            held.release()
    if runs or deliveries:
        log.warning("sweep: queueing again %d lost triage run(s) %s and %d lost deliveries", len(runs), runs,
                    len(deliveries))
    return Lost(runs, deliveries)
