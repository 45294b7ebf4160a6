"""Fixtures shared by test modules: the miles twin's git repository, built once per session; its checks."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from twin import base_branch, make_git_repo
from twin.cli import MILES_POLICY, Checker, Report, prtriage
from twin.variants import VARIANTS

_OWN_ENV_DIR: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Analysis environments in one directory for the whole session (CLI runs in subprocesses too), so that
    each is built once; a directory given in PRTRIAGE_ENV_DIR is kept across sessions."""
    if not os.environ.get("PRTRIAGE_ENV_DIR"):
        _OWN_ENV_DIR.append(tempfile.mkdtemp(prefix="prtriage-test-envs-"))
        os.environ["PRTRIAGE_ENV_DIR"] = _OWN_ENV_DIR[0]


def pytest_unconfigure(config: pytest.Config) -> None:
    for directory in _OWN_ENV_DIR:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def miles_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The twin with the base on `main` and every variant's head on a branch named after it."""
    return make_git_repo(tmp_path_factory.mktemp("twin") / "miles", list(VARIANTS))


@pytest.fixture(scope="session")
def prtriage_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the session's prtriage runs, so a revision is unpacked and captured once."""
    return tmp_path_factory.mktemp("prtriage-cache")


@pytest.fixture(scope="session")
def check(miles_repo: Path, prtriage_cache: Path) -> Checker:
    """`check(variant)` -> (exit status, JSON report) of `prtriage check` from its base to its head.

    One CLI run per variant for the session: the scenario and mechanism tests read the same reports.
    """
    done: dict[str, tuple[int, Report]] = {}

    def run(variant: str) -> tuple[int, Report]:
        if variant not in done:
            result = prtriage("check", "--repo", str(miles_repo), "--base", base_branch(variant), "--head",
                              variant, "--policy", str(MILES_POLICY), "--format", "json",
                              cache_dir=prtriage_cache)
            assert result.returncode in (0, 1, 3), result.describe()
            done[variant] = (result.returncode, result.json())
        return done[variant]

    return run
