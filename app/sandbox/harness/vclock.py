"""A virtual clock for capture: sleeping costs no time, and waiting without end ends the script.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
CI scripts wait for servers they started (`while not ready(): time.sleep(5)`); here every sleep returns at
once and moves the clock forward, so a script whose condition never comes true stops after a bound of
virtual waiting instead of holding a worker until the wall-clock limit.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

DEFAULT_BOUND_SECONDS = 6 * 3600.0

_offset = 0.0
_bound = DEFAULT_BOUND_SECONDS
_real = {name: getattr(time, name) for name in ("sleep", "time", "monotonic", "perf_counter", "time_ns",
                                                "monotonic_ns", "perf_counter_ns")}
_real_asyncio_sleep = asyncio.sleep


class WaitsForever(BaseException):
    """The script kept waiting past the bound. A BaseException: `except Exception` retry loops let it pass."""


def install(bound_seconds: float = DEFAULT_BOUND_SECONDS) -> None:
    """Make time.sleep and asyncio.sleep virtual and the clocks include the virtual time slept."""
    global _offset, _bound
    _offset, _bound = 0.0, bound_seconds
    fakes: dict[str, Any] = {"sleep": _sleep}
    for name in ("time", "monotonic", "perf_counter"):
        fakes[name] = _seconds_clock(_real[name])
    for name in ("time_ns", "monotonic_ns", "perf_counter_ns"):
        fakes[name] = _nanoseconds_clock(_real[name])
    for name, fake in fakes.items():
        setattr(time, name, fake)
    asyncio.sleep = _asyncio_sleep


def slept() -> float:
    """Virtual seconds slept so far."""
    return _offset


def _advance(seconds: Any) -> None:
    global _offset
    _offset += max(0.0, float(seconds))
    if _offset > _bound:
        raise WaitsForever(f"waits forever: still waiting after {_offset / 3600:.1f} virtual hours of sleep")


def _sleep(seconds: float) -> None:
    _advance(seconds)


async def _asyncio_sleep(delay: float, result: Any = None) -> Any:
    _advance(delay)
    await _real_asyncio_sleep(0)
    return result


def _seconds_clock(real: Any) -> Any:
    def clock() -> float:
        return float(real()) + _offset

    return clock


def _nanoseconds_clock(real: Any) -> Any:
    def clock() -> int:
        return int(real()) + int(_offset * 1e9)

    return clock
