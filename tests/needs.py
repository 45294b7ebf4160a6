"""What a test needs from outside the project: `../shared` (the GitHub fixtures, the real repository's bundle)
beside the checkout, or a tool on PATH.

Absent, the test is skipped with the reason, so that a clone of the project alone runs its test command
green; under CI=true it fails instead, since a green CI must mean that it ran.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: this test must run)", pytrace=False)
    pytest.skip(reason)


def shared(relative: str) -> Path:
    """SHARED/RELATIVE, or the test skipped (failed under CI) when it is absent."""
    path = SHARED / relative
    if not path.exists():
        unavailable(f"../shared/{relative} is absent ({path}): a clone of the project without ../shared")
    return path


def tool(name: str) -> str:
    """The program NAME on PATH, or the test skipped (failed under CI) when it is not installed."""
    found = shutil.which(name)
    if found is None:
        unavailable(f"{name} is not installed (.ci/run installs it)")
    return found


def working_sandbox() -> None:
    """The real sandbox, or the test skipped (failed under CI) when bubblewrap is missing or cannot run."""
    from app.sandbox.runner import sandbox_problem

    problem = sandbox_problem()
    if problem is not None:
        unavailable(f"the sandbox cannot run here: {problem}")
