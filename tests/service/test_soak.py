"""Soak: signed deliveries to a real `prtriage serve` (no worker threads) and a separate `prtriage worker` on
Redis and PostgreSQL, the worker killed with SIGKILL every SOAK_KILL_EVERY processed deliveries and started
again. Every delivery must be processed exactly once, every PR get one run and one check run completed
exactly once, and no check run stay `in_progress` longer than two minutes.

It also measures how long the work each killed worker had claimed took to be done by the next one.
SOAK_DELIVERIES (1,000) and SOAK_KILL_EVERY (100) scale it; docs/service.md has a run at 5,000 / 500.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from store.databases import PostgresDatabases

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.service.services import Services
from app.store.leases import ACTIVE_RUNS
from app.store.migrate import upgrade
from app.store.models import Delivery, TriageRun
from app.store.session import session_scope

from .payloads import delivery_headers, encode, pull_request_event, sha
from .processes import Processes
from .test_recovery import WORKER, environment

pytestmark = pytest.mark.slow

DELIVERIES = int(os.environ.get("SOAK_DELIVERIES", "1000"))
KILL_EVERY = int(os.environ.get("SOAK_KILL_EVERY", "100"))
REPO = "soak/widgets"
IN_PROGRESS_LIMIT = 120.0  # seconds: the longest a check run may stay in progress, killed worker or not
SENDERS = 4


@dataclass
class InHand:
    """The deliveries and runs a killed worker had claimed, and when the last of them was done."""

    killed: float
    deliveries: set[str]
    runs: set[int]
    done: float | None = None

    def look(self, services: Services) -> None:
        if self.done is None and not _still_active(services, self.deliveries, self.runs):
            self.done = time.monotonic()


@dataclass
class Watch:
    """What the test saw of the check runs, sampled while it waits."""

    first_seen: dict[int, float] = field(default_factory=dict)
    completed: dict[int, float] = field(default_factory=dict)
    kills: list[float] = field(default_factory=list)
    in_hand: list[InHand] = field(default_factory=list)  # what each killed worker had claimed

    def sample(self, fake: FakeGitHub) -> None:
        now = time.monotonic()
        for run in fake.check_runs(REPO):
            self.first_seen.setdefault(run.id, now)
            if run.status == "completed":
                self.completed.setdefault(run.id, now)

    def longest_in_progress(self) -> float:
        return max((self.completed.get(run_id, time.monotonic()) - seen
                    for run_id, seen in self.first_seen.items()), default=0.0)

    def taken_back(self) -> tuple[int, float]:
        """(deliveries and runs killed workers had in hand, the longest until all of a kill's were done)."""
        held = sum(len(hand.deliveries) + len(hand.runs) for hand in self.in_hand)
        longest = max(((hand.done or time.monotonic()) - hand.killed for hand in self.in_hand
                       if hand.deliveries or hand.runs), default=0.0)
        return held, longest

    def longest_recovery(self) -> float:
        """For each kill, how long until every check run open at that moment was completed."""
        worst = 0.0
        for killed in self.kills:
            open_then = [run_id for run_id, seen in self.first_seen.items()
                         if seen <= killed and self.completed.get(run_id, float("inf")) > killed]
            done = [self.completed.get(run_id, time.monotonic()) - killed for run_id in open_then]
            worst = max([worst, *done])
        return worst


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def soak_database(postgres: PostgresDatabases) -> str:
    url = postgres.create()
    upgrade(url)
    return url


@pytest.fixture
def soak_settings(make_settings: Callable[..., Settings], soak_database: str,
                  redis_queue_url: str) -> Iterator[Settings]:
    yield make_settings(database_url=soak_database, queue_url=redis_queue_url)


def _payloads(fake: FakeGitHub) -> list[tuple[bytes, dict[str, str]]]:
    fake.add_repo(REPO, installation_id=1)
    sent = []
    for number in range(1, DELIVERIES + 1):
        head = sha(f"soak head {number}")
        fake.add_pull(REPO, number, head_sha=head, base_sha=sha("soak base"), files=["README.md"])
        body = encode(pull_request_event(fake, "opened", full_name=REPO, number=number, head_sha=head,
                                         base_sha=sha("soak base")))
        sent.append((body, delivery_headers("pull_request", body, guid=f"soak-{number}")))
    return sent


def _send_all(url: str, payloads: list[tuple[bytes, dict[str, str]]]) -> Counter[int]:
    def send(chunk: list[tuple[bytes, dict[str, str]]]) -> list[int]:
        with httpx.Client(base_url=url, timeout=30) as client:
            return [client.post("/webhooks/github", content=body, headers=headers).status_code
                    for body, headers in chunk]
    with ThreadPoolExecutor(SENDERS) as pool:
        chunks = [payloads[i::SENDERS] for i in range(SENDERS)]
        return Counter(code for codes in pool.map(send, chunks) for code in codes)


def _processed(services: Services) -> int:
    with session_scope(services.sessions, read_only=True) as session:
        query = select(func.count()).select_from(Delivery).where(Delivery.status != "queued")
        return int(session.scalar(query) or 0)


def _serve(workers: Processes, env: dict[str, str]) -> str:
    port = free_port()
    workers.start("serve", [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                  {**env, "PRTRIAGE_WORKERS": "0"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("serve did not become healthy" + workers.report())


def _soak(services: Services, fake: FakeGitHub, workers: Processes, env: dict[str, str],
          watch: Watch) -> Counter[int]:
    """Send every delivery while the worker works, killing and restarting it; the intake's answers."""
    answers = _send_all(_serve(workers, env), _payloads(fake))
    worker_env, generation, next_kill = {**env, "PRTRIAGE_WORKERS": "2"}, 0, KILL_EVERY
    worker = workers.start("worker-0", WORKER, worker_env)
    deadline = time.monotonic() + 300 + DELIVERIES * 0.25
    while time.monotonic() < deadline:
        watch.sample(fake)
        for hand in watch.in_hand:
            hand.look(services)
        processed = _processed(services)
        if processed >= next_kill and next_kill < DELIVERIES:
            worker.send_signal(signal.SIGKILL)
            watch.kills.append(time.monotonic())
            worker.wait(10)
            watch.in_hand.append(InHand(watch.kills[-1], *_claimed_by(services, worker.pid)))
            generation, next_kill = generation + 1, next_kill + KILL_EVERY
            worker = workers.start(f"worker-{generation}", WORKER, worker_env)
        elif processed >= DELIVERIES and _all_completed(fake):
            return answers
        time.sleep(0.2)
    raise AssertionError(f"not done in time: {_processed(services)} processed" + workers.report()[-5000:])


def _claimed_by(services: Services, pid: int) -> tuple[set[str], set[int]]:
    holder = f"{socket.gethostname()[:200]}:{pid}"  # as app.service.lease_keeper.holder_name names the worker
    with session_scope(services.sessions, read_only=True) as session:
        guids = session.scalars(select(Delivery.guid).where(Delivery.claimed_by == holder,
                                                            Delivery.status == "queued"))
        runs = session.scalars(select(TriageRun.id).where(TriageRun.claimed_by == holder,
                                                          TriageRun.status.in_(ACTIVE_RUNS)))
        return set(guids), set(runs)


def _still_active(services: Services, guids: set[str], run_ids: set[int]) -> bool:
    with session_scope(services.sessions, read_only=True) as session:
        queued = session.scalar(select(func.count()).select_from(Delivery).where(
            Delivery.guid.in_(guids), Delivery.status == "queued")) if guids else 0
        active = session.scalar(select(func.count()).select_from(TriageRun).where(
            TriageRun.id.in_(run_ids), TriageRun.status.in_(ACTIVE_RUNS))) if run_ids else 0
        return bool(queued or active)


def _all_completed(fake: FakeGitHub) -> bool:
    runs = fake.check_runs(REPO)
    return len(runs) >= DELIVERIES and all(run.status == "completed" for run in runs)


def test_soak_with_the_worker_killed_every_n_deliveries(soak_settings: Settings, fake_github: FakeGitHub,
                                                       github_app_key: Any, tmp_path: Path) -> None:
    env = environment(soak_settings, github_app_key.private_pem)
    services, workers, watch = Services.from_settings(soak_settings), Processes(tmp_path), Watch()
    started = time.monotonic()
    try:
        answers = _soak(services, fake_github, workers, env, watch)
        _verify(services, fake_github, answers)
        held, longest_taken_back = watch.taken_back()
        figures = {"deliveries": DELIVERIES, "kills": len(watch.kills), "in_hand_at_kills": held,
                   "longest_taken_back_s": round(longest_taken_back, 1),
                   "longest_in_progress_s": round(watch.longest_in_progress(), 1),
                   "longest_recovery_s": round(watch.longest_recovery(), 1),
                   "total_s": round(time.monotonic() - started, 1)}
        print(f"\nsoak: {figures}")
        assert len(watch.kills) == (DELIVERIES - 1) // KILL_EVERY
        assert figures["longest_in_progress_s"] <= IN_PROGRESS_LIMIT, figures
        assert figures["longest_taken_back_s"] <= IN_PROGRESS_LIMIT, figures
    finally:
        workers.kill_all()
        services.close()


def _verify(services: Services, fake: FakeGitHub, answers: Counter[int]) -> None:
    assert answers == Counter({202: DELIVERIES})
    with session_scope(services.sessions, read_only=True) as session:
        statuses = Counter(session.scalars(select(Delivery.status)))
        columns = (TriageRun.pull_request_id, TriageRun.status, TriageRun.conclusion)
        runs = list(session.execute(select(*columns)))
    assert statuses == Counter({"processed": DELIVERIES})
    assert len(runs) == DELIVERIES and len({pr for pr, _, _ in runs}) == DELIVERIES  # one run a PR
    assert Counter((status, conclusion) for _, status, conclusion in runs) == Counter(
        {("completed", "success"): DELIVERIES})
    checks = fake.check_runs(REPO)
    assert len(checks) == DELIVERIES and len({check.head_sha for check in checks}) == DELIVERIES
    assert all((check.status, check.conclusion) == ("completed", "success") for check in checks)
    completions = Counter(int(re.sub(r".*/", "", request.path))
                          for request in fake.calls("PATCH", rf"/repos/{REPO}/check-runs/\d+")
                          if request.body.get("status") == "completed")
    assert completions == Counter({check.id: 1 for check in checks})
