"""Resource limits of a sandbox run as rlimits, and how the end of a run is described."""

from __future__ import annotations

import math
import resource
import signal
from collections.abc import Callable

from app.analysis.core.policy import Limits

MIB = 1024 * 1024
# RLIMIT_CPU counts CPU seconds per process; the wall clock stops a run first, this catches what outlives it.
CPU_MARGIN_SECONDS = 10


def rlimits(limits: Limits) -> list[tuple[int, int]]:
    """(resource, value) pairs applied to the sandbox's whole process tree."""
    wanted = [
        (resource.RLIMIT_AS, limits.memory_mb * MIB),
        (resource.RLIMIT_NPROC, limits.processes),
        (resource.RLIMIT_FSIZE, limits.file_mb * MIB),
        (resource.RLIMIT_CPU, math.ceil(limits.total_seconds) + CPU_MARGIN_SECONDS),
        (resource.RLIMIT_CORE, 0),
    ]
    return [(which, _within_hard_limit(which, value)) for which, value in wanted]


def _within_hard_limit(which: int, value: int) -> int:
    # An unprivileged caller cannot raise a hard limit; asking for more would make setrlimit fail.
    _, hard = resource.getrlimit(which)
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def rlimit_setter(limits: Limits) -> Callable[[], None]:
    """A preexec_fn: computed in the parent so the forked child only makes setrlimit calls."""
    pairs = rlimits(limits)

    def apply() -> None:
        for which, value in pairs:
            resource.setrlimit(which, (value, value))

    return apply


def describe_status(returncode: int, *, via_bwrap: bool) -> str | None:
    """None for success, else "exited with status N" or "killed by signal N (NAME)".

    bubblewrap reports a child killed by signal N as exit status 128 + N, like a shell.
    """
    if returncode == 0:
        return None
    if returncode < 0:
        return _signal_text(-returncode)
    if via_bwrap and returncode > 128 and _signal_name(returncode - 128) is not None:
        return _signal_text(returncode - 128)
    return f"exited with status {returncode}"


def _signal_text(number: int) -> str:
    name = _signal_name(number)
    return f"killed by signal {number} ({name})" if name else f"killed by signal {number}"


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None
