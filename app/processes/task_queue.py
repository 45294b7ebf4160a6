"""The task queue: a Huey instance from the settings (SqliteHuey in PRTRIAGE_DATA_DIR by default, RedisHuey
when QUEUE_URL is redis://…), the task definitions, which only call the pipeline, and the consumer that runs
them in threads of `serve` or of `prtriage worker`.

A queue message carries only an id (a delivery's GUID, a run's id): the database holds the job itself, so a
lost message is found again by the sweep (recovery.py) and a duplicated one does nothing twice.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from huey import Huey, RedisHuey, SqliteHuey
from huey.api import Task, TaskWrapper
from huey.consumer import Consumer
from huey.storage import PriorityRedisStorage, RedisStorage
from redis import ConnectionPool

from app.config import ConfigError, Settings
from app.processes import recovery
from app.service.lease_keeper import Keeper
from app.service.services import Services
from app.trees import cachedir
from app.triage import main_health, pipeline, resync

log = logging.getLogger(__name__)

QUEUE_NAME = "prtriage"
DELIVERY_ATTEMPTS = 5  # a delivery's job is tried this many times (GitHub down, intake not committed yet)
BUSY_RETRY_SECONDS = 3.0  # another worker has the PR: look again this much later
CLOSE_CHECK_DELAYS = (60.0, 300.0, 1800.0)  # a check run GitHub would not let us complete: try again then
REDIS_CONNECT_TIMEOUT = 2.0  # an unreachable queue is a 503 within this, not a hung intake
REDIS_SOCKET_TIMEOUT = 10.0  # above the consumer's blocking-read timeout (1 s)
POLL_MAX_DELAY = 0.5  # SQLite queue: the longest a waiting job waits for an idle worker to look again
# An embedded consumer's wait for a quiet intake, per job. A job holds the interpreter's lock for tens of
# milliseconds, a pause for every delivery in flight: one job inside a burst is the burst's p99 (2 s let one
# run inside a 3 s burst of 2,000 deliveries: p99 79-98 ms; 6 s: 40-48 ms). Under a longer flood a job still
# runs every 6 s: jobs are delayed, never starved.
YIELD_STEP, YIELD_LONGEST = 0.02, 6.0
# The sweep reads every waiting message to find those a dead worker took (recovery.py): a few ms per
# thousand; beyond this backlog it relies on QUEUED_GRACE alone.
WAITING_SCAN_LIMIT = 50_000
CACHE_PRUNE_SECONDS = 3600  # between prunes of the cache; it grows by a few trees an hour


def _queue_name(url: str) -> tuple[str, str]:
    """(URL without our `queue=` parameter, the queue's name): deployments can share one Redis."""
    base, _, query = url.partition("?")  # not urlsplit: it would fold sqlite:////abs into sqlite://abs
    pairs = parse_qsl(query, keep_blank_values=True)
    names = [value for key, value in pairs if key == "queue"]
    rest = urlencode([(key, value) for key, value in pairs if key != "queue"])
    return base + (f"?{rest}" if rest else ""), (names[-1] if names else QUEUE_NAME)


def make_huey(settings: Settings) -> Huey:
    url, name = _queue_name(settings.effective_queue_url)
    scheme = urlsplit(url).scheme
    if scheme in ("redis", "rediss", "unix"):
        pool = ConnectionPool.from_url(url, socket_connect_timeout=REDIS_CONNECT_TIMEOUT,
                                       socket_timeout=REDIS_SOCKET_TIMEOUT)
        return RedisHuey(name, connection_pool=pool, results=False, utc=True)
    if scheme == "sqlite" and url.startswith("sqlite:///"):
        path = settings.data_dir.joinpath(url.removeprefix("sqlite:///"))  # an absolute path stays as it is
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteHuey(name, filename=str(path), results=False, utc=True, timeout=15)
    raise ConfigError(f"QUEUE_URL: unsupported scheme {scheme!r} (use redis://, rediss://, unix:// or "
                      "sqlite:///PATH)")


class Queue:
    """The Huey instance and the service's tasks on it. Each task is a method of its own, run with the
    SERVICES of whichever process consumes it; the attributes are Huey's task wrappers, to call (queue a
    message), `.schedule` or `.s`. Registered by name: a message names `app.processes.task_queue.<name>`,
    the same in every process."""

    def __init__(self, huey: Huey, services: Services) -> None:
        self.huey, self.services = huey, services
        self._count = services.metrics.jobs.inc
        self.deliver: TaskWrapper = huey.task(name="delivery")(self.run_delivery)
        self.triage: TaskWrapper = huey.task(name="triage")(self.run_triage)
        self.close_check: TaskWrapper = huey.task(name="close_check")(self.run_close_check)
        self.resync: TaskWrapper = huey.periodic_task(every(services.settings.resync_seconds),
                                                      name="resync")(self.run_resync)
        self.prune_cache: TaskWrapper = huey.periodic_task(every(CACHE_PRUNE_SECONDS),
                                                           name="prune_cache")(self.run_prune_cache)
        self.main_health: TaskWrapper = huey.task(name="main_health")(self.run_main_health)
        self.main_healths: TaskWrapper = huey.periodic_task(every(services.settings.main_health_seconds),
                                                            name="main_healths")(self.run_main_healths)

    def enqueue_delivery(self, guid: str) -> None:
        """Queue the delivery's job; raises when the queue cannot take it (the intake answers 503)."""
        self.deliver(guid)

    def depth(self) -> tuple[int | None, int | None]:
        """(waiting, scheduled) jobs; None when the queue cannot be read."""
        try:
            return int(self.huey.pending_count()), int(self.huey.scheduled_count())
        except Exception:
            return None, None

    def run_delivery(self, guid: str, attempt: int = 1) -> None:
        """The delivery's job, tried again later (DELIVERY_ATTEMPTS in all); then the runs it started."""
        try:
            run_ids = pipeline.process_delivery(self.services, guid, final=attempt >= DELIVERY_ATTEMPTS)
        except Exception as exc:
            if attempt >= DELIVERY_ATTEMPTS:
                log.warning("delivery %s: given up after %d attempts (%s)", guid, attempt, type(exc).__name__)
                self._count(task="delivery", outcome="given_up")
                return
            self._count(task="delivery", outcome="retried")
            self.deliver.schedule((guid, attempt + 1), delay=2.0 ** attempt)
            return
        self._count(task="delivery", outcome="done")
        for run_id in run_ids:
            self.triage(run_id)
        recovery.queued(self.services, run_ids)

    def run_triage(self, run_id: int) -> None:
        """The run's triage; again shortly when another worker has its PR, and a check run GitHub would not
        let it complete is closed later."""
        try:
            pipeline.triage_run(self.services, run_id)
        except pipeline.PullRequestBusy:
            self._count(task="triage", outcome="busy")
            self.triage.schedule((run_id,), delay=BUSY_RETRY_SECONDS)
            return
        except pipeline.CheckNotClosed as unclosed:
            self._count(task="triage", outcome="check_not_closed")
            self.close_check.schedule(_close_args(unclosed, 0), delay=CLOSE_CHECK_DELAYS[0])
            return
        self._count(task="triage", outcome="done")

    def run_close_check(self, installation_id: int, owner: str, repo: str, check_run_id: int, reason: str,
                        attempt: int) -> None:
        try:
            pipeline.close_check_run(self.services, installation_id=installation_id, owner=owner, repo=repo,
                                     check_run_id=check_run_id, reason=reason)
        except Exception as exc:
            if attempt + 1 >= len(CLOSE_CHECK_DELAYS):
                log.error("check run %d of %s/%s stays open: %s", check_run_id, owner, repo, exc)
                self._count(task="close_check", outcome="given_up")
                return
            self._count(task="close_check", outcome="retried")
            self.close_check.schedule((installation_id, owner, repo, check_run_id, reason, attempt + 1),
                                      delay=CLOSE_CHECK_DELAYS[attempt + 1])
            return
        self._count(task="close_check", outcome="done")

    def run_resync(self) -> None:
        outcome = resync.resync(self.services)
        self._count(task="resync", outcome="done" if not outcome.failed else "partial")

    def run_main_healths(self) -> None:
        """One job per installed repository: a slow or failing repository delays no other."""
        for repository_id in main_health.repositories_to_check(self.services):
            self.main_health(repository_id)
        self._count(task="main_healths", outcome="done")

    def run_main_health(self, repository_id: int) -> None:
        try:
            main_health.check_repository(self.services, repository_id)
        except Exception as exc:  # the next period tries again
            log.warning("main health of repository %d: %s", repository_id, pipeline.describe(exc))
            self._count(task="main_health", outcome="failed")
            return
        self._count(task="main_health", outcome="done")

    def run_prune_cache(self) -> None:
        prune_cache(self.services.settings)
        self._count(task="prune_cache", outcome="done")


def make_queue(services: Services, huey: Huey | None = None) -> Queue:
    """The queue and its tasks; the tasks run with SERVICES (in whichever process consumes them)."""
    return Queue(huey if huey is not None else make_huey(services.settings), services)


def every(seconds: int) -> Callable[[datetime], bool]:
    """A periodic task's schedule: every SECONDS, in whole minutes (Huey looks at its periodic tasks once
    a minute), counted from the epoch so that every process agrees on which minutes."""
    minutes = max(seconds // 60, 1)
    return lambda moment: int(moment.replace(tzinfo=UTC).timestamp() // 60) % minutes == 0


def _close_args(unclosed: pipeline.CheckNotClosed, attempt: int) -> tuple[Any, ...]:
    return (unclosed.installation_id, unclosed.owner, unclosed.repo, unclosed.check_run_id, unclosed.reason,
            attempt)


def prune_cache(settings: Settings) -> cachedir.PruneReport:
    """The cache of the process that runs this, down to PRTRIAGE_CACHE_MAX_SIZE (least recently used first,
    never what a job used in the last hour). A periodic task rather than a step of each triage: no job waits
    for a walk of the cache, and captures and CLI runs sharing the directory are counted too."""
    report = cachedir.prune(settings.cache_dir, settings.cache_max_size)
    if report.removed or report.leftovers or report.after_bytes > report.max_bytes:
        log.info("cache pruned: %s", report.summary().replace("\n", "; "))
    return report


def requeue_lost(services: Services, queue: Queue) -> None:
    """Queue again, at the head of the queue, the work of workers that died (recovery.py)."""
    lost = recovery.find_lost(services, waiting=waiting_messages(queue))
    for guid in lost.deliveries:
        enqueue_first(queue.huey, queue.deliver.s(guid))
    for run_id in lost.runs:
        enqueue_first(queue.huey, queue.triage.s(run_id))


def waiting_messages(queue: Queue, *, limit: int = WAITING_SCAN_LIMIT) -> recovery.Waiting | None:
    """The deliveries and runs whose messages wait in the queue or its schedule; None when it cannot be
    read or holds more than LIMIT messages (the sweep then falls back to QUEUED_GRACE)."""
    huey = queue.huey
    try:
        if huey.pending_count() + huey.scheduled_count() > limit:
            return None
        tasks = [*huey.pending(), *huey.scheduled()]
    except Exception:
        log.warning("sweep: could not read the queue", exc_info=True)
        return None
    deliveries = frozenset(str(task.args[0]) for task in tasks if task.name == queue.deliver.name)
    runs = frozenset(int(task.args[0]) for task in tasks if task.name == queue.triage.name)
    return recovery.Waiting(deliveries, runs)


def enqueue_first(huey: Huey, task: Task) -> None:
    """TASK at the head of the queue: work taken back from a dead worker already waited its turn, and its
    check run may be `in_progress` on GitHub meanwhile."""
    storage, data = huey.storage, huey.serialize_task(task)
    if isinstance(storage, RedisStorage) and not isinstance(storage, PriorityRedisStorage):
        storage.conn.rpush(storage.queue_key, data)  # the consumers pop from this end (BRPOP)
    else:
        storage.enqueue(data, 1)  # SQLite: the highest priority is dequeued first


class EmbeddedConsumer(Consumer):  # type: ignore[misc]
    """Huey's consumer without its signal handlers: the process that embeds it (uvicorn in `serve`, the
    worker command) owns SIGTERM/SIGINT and stops it gracefully, letting the job in hand finish. It carries
    the keeper of its process's leases, which also sweeps for lost work."""

    keeper: Keeper | None = None

    def _set_signal_handlers(self) -> None:
        pass


def start_consumer(services: Services, queue: Queue, *, workers: int, niceness: int = 0,
                   intake_busy: Callable[[], bool] | None = None) -> EmbeddedConsumer:
    """Consumer threads (and the scheduler of delayed and periodic jobs), started after a sweep that finds
    the jobs of workers that died, and the keeper of leases (which sweeps again every SWEEP_SECONDS).

    For consumers that share a process with the intake (`serve`): NICENESS > 0 lowers their scheduling
    priority (and their sandboxes'), and while INTAKE_BUSY() says deliveries are arriving, a consumer waits
    before its next job (at most YIELD_LONGEST): a job shares the interpreter's lock with the intake.
    """
    requeue_lost(services, queue)
    if niceness:
        queue.huey.on_startup(name="prtriage-niceness")(lambda: _lower_priority(niceness))
    if intake_busy is not None:
        queue.huey.pre_execute(name="prtriage-yield")(lambda task: yield_to(intake_busy))
    consumer = EmbeddedConsumer(queue.huey, workers=workers, worker_type="thread", periodic=True,
                                initial_delay=0.05, max_delay=POLL_MAX_DELAY, check_worker_health=False)
    consumer.start()
    consumer.keeper = Keeper(lambda: services.leases.renew(services.writing),
                             lambda: requeue_lost(services, queue)).start()
    return consumer


def yield_to(busy: Callable[[], bool], *, step: float = YIELD_STEP, longest: float = YIELD_LONGEST) -> float:
    """Wait while BUSY() (at most LONGEST seconds); the seconds waited."""
    waited = 0.0
    while waited < longest and busy():
        time.sleep(step)
        waited += step
    return waited


def _lower_priority(niceness: int) -> None:
    """Lower this thread's priority (Linux schedules each thread; the sandboxes it starts inherit it)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except OSError as exc:
        log.warning("could not lower the worker thread's priority: %s", exc)


def stop_consumer(consumer: EmbeddedConsumer) -> None:
    """Stop taking jobs and wait for the jobs in hand to finish (their leases renewed meanwhile)."""
    consumer.stop(graceful=True)
    if consumer.keeper is not None:
        consumer.keeper.stop()
