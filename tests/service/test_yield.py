"""The embedded consumer's wait for a quiet intake before each job: while deliveries arrive it waits, never
longer than its bound, and not at all when the intake is quiet."""

from __future__ import annotations

import time

from app.processes.task_queue import YIELD_LONGEST, yield_to


def test_a_quiet_intake_costs_a_job_no_wait() -> None:
    assert yield_to(lambda: False) == 0.0


def test_a_busy_intake_delays_a_job_until_it_is_quiet() -> None:
    quiet_at = time.monotonic() + 0.2
    waited = yield_to(lambda: time.monotonic() < quiet_at)
    assert 0.15 <= waited < 1.0


def test_a_flood_delays_a_job_at_most_the_bound() -> None:
    started = time.monotonic()
    assert yield_to(lambda: True, longest=0.3) >= 0.3
    assert time.monotonic() - started < 3.0
    assert 2.0 < YIELD_LONGEST <= 10.0  # jobs are delayed through a burst, never starved by a flood
