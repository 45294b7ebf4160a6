"""Fixtures of the dashboard tests: seeded databases (SQLite, and PostgreSQL for the API), the dashboard
included in a FastAPI app the way `create_app` includes it, and in-process clients that can claim any client
address (loopback or not) through httpx's ASGI transport.

PostgreSQL is this project's server (TEST_POSTGRES_URL, default 127.0.0.1:5432): unreachable, its cases skip
with the reason, and fail under CI=true.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from store.databases import PostgresDatabases

from app import dashboard
from app.config import Settings
from app.service.services import Services
from app.store.migrate import upgrade
from app.store.session import make_engine, session_scope

from .browser import browser  # noqa: F401 (the fixture of the browser tests)
from .html import Node, parse
from .seed import Seed, seed

TOKEN = "correct horse battery staple"
LOOPBACK = "127.0.0.1"
ELSEWHERE = "203.0.113.7"  # TEST-NET-3: never routed; only ever a claimed client address here


def build_app(database_url: str, data_dir: Path, *, token: str | None = None,
              public_url: str | None = None) -> FastAPI:
    """The dashboard as `create_app` serves it: its router, and Services at app.state."""
    settings = Settings(DATABASE_URL=database_url, DASHBOARD_TOKEN=token, PRTRIAGE_DATA_DIR=str(data_dir),
                        PRTRIAGE_PUBLIC_URL=public_url)
    app = FastAPI(title="prtriage", docs_url=None, redoc_url=None)
    app.state.services = Services.from_settings(settings)
    dashboard.attach(app)
    return app


class Client:
    """A synchronous in-process client: one event loop, httpx's ASGI transport, cookies kept."""

    def __init__(self, app: FastAPI, *, client_host: str = LOOPBACK, base_url: str = f"http://{LOOPBACK}",
                 headers: dict[str, str] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        transport = httpx.ASGITransport(app=app, client=(client_host, 50123))
        self.http = httpx.AsyncClient(transport=transport, base_url=base_url, headers=headers)

    def request(self, method: str, url: str, **options: Any) -> httpx.Response:
        return self.loop.run_until_complete(self.http.request(method, url, **options))

    def get(self, url: str, **options: Any) -> httpx.Response:
        return self.request("GET", url, **options)

    def post(self, url: str, **options: Any) -> httpx.Response:
        return self.request("POST", url, **options)

    def page(self, url: str, status: int = 200) -> Node:
        response = self.get(url)
        assert response.status_code == status, (url, response.status_code, response.text[:500])
        assert response.headers["content-type"].startswith("text/html")
        return parse(response.text)

    def log_in(self, token: str = TOKEN) -> httpx.Response:
        return self.post("/login", data={"token": token, "next": "/"})

    def close(self) -> None:
        self.loop.run_until_complete(self.http.aclose())
        self.loop.close()


def seeded_database(url: str) -> Seed:
    upgrade(url)
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            return seed(session)
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases()
    yield databases
    databases.drop_all()


@pytest.fixture(scope="session")
def seeded_sqlite(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Seed]:
    """One seeded SQLite database for the tests that only read."""
    url = f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'prtriage.db'}"
    return url, seeded_database(url)


@pytest.fixture(scope="session")
def seeded_postgres(postgres: PostgresDatabases) -> tuple[str, Seed]:
    url = postgres.create()
    return url, seeded_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def seeded_any(request: pytest.FixtureRequest) -> tuple[str, Seed]:
    """The read-only seeded database of each backend (the API tests run on both)."""
    fixture = "seeded_sqlite" if request.param == "sqlite" else "seeded_postgres"
    seeded: tuple[str, Seed] = request.getfixturevalue(fixture)
    return seeded


@pytest.fixture
def fresh_sqlite(tmp_path: Path) -> tuple[str, Seed]:
    """A seeded SQLite database of this test's own, for tests that close windows."""
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    return url, seeded_database(url)


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[Callable[..., Client]]:
    """make_client(url, token=None, client_host=LOOPBACK, ...) -> Client; closed after the test."""
    made: list[tuple[Client, FastAPI]] = []

    def make(database_url: str, *, token: str | None = None, public_url: str | None = None,
             **options: Any) -> Client:
        app = build_app(database_url, tmp_path / f"data{len(made)}", token=token, public_url=public_url)
        client = Client(app, **options)
        made.append((client, app))
        return client

    yield make
    for client, app in made:
        client.close()
        app.state.services.close()


@pytest.fixture
def reader(seeded_sqlite: tuple[str, Seed], make_client: Callable[..., Client]) -> Client:
    """A loopback client of an unprotected dashboard on the shared SQLite data."""
    return make_client(seeded_sqlite[0])


@pytest.fixture
def seeded(seeded_sqlite: tuple[str, Seed]) -> Seed:
    return seeded_sqlite[1]
