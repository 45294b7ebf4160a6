"""Counters of the GitHub adapter (API calls, retries, rate-limit waits) as plain numbers for /metrics."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class GitHubMetrics:
    """Monotonic counters; the service exports `snapshot()` to Prometheus.

    `api_calls` counts every HTTP attempt, retries included, by operation (the REST operationId, such as
    `pulls/list-files`), so that its sum is what GitHub bills against the rate limit.
    """

    api_calls: dict[str, int] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    rate_limit_waits: dict[str, int] = field(default_factory=dict)
    rate_limit_wait_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_call(self, operation: str) -> None:
        with self._lock:
            self.api_calls[operation] = self.api_calls.get(operation, 0) + 1

    def record_retry(self, reason: str) -> None:
        with self._lock:
            self.retries[reason] = self.retries.get(reason, 0) + 1

    def record_rate_limit_wait(self, kind: str, seconds: float) -> None:
        with self._lock:
            self.rate_limit_waits[kind] = self.rate_limit_waits.get(kind, 0) + 1
            self.rate_limit_wait_seconds += seconds

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"api_calls": dict(self.api_calls), "retries": dict(self.retries),
                    "rate_limit_waits": dict(self.rate_limit_waits),
                    "rate_limit_wait_seconds": self.rate_limit_wait_seconds}


METRICS = GitHubMetrics()
