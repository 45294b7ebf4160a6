"""Fixtures shared by test modules: the miles twin's git repository, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from twin import make_git_repo
from twin.variants import VARIANTS


@pytest.fixture(scope="session")
def miles_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The twin with the base on `main` and every variant's head on a branch named after it."""
    return make_git_repo(tmp_path_factory.mktemp("twin") / "miles", list(VARIANTS))


@pytest.fixture(scope="session")
def prtriage_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the session's prtriage runs, so a revision is unpacked and captured once."""
    return tmp_path_factory.mktemp("prtriage-cache")
