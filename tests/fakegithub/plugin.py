"""Pytest fixtures of the fake GitHub; a conftest imports them by name to use them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from app.demo.localgithub.keys import AppKey, make_app_key
from app.demo.localgithub.server import FakeGitHub


@pytest.fixture(scope="session")
def github_app_key() -> AppKey:
    """The test App's RSA key pair, made once per session (2048-bit generation is the slow part)."""
    return make_app_key()


@pytest.fixture
def fake_github_factory(github_app_key: AppKey) -> Iterator[Callable[..., FakeGitHub]]:
    """Start fakes with options (`prefix="/api/v3"` for GitHub Enterprise, `app_id`, `app_slug`); each is
    stopped when the test ends."""
    started: list[FakeGitHub] = []

    def start(**options: object) -> FakeGitHub:
        fake = FakeGitHub(github_app_key, **options).start()  # type: ignore[arg-type]
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.stop()


@pytest.fixture
def fake_github(fake_github_factory: Callable[..., FakeGitHub]) -> FakeGitHub:
    """A fake github.com API (no path prefix), empty but for the App (id 4242, slug `prtriage-test`)."""
    return fake_github_factory()
