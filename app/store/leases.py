"""Claims on deliveries and triage runs: which worker's job has one, and until when the sweep leaves it alone.

`lease_until` is one deadline for both states of an active row: while a job has it, its lease (renewed
while the job works); while its message waits in the queue, how long a wait may last before the message is
taken for lost. None: the row's creation time plus that grace (rows as the intake writes them).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.store.models import Delivery, TriageRun
from app.store.types import utcnow

ACTIVE_RUNS = ("queued", "running")
# A new run's deadline until the job that started it has queued its message (handed_over): a worker that
# dies in between leaves a run with no message, taken back this soon rather than after the long grace.
HANDOVER = timedelta(seconds=60)


def _deadline_passed(table: Any, created: Any, *, now: datetime, grace: timedelta) -> ColumnElement[bool]:
    return or_(table.lease_until < now, and_(table.lease_until.is_(None), created < now - grace))


def claim_delivery(session: Session, *, guid: str, holder: str, lease: timedelta) -> bool:
    """Claim a queued delivery for HOLDER's job; False when it is done or a live job of another has it
    (two messages for one delivery: the second leaves it to the first)."""
    now = utcnow()
    free = or_(Delivery.claimed_by.is_(None), Delivery.claimed_by == holder, Delivery.lease_until < now)
    result = session.execute(update(Delivery).where(Delivery.guid == guid, Delivery.status == "queued", free)
                             .values(claimed_by=holder, lease_until=now + lease))
    return int(getattr(result, "rowcount", 0)) == 1


def release_delivery(session: Session, *, guid: str, holder: str, grace: timedelta) -> None:
    """HOLDER's job failed and scheduled a retry: any worker may take it; the retry's message has GRACE."""
    session.execute(update(Delivery).where(Delivery.guid == guid, Delivery.claimed_by == holder)
                    .values(claimed_by=None, lease_until=utcnow() + grace))


def claim_run(session: Session, *, run_id: int, holder: str, lease: timedelta) -> None:
    """Claim an active run for HOLDER's job (its pull request's lock is held: no one else can have it)."""
    session.execute(update(TriageRun).where(TriageRun.id == run_id, TriageRun.status.in_(ACTIVE_RUNS))
                    .values(claimed_by=holder, lease_until=utcnow() + lease))


def renew(session: Session, *, holder: str, guids: Iterable[str], run_ids: Iterable[int],
          lease: timedelta) -> None:
    """Extend HOLDER's leases on the deliveries and runs its jobs have in hand."""
    until = utcnow() + lease
    if guids := list(guids):
        session.execute(update(Delivery).where(Delivery.guid.in_(guids), Delivery.claimed_by == holder)
                        .values(lease_until=until))
    if run_ids := list(run_ids):
        session.execute(update(TriageRun).where(TriageRun.id.in_(run_ids), TriageRun.claimed_by == holder)
                        .values(lease_until=until))


def handed_over(session: Session, *, run_ids: Iterable[int], grace: timedelta) -> None:
    """The runs' messages are queued: they may wait GRACE (unless a job claimed one meanwhile)."""
    if run_ids := list(run_ids):
        session.execute(update(TriageRun).where(TriageRun.id.in_(run_ids), TriageRun.claimed_by.is_(None))
                        .values(lease_until=utcnow() + grace))


def lapsed_deliveries(session: Session, *, grace: timedelta) -> list[str]:
    """Queued deliveries whose job's lease lapsed, or whose message waited longer than GRACE."""
    lapsed = _deadline_passed(Delivery, Delivery.received_at, now=utcnow(), grace=grace)
    query = select(Delivery.guid).where(Delivery.status == "queued", lapsed).order_by(Delivery.id)
    return list(session.scalars(query))


def requeue_delivery(session: Session, *, guid: str, grace: timedelta) -> bool:
    """Take a lapsed delivery back from its dead job: unclaimed, its new message given GRACE to wait. False
    when it is no longer lapsed (done, claimed again, or another sweep took it first)."""
    now = utcnow()
    lapsed = _deadline_passed(Delivery, Delivery.received_at, now=now, grace=grace)
    query = update(Delivery).where(Delivery.guid == guid, Delivery.status == "queued", lapsed)
    result = session.execute(query.values(claimed_by=None, lease_until=now + grace))
    return int(getattr(result, "rowcount", 0)) == 1


def _run_orphaned(now: datetime, grace: timedelta) -> ColumnElement[bool]:
    """A claimed run (its job holds the PR lock while it has it: the caller tries the lock), a run whose
    message waited longer than GRACE, or a run left `running` by a worker of before the claims."""
    return or_(TriageRun.claimed_by.isnot(None),
               _deadline_passed(TriageRun, TriageRun.created_at, now=now, grace=grace),
               and_(TriageRun.status == "running", TriageRun.lease_until.is_(None)))


def orphan_candidates(session: Session, *, grace: timedelta) -> list[tuple[int, int]]:
    """(run id, pull request id) of active runs that are lost unless a live job holds their PR's lock."""
    query = select(TriageRun.id, TriageRun.pull_request_id).where(
        TriageRun.status.in_(ACTIVE_RUNS), _run_orphaned(utcnow(), grace)).order_by(TriageRun.id)
    return [(run_id, pr_id) for run_id, pr_id in session.execute(query)]


def requeue_run(session: Session, *, run_id: int, grace: timedelta) -> bool:
    """Under the run's PR lock: take it back from its dead job (as requeue_delivery)."""
    now = utcnow()
    query = update(TriageRun).where(TriageRun.id == run_id, TriageRun.status.in_(ACTIVE_RUNS),
                                    _run_orphaned(now, grace))
    result = session.execute(query.values(claimed_by=None, lease_until=now + grace))
    return int(getattr(result, "rowcount", 0)) == 1


def unclaimed_waiting(session: Session, *, older_than: timedelta) -> tuple[dict[str, datetime | None],
                                                                         dict[int, datetime | None]]:
    """Queued deliveries and active runs no job has claimed, older than OLDER_THAN, each with its deadline:
    ({guid: lease_until}, {run id: lease_until}). Their messages should be in the queue."""
    before = utcnow() - older_than
    deliveries = select(Delivery.guid, Delivery.lease_until).where(
        Delivery.status == "queued", Delivery.claimed_by.is_(None), Delivery.received_at < before)
    runs = select(TriageRun.id, TriageRun.lease_until).where(
        TriageRun.status.in_(ACTIVE_RUNS), TriageRun.claimed_by.is_(None), TriageRun.created_at < before)
    return ({guid: until for guid, until in session.execute(deliveries)},
            {run_id: until for run_id, until in session.execute(runs)})


def _unchanged(column: InstrumentedAttribute[datetime | None], seen: datetime | None) -> ColumnElement[bool]:
    return column.is_(None) if seen is None else column == seen


def requeue_unsent_delivery(session: Session, *, guid: str, seen: datetime | None, grace: timedelta) -> bool:
    """Take back an unclaimed delivery whose message is nowhere in the queue, if it is as the sweep saw it
    (SEEN, its deadline then): one sweep of several that saw it wins."""
    query = update(Delivery).where(Delivery.guid == guid, Delivery.status == "queued",
                                   Delivery.claimed_by.is_(None), _unchanged(Delivery.lease_until, seen))
    result = session.execute(query.values(lease_until=utcnow() + grace))
    return int(getattr(result, "rowcount", 0)) == 1


def requeue_unsent_run(session: Session, *, run_id: int, seen: datetime | None, grace: timedelta) -> bool:
    """As requeue_unsent_delivery, for a run."""
    query = update(TriageRun).where(TriageRun.id == run_id, TriageRun.status.in_(ACTIVE_RUNS),
                                    TriageRun.claimed_by.is_(None), _unchanged(TriageRun.lease_until, seen))
    result = session.execute(query.values(lease_until=utcnow() + grace))
    return int(getattr(result, "rowcount", 0)) == 1
