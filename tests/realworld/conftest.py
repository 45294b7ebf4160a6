"""The real radixark/miles, from the bundle in ../shared/realworld: cloned once per session.

Absent bundle: a skip with the reason, except under CI=true, where it is a failure (a green CI must mean
the real repository was tested): tests/needs.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fakegithub.plugin import fake_github, fake_github_factory, github_app_key  # noqa: F401 (fixtures)
from needs import shared

PROJECT = Path(__file__).resolve().parents[2]
MILES_POLICY = PROJECT / "policies" / "radixark" / "miles.yml"


@pytest.fixture(scope="session")
def real_miles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of the bundle: tags base-2077, pr-2077, pr-2203, head-2026-08-21."""
    bundle = shared("realworld/miles.bundle")
    clone = tmp_path_factory.mktemp("real") / "miles"
    subprocess.run(["git", "clone", "-q", str(bundle), str(clone)], check=True, timeout=300,
                   capture_output=True)
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", "--tags", str(bundle)], check=True, timeout=300,
                   capture_output=True)
    return clone


@pytest.fixture(scope="session")
def real_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-cache")
