"""When a GitHub request is tried again, and how long to wait first: server errors, dropped connections,
primary and secondary rate limits (GitHub's documented rules, in their order of precedence); and how a
write that must not be sent twice is retried: by looking for its effect first."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Literal, TypeVar

from app.github.errors import RateLimited, Unconfirmed, error_for
from app.github.metrics import METRICS, GitHubMetrics

log = logging.getLogger(__name__)

T = TypeVar("T")
WaitKind = Literal["server_error", "connection_error", "primary", "secondary"]


class AttemptFailed(Exception):
    """One HTTP attempt that failed: an error answer, or no answer at all (status None).

    Raised by an attempt for the policy to judge; never leaves this package (the policy turns it into a
    GitHubError). Header names are lower-case.
    """

    def __init__(self, status: int | None, headers: Mapping[str, str], message: str) -> None:
        super().__init__(message)
        self.status = status
        self.headers = {name.lower(): value for name, value in headers.items()}
        self.message = message


@dataclass(frozen=True)
class Wait:
    kind: WaitKind
    seconds: float


def _is_rate_limit_message(message: str) -> bool:
    text = message.lower()
    phrases = ("rate limit", "abuse detection", "retry your request again later",
               "wait a few minutes before you try again")
    return any(phrase in text for phrase in phrases)


def _retry_after(value: str, now: float) -> float | None:
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - now, 0.0)
    except (TypeError, ValueError):
        return None


def rate_limit_wait(failure: AttemptFailed, *, now: float, minimum: float) -> Wait | None:
    """The wait a rate-limited answer asks for, None when the answer is no rate limit.

    GitHub's rules: `Retry-After` first; else `X-RateLimit-Remaining: 0` means wait until
    `X-RateLimit-Reset` (epoch seconds); else a 429, or a 403 whose message names a rate limit, means wait
    at least a minute (MINIMUM). A plain 403 (a missing permission) is no rate limit.
    """
    if failure.status not in (403, 429):
        return None
    headers = failure.headers
    if "retry-after" in headers:
        seconds = _retry_after(headers["retry-after"], now)
        return Wait("secondary", seconds if seconds is not None else minimum)
    if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
        try:
            reset = float(headers["x-ratelimit-reset"])
        except ValueError:
            return Wait("primary", minimum)
        # +1: the reset is whole seconds, and we may be at the start of that second
        return Wait("primary", max(reset - now, 0.0) + 1.0)
    if failure.status == 429 or _is_rate_limit_message(failure.message):
        kind: WaitKind = "primary" if "api rate limit exceeded" in failure.message.lower() else "secondary"
        return Wait(kind, minimum)
    return None


@dataclass
class RetryPolicy:
    """Runs one request attempt after another until it succeeds or the policy gives up.

    `attempts` bounds server errors and dropped connections (exponential backoff from `backoff_base`,
    capped at `backoff_max`, with `jitter` as a fraction added at random); rate limits have their own
    budget (`rate_limit_retries`) because a wait until the reset is expected to succeed. A rate limit that
    asks for more than `max_rate_limit_wait` seconds raises RateLimited at once, so a worker is not held for
    longer than a primary window (one hour). `sleep` and `clock` are injectable so that tests record the
    waits instead of waiting.
    """

    attempts: int = 5
    rate_limit_retries: int = 3
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    jitter: float = 0.25
    secondary_wait: float = 60.0
    max_rate_limit_wait: float = 3700.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    metrics: GitHubMetrics = field(default_factory=lambda: METRICS)

    def run(self, operation: str, attempt: Callable[[], T], *, replay: bool = True) -> T:
        """ATTEMPT's result; ATTEMPT raises AttemptFailed for a failure the policy should judge.

        Without REPLAY, a failure GitHub may have applied (5xx, no answer) raises Unconfirmed instead of
        being sent again; rate limits are still waited out (a rate-limited request was not applied).
        """
        transient = rate_limited = 0
        while True:
            self.metrics.record_call(operation)
            try:
                return attempt()
            except AttemptFailed as caught:
                failure = caught  # `caught` is unbound after the except clause
            if not replay and _unsettled(failure):
                raise Unconfirmed(operation, failure.status, failure.message)
            wait = self._wait_for(operation, failure, transient, rate_limited)
            if wait.kind in ("primary", "secondary"):
                rate_limited += 1
                self.metrics.record_rate_limit_wait(wait.kind, wait.seconds)
            else:
                transient += 1
                self.metrics.record_retry(wait.kind)
            log.warning("GitHub %s: %s (HTTP %s); retrying in %.1f s", operation, wait.kind,
                        failure.status if failure.status is not None else "-", wait.seconds)
            self.sleep(wait.seconds)

    def _wait_for(self, operation: str, failure: AttemptFailed, transient: int, rate_limited: int) -> Wait:
        """The wait before the next attempt; raises the final error when there is to be none."""
        limit = rate_limit_wait(failure, now=self.clock(),
                                minimum=self.secondary_wait * 2 ** min(rate_limited, 6))
        if limit is not None:
            if limit.seconds > self.max_rate_limit_wait:
                raise RateLimited(operation, failure.status, failure.message, wait_seconds=limit.seconds)
            if rate_limited < self.rate_limit_retries:
                return limit
        elif _unsettled(failure) and transient + 1 < self.attempts:
            return Wait(_transient_kind(failure.status), self.backoff(transient))
        raise error_for(operation, failure.status, failure.message)

    def backoff(self, retries_so_far: int) -> float:
        delay = min(self.backoff_max, self.backoff_base * 2**retries_so_far)
        return float(delay * (1 + self.jitter * random.random()))

    def create(self, operation: str, send: Callable[[], T], look: Callable[[], T | None]) -> T:
        """What SEND created, SEND being a write that must not be applied twice (it raises Unconfirmed
        rather than being replayed). After an Unconfirmed failure, the usual backoff, then LOOK for what
        it would have made: found, that is the result; not found, SEND again. Bounded by `attempts`, like
        any retry; the last Unconfirmed is raised (the caller's next look will find what it may have made).
        """
        tries = 0
        while True:
            try:
                return send()
            except Unconfirmed as caught:
                failure = caught
            tries += 1
            if tries >= self.attempts:
                raise failure
            wait = Wait(_transient_kind(failure.status), self.backoff(tries - 1))
            self.metrics.record_retry(wait.kind)
            log.warning("GitHub %s: %s (HTTP %s) may have been applied; looking for it in %.1f s", operation,
                        wait.kind, failure.status if failure.status is not None else "-", wait.seconds)
            self.sleep(wait.seconds)
            found = look()
            if found is not None:
                log.info("GitHub %s: it had been applied; not sent again", operation)
                return found


def _unsettled(failure: AttemptFailed) -> bool:
    """A 5xx or no answer: worth another try, and GitHub may or may not have done what was asked (after a
    4xx or a rate limit it did not)."""
    return failure.status is None or failure.status >= 500


def _transient_kind(status: int | None) -> WaitKind:
    return "connection_error" if status is None else "server_error"
