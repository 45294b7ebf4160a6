"""What one process of the service works with, built once from the settings: database, pull-request
locks, the GitHub App, metrics and the cache. Jobs and routes receive it; nothing reads the environment
after start-up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.github import GitHubApp, GitHubClient
from app.service.lease_keeper import Leases
from app.service.locks import PullRequestLocks, locks_for
from app.service.prometheus import ServiceMetrics
from app.store.session import make_engine, session_factory, session_scope


@dataclass
class Services:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    locks: PullRequestLocks
    metrics: ServiceMetrics = field(default_factory=ServiceMetrics)
    leases: Leases = field(default_factory=Leases)  # what this process's jobs have in hand
    github_app: GitHubApp | None = None
    writers: AbstractContextManager[object] = field(default_factory=nullcontext, repr=False)
    _per_thread: threading.local = field(default_factory=threading.local, repr=False)
    _clients: list[GitHubClient] = field(default_factory=list, repr=False)
    _clients_guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings, *, github_app: GitHubApp | None = None) -> Services:
        engine = make_engine(settings.effective_database_url)
        # SQLite has one writer at a time; its busy handler makes the others sleep ever longer (up to
        # 100 ms a try) and, under load, starves some. The writers of this process take turns here instead.
        writers = threading.Lock() if engine.dialect.name == "sqlite" else nullcontext()
        return cls(settings=settings, engine=engine, sessions=session_factory(engine),
                   locks=locks_for(engine, settings.data_dir), github_app=github_app, writers=writers)

    def __repr__(self) -> str:
        return f"Services(database={self.engine.url!r}, api_url={self.settings.github_api_url!r})"

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """A write transaction, committed when the block ends (see `writers`)."""
        with self.writers, session_scope(self.sessions) as session:
            yield session

    @property
    def github(self) -> GitHubApp:
        """The App (made on first use: a web process whose jobs run elsewhere never needs it)."""
        if self.github_app is None:
            self.github_app = GitHubApp.from_settings(self.settings)
        return self.github_app

    def client(self, installation_id: int) -> GitHubClient:
        """This thread's client of the installation: its connections are kept from one job to the next
        (a client is not shared between threads)."""
        clients: dict[int, GitHubClient] = self._per_thread.__dict__.setdefault("clients", {})
        client = clients.get(installation_id)
        if client is None:
            client = clients[installation_id] = GitHubClient(self.github, installation_id)
            with self._clients_guard:
                self._clients.append(client)
        return client

    @property
    def trees_dir(self) -> Path:
        """Unpacked source trees by commit sha (sha-named directories, never a mixture)."""
        return self.settings.cache_dir / "trees"

    def close(self) -> None:
        with self._clients_guard:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()
        if self.github_app is not None:
            self.github_app.close()
        self.engine.dispose()
