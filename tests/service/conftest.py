"""Fixtures of the service tests: settings pointing at the fake GitHub, databases on both backends (SQLite and
PostgreSQL), a Redis queue, the miles twin's trees as the fake's tarballs, and the service itself, in
process (TestClient, jobs run on demand) or live (uvicorn on loopback, real consumer threads).

PostgreSQL and Redis are this project's servers (127.0.0.1:5432, 127.0.0.1:6379): unreachable, their tests
skip with the reason, and fail under CI=true.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import uvicorn
from fakegithub.plugin import fake_github, fake_github_factory, github_app_key  # noqa: F401 (fixtures)
from fastapi import FastAPI
from sqlalchemy import select
from store.databases import PostgresDatabases
from twin import build_miles_twin
from twin.cli import MILES_POLICY

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.demo.localgithub.tarballs import build_tarball
from app.processes.task_queue import Queue, make_queue
from app.processes.webapp import create_app
from app.service.services import Services
from app.store.migrate import upgrade
from app.store.models import Delivery, TriageRun
from app.store.session import session_scope
from app.triage.pipeline import REPO_POLICY

from .payloads import SECRET, delivery_headers, encode, sha

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
MILES = "radixark/miles"
FAR_FUTURE = datetime(2999, 1, 1)  # huey's naive UTC: every scheduled job is due
BASE, INCIDENT = sha("miles base"), sha("miles incident head")


def unreachable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: these tests must run)", pytrace=False)
    pytest.skip(reason)


# Databases and queues


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases()
    yield databases
    databases.drop_all()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database, on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    else:
        url = request.getfixturevalue("postgres").create()
    upgrade(url)
    return url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    upgrade(url)
    return url


@pytest.fixture
def redis_queue_url() -> Iterator[str]:
    """QUEUE_URL of a Redis queue of this test's own (its keys are deleted afterwards)."""
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        unreachable(f"Redis unreachable at {REDIS_URL}: {exc}")
    name = f"prtriage_test_{uuid.uuid4().hex[:12]}"
    yield f"{REDIS_URL}?queue={name}"
    for kind in ("redis", "schedule", "results", "counters"):
        client.delete(f"huey.{kind}.{name}")
    client.close()


# Settings and the service


@pytest.fixture
def make_settings(tmp_path: Path, fake_github: FakeGitHub, github_app_key: Any,  # noqa: F811
                  prtriage_cache: Path) -> Callable[..., Settings]:
    def make(*, database_url: str, queue_url: str | None = None, **extra: Any) -> Settings:
        values = {"GITHUB_APP_ID": fake_github.app_id, "GITHUB_PRIVATE_KEY": github_app_key.private_pem,
                  "GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_API_URL": fake_github.url,
                  "DATABASE_URL": database_url,
                  "QUEUE_URL": queue_url or f"sqlite:///{tmp_path / 'queue.db'}",
                  "PRTRIAGE_DATA_DIR": str(tmp_path / "data"), "PRTRIAGE_CACHE_DIR": str(prtriage_cache),
                  **extra}
        return Settings(**values)
    return make


class LiveServer:
    """The app served by uvicorn on a loopback port, in a thread, consumers started by its lifespan."""

    def __init__(self, app: FastAPI) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the live server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        self.socket.close()


@dataclass
class Service:
    """The service in this process, over real HTTP on loopback; its jobs run when a test drains the queue."""

    settings: Settings
    services: Services
    queue: Queue
    app: FastAPI
    live: LiveServer
    http: httpx.Client

    def post(self, event: str, payload: dict[str, Any] | None = None, *, body: bytes | None = None,
             guid: str | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
        raw = body if body is not None else encode(payload or {})
        sent = delivery_headers(event, raw, guid=guid)
        if headers is not None:
            sent = headers
        return self.http.post("/webhooks/github", content=raw, headers=sent)

    def drain(self, limit: int = 200) -> int:
        """Run every queued job, scheduled ones included (their delay skipped), until none is left."""
        huey, ran = self.queue.huey, 0
        while ran < limit:
            task = huey.dequeue()
            if task is None:
                due = huey.read_schedule(FAR_FUTURE)
                if not due:
                    return ran
                for scheduled in due:
                    huey.enqueue(scheduled)
                continue
            huey.execute(task, FAR_FUTURE)
            ran += 1
        raise AssertionError(f"the queue did not empty after {limit} jobs")

    def deliveries(self) -> list[Delivery]:
        with session_scope(self.services.sessions, read_only=True) as session:
            return list(session.scalars(select(Delivery).order_by(Delivery.id)))

    def runs(self) -> list[TriageRun]:
        with session_scope(self.services.sessions, read_only=True) as session:
            return list(session.scalars(select(TriageRun).order_by(TriageRun.id)))


    def close(self) -> None:
        self.http.close()
        self.live.__exit__()
        self.services.close()


def make_service(settings: Settings, *, workers: int = 0, services: Services | None = None) -> Service:
    """The app served on loopback; WORKERS consumer threads run its jobs (0: the test drains the queue)."""
    services = services or Services.from_settings(settings)
    queue = make_queue(services)
    app = create_app(settings, services=services, queue=queue, workers=workers)
    live = LiveServer(app).__enter__()
    return Service(settings, services, queue, app, live, httpx.Client(base_url=live.url, timeout=30))


@pytest.fixture
def service(make_settings: Callable[..., Settings], database_url: str) -> Iterator[Service]:
    """The service on each database backend, with an SQLite queue."""
    built = make_service(make_settings(database_url=database_url))
    yield built
    built.close()


@pytest.fixture
def services(make_settings: Callable[..., Settings], database_url: str) -> Iterator[Services]:
    """The service's machinery on each test database, no web app and no queue consumer."""
    built = Services.from_settings(make_settings(database_url=database_url))
    yield built
    built.close()


@pytest.fixture
def sqlite_service(make_settings: Callable[..., Settings], sqlite_url: str) -> Iterator[Service]:
    built = make_service(make_settings(database_url=sqlite_url))
    yield built
    built.close()


def wait_for(condition: Callable[[], Any], *, timeout: float = 120, what: str = "the condition",
             explain: Callable[[], str] | None = None) -> Any:
    """CONDITION()'s first true value; on timeout an AssertionError naming WHAT, followed by EXPLAIN()."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}" + (explain() if explain else ""))


# The miles twin on the fake GitHub


@pytest.fixture(scope="session")
def twin_trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The twin's base and incident head trees, built once."""
    root = tmp_path_factory.mktemp("service-twin")
    return {"base": build_miles_twin(root / "base"), "incident": build_miles_twin(root / "incident",
                                                                                  variant="incident")}


@pytest.fixture(scope="session")
def twin_tarballs(twin_trees: dict[str, Path]) -> dict[str, bytes]:
    owner, name = MILES.split("/")
    return {BASE: build_tarball(owner, name, BASE, twin_trees["base"]),
            INCIDENT: build_tarball(owner, name, INCIDENT, twin_trees["incident"])}


def serve_twin_policy(fake: FakeGitHub, ref: str) -> None:
    """The twin's own policy as the repository's `.github/pr-triage.yml` at REF (the policy is read at the
    base sha): the twin is written for tests/twin/policy.yml, not for the real miles' built-in policy."""
    fake.set_file(MILES, ref, REPO_POLICY, MILES_POLICY.read_text())


@pytest.fixture
def miles(fake_github: FakeGitHub, twin_tarballs: dict[str, bytes]) -> FakeGitHub:  # noqa: F811
    """The fake with radixark/miles (installation 1) serving the twin's base and incident head, and the
    twin's policy at both."""
    fake_github.add_repo(MILES, installation_id=1)
    for ref, data in twin_tarballs.items():
        fake_github.set_tarball(MILES, ref, data)
        serve_twin_policy(fake_github, ref)
    return fake_github
