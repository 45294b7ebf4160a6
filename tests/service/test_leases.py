"""Leases: a job's claim on its delivery or run, and the sweep that takes back the work of dead workers
without queueing a waiting backlog again and again (app/service/lease_keeper.py,
app/processes/recovery.py)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from app.demo.localgithub import FakeGitHub
from app.processes import recovery
from app.processes.task_queue import enqueue_first, requeue_lost, waiting_messages
from app.service.lease_keeper import LEASE, Leases
from app.store.leases import claim_delivery, claim_run
from app.store.models import Delivery, TriageRun
from app.store.types import utcnow
from app.triage.pipeline import process_delivery

from .conftest import Service
from .payloads import pull_request_event, sha

REPO = "octo/leased"
DEAD = "gone-host:4242"  # the holder name of a worker that was killed


def _deliver(service: Service, fake: FakeGitHub, number: int) -> str:
    head = sha(f"head {number}")
    fake.add_pull(REPO, number, head_sha=head, base_sha=sha("base"), files=["README.md"])
    payload = pull_request_event(fake, "opened", full_name=REPO, number=number, head_sha=head,
                                 base_sha=sha("base"))
    guid = f"guid-{number}"
    assert service.post("pull_request", payload, guid=guid).status_code == 202
    return guid


def _received(service: Service, guid: str, ago: timedelta) -> None:
    with service.services.writing() as session:
        session.execute(update(Delivery).where(Delivery.guid == guid).values(received_at=utcnow() - ago))


def _created(service: Service, ago: timedelta) -> None:
    with service.services.writing() as session:
        session.execute(update(TriageRun).values(created_at=utcnow() - ago))


def _run_without_its_triage(service: Service, fake: FakeGitHub) -> int:
    """A delivered PR's run, its delivery processed here and its triage message not sent."""
    fake.add_repo(REPO, installation_id=1)
    _deliver(service, fake, 1)
    service.queue.huey.dequeue()  # the delivery's message
    [run_id] = process_delivery(service.services, "guid-1")
    return run_id


def _drop_queued(service: Service) -> None:
    """The queue loses every message (a Redis restarted without its file)."""
    service.queue.huey.flush()


def test_a_delivery_whose_job_died_is_taken_back_once_its_lease_lapses_not_after_the_grace(
        service: Service, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    guid = _deliver(service, fake_github, 1)
    _drop_queued(service)  # the dead worker had taken the message
    with service.services.writing() as session:
        assert claim_delivery(session, guid=guid, holder=DEAD, lease=timedelta(seconds=-1))  # lapsed
    requeue_lost(service.services, service.queue)
    assert recovery.find_lost(service.services).deliveries == []  # taken once, not at every sweep
    service.drain()
    [delivery] = service.deliveries()
    [check] = fake_github.check_runs(REPO)
    assert (delivery.status, check.conclusion) == ("processed", "success")


def test_a_live_claim_is_left_alone_and_a_second_message_does_not_run_it_twice(
        service: Service, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    guid = _deliver(service, fake_github, 1)
    with service.services.writing() as session:
        assert claim_delivery(session, guid=guid, holder="live-host:1", lease=LEASE)
    assert recovery.find_lost(service.services).deliveries == []
    service.drain()  # its message, while the live job has it
    [delivery] = service.deliveries()
    assert delivery.status == "queued" and fake_github.check_runs(REPO) == []


def test_a_waiting_backlog_is_not_queued_again_at_every_sweep(service: Service,
                                                              fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    waiting, lost = _deliver(service, fake_github, 1), _deliver(service, fake_github, 2)
    _received(service, lost, timedelta(minutes=11))  # older than the grace: its message was lost
    assert recovery.find_lost(service.services).deliveries == [lost]
    assert recovery.find_lost(service.services).deliveries == []  # queued again once, then it waits
    assert waiting not in recovery.find_lost(service.services).deliveries


def test_a_claimed_run_whose_pull_request_lock_is_free_is_taken_back_and_triaged(
        service: Service, fake_github: FakeGitHub) -> None:
    run_id = _run_without_its_triage(service, fake_github)
    queue = service.queue
    [run] = service.runs()
    held = service.services.locks.try_acquire(run.pull_request_id)
    assert held is not None
    with service.services.writing() as session:
        claim_run(session, run_id=run_id, holder=DEAD, lease=LEASE)
    assert recovery.find_lost(service.services).runs == []  # its lock is held: a live job
    held.release()  # the holder died
    requeue_lost(service.services, queue)
    assert recovery.find_lost(service.services).runs == []  # taken back once
    service.drain()
    [run] = service.runs()
    [check] = fake_github.check_runs(REPO)
    assert (run.status, check.status, check.conclusion) == ("completed", "completed", "success")


def test_work_taken_back_goes_to_the_head_of_the_queue(service: Service) -> None:
    queue = service.queue
    queue.deliver("waiting-1")
    queue.deliver("waiting-2")
    enqueue_first(queue.huey, queue.deliver.s("taken-back"))
    assert queue.huey.dequeue().args == ("taken-back",)


def test_the_leases_of_jobs_in_hand_are_renewed(service: Service, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    guid = _deliver(service, fake_github, 1)
    leases = Leases("this-host:1")
    with leases.delivery(service.services.writing, guid) as claimed:
        assert claimed
        with service.services.writing() as session:  # as if the lease were about to lapse
            session.execute(update(Delivery).values(lease_until=utcnow() - timedelta(seconds=1)))
        leases.renew(service.services.writing)
        assert recovery.find_lost(service.services).deliveries == []
    [delivery] = service.deliveries()
    assert delivery.claimed_by == "this-host:1" and delivery.lease_until is not None


def test_a_message_taken_by_a_worker_that_died_before_claiming_is_queued_again_at_the_next_sweep(
        service: Service, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    guid = _deliver(service, fake_github, 1)
    huey = service.queue.huey
    requeue_lost(service.services, service.queue)
    assert huey.pending_count() == 1  # its message waits: left alone
    assert huey.dequeue().args == (guid,)  # a worker takes it and is killed before its job claims the row
    requeue_lost(service.services, service.queue)
    assert huey.pending_count() == 0  # too young: it may be between the intake's commit and its message
    _received(service, guid, timedelta(seconds=20))  # still far from the ten minutes' grace
    requeue_lost(service.services, service.queue)
    assert [task.args for task in huey.pending()] == [(guid,)]
    requeue_lost(service.services, service.queue)
    assert huey.pending_count() == 1  # queued again once
    service.drain()
    [delivery] = service.deliveries()
    [check] = fake_github.check_runs(REPO)
    assert (delivery.status, check.status, check.conclusion) == ("processed", "completed", "success")


def test_a_run_whose_message_was_taken_by_a_worker_that_died_is_queued_again(
        service: Service, fake_github: FakeGitHub) -> None:
    run_id = _run_without_its_triage(service, fake_github)
    queue = service.queue
    recovery.queued(service.services, [run_id])  # its message was queued ... and taken by a dying worker
    _created(service, timedelta(seconds=20))
    assert waiting_messages(queue) == recovery.Waiting(frozenset(), frozenset())
    requeue_lost(service.services, queue)
    assert [(task.name, task.args) for task in queue.huey.pending()] == [("triage", (run_id,))]
    requeue_lost(service.services, queue)
    assert queue.huey.pending_count() == 1  # its message waits again: left alone
    service.drain()
    [run] = service.runs()
    assert run.status == "completed" and len(fake_github.check_runs(REPO)) == 1


def test_the_sweep_reads_what_the_queue_holds_waiting_and_scheduled(service: Service) -> None:
    queue = service.queue
    queue.deliver("waiting")
    queue.deliver.schedule(("retried", 2), delay=60)
    queue.triage(7)
    queue.close_check(1, "octo", "repo", 9, "reason", 0)
    assert waiting_messages(queue) == recovery.Waiting(frozenset({"waiting", "retried"}), frozenset({7}))
    assert waiting_messages(queue, limit=3) is None  # too long to read at every sweep: the grace decides
