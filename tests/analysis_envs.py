"""Analysis environments for the tests that run the harness themselves: built by prtriage's own builder,
once per session (in $PRTRIAGE_ENV_DIR, which conftest points at a directory of the session), at the
versions the twin's policy pins, never taken from the interpreter running the tests."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from app.analysis.core.policy import Harness, load_policy
from app.engine.environments import prepare
from app.sandbox.interpreter import Interpreter

TWIN_POLICY = Path(__file__).resolve().parent / "twin" / "policy.yml"
HYDRA = ("hydra-core==1.3.2", "omegaconf==2.3.0")  # a verl-shaped application composes its config for real


@functools.cache
def twin_environment() -> Interpreter:
    """The twin policy's packages and Hydra's, for every harness run of the tests."""
    twin = load_policy(TWIN_POLICY).harness.requirements
    return environment_of(Harness(requirements=[*twin, *HYDRA]))


def environment_of(harness: Harness) -> Interpreter:
    """The analysis environment HARNESS declares, as `check` would build it."""
    return prepare(harness, None, Path(tempfile.gettempdir()))
