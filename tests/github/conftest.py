"""Fixtures of the GitHub room's tests: the fake GitHub, and an App pointed at it whose waits are recorded
instead of slept (the HTTP is real, on loopback).

Not a package on purpose: as a package, this directory would be imported as `github` and shadow PyGithub.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakegithub.plugin import fake_github, fake_github_factory, github_app_key

from app.demo.localgithub import AppKey, FakeGitHub
from app.github import GitHubApp, GitHubClient, GitHubMetrics, RetryPolicy

__all__ = ["fake_github", "fake_github_factory", "github_app_key"]  # fixtures, used by name

INSTALLATION = 7


@pytest.fixture
def sleeps() -> list[float]:
    """Every wait the retry policy asked for, in order."""
    return []


@pytest.fixture
def metrics() -> GitHubMetrics:
    return GitHubMetrics()


@pytest.fixture
def policy(sleeps: list[float], metrics: GitHubMetrics) -> RetryPolicy:
    return RetryPolicy(jitter=0.0, sleep=sleeps.append, metrics=metrics)


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    """The fake with the repository `octo/widgets` on installation 7."""
    fake_github.add_repo("octo/widgets", installation_id=INSTALLATION)
    return fake_github


@pytest.fixture
def app(fake: FakeGitHub, github_app_key: AppKey, policy: RetryPolicy) -> Iterator[GitHubApp]:
    github_app = GitHubApp(fake.app_id, github_app_key.private_pem, api_url=fake.url, policy=policy)
    yield github_app
    github_app.close()


@pytest.fixture
def client(app: GitHubApp) -> Iterator[GitHubClient]:
    installation_client = GitHubClient(app, INSTALLATION)
    yield installation_client
    installation_client.close()
