"""The service's Prometheus metrics, kept in memory and written in the text exposition format by hand.

Counters live in the process that counts: deliveries in the web process, triage durations and GitHub calls
in the process that runs the job (`serve` runs both; a separate `prtriage worker` keeps its own).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]
TRIAGE_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in labels) + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass
class Counter:
    name: str
    help: str
    values: dict[Labels, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self.lock:
            self.values[key] = self.values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        with self.lock:
            return self.values.get(tuple(sorted(labels.items())), 0.0)

    def lines(self) -> list[str]:
        with self.lock:
            samples = sorted(self.values.items())
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter",
                *(f"{self.name}{_labels(key)} {_number(value)}" for key, value in samples)]


@dataclass
class Histogram:
    name: str
    help: str
    buckets: tuple[float, ...]
    series: dict[Labels, tuple[list[int], float, int]] = field(default_factory=dict)  # counts, sum, count
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe(self, seconds: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self.lock:
            counts, total, count = self.series.get(key, ([0] * len(self.buckets), 0.0, 0))
            counts = [n + (seconds <= bound) for n, bound in zip(counts, self.buckets, strict=True)]
            self.series[key] = (counts, total + seconds, count + 1)

    def lines(self) -> list[str]:
        with self.lock:
            series = sorted(self.series.items())
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for key, (counts, total, count) in series:
            for bound, n in zip(self.buckets, counts, strict=True):
                out.append(f"{self.name}_bucket{_labels((*key, ('le', _number(bound))))} {n}")
            out.append(f"{self.name}_bucket{_labels((*key, ('le', '+Inf')))} {count}")
            out.append(f"{self.name}_sum{_labels(key)} {_number(total)}")
            out.append(f"{self.name}_count{_labels(key)} {count}")
        return out


def _gauge(name: str, help_text: str, value: float | None) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    return lines + ([f"{name} {_number(value)}"] if value is not None else [])


def _from_mapping(name: str, help_text: str, label: str, values: Mapping[str, float]) -> list[str]:
    counter = Counter(name, help_text)
    for key, value in values.items():
        counter.inc(value, **{label: key})
    return counter.lines()


@dataclass
class ServiceMetrics:
    deliveries: Counter = field(default_factory=lambda: Counter(
        "prtriage_deliveries_total", "Webhook deliveries answered, by event and result."))
    jobs: Counter = field(default_factory=lambda: Counter(
        "prtriage_jobs_total", "Queue jobs run by this process, by task and outcome."))
    triage_seconds: Histogram = field(default_factory=lambda: Histogram(
        "prtriage_triage_duration_seconds", "Wall time of one triage job, by conclusion.", TRIAGE_BUCKETS))

    def render(self, *, queue_depth: int | None, scheduled: int | None, github: Mapping[str, object]) -> str:
        """The exposition text: these metrics, the queue gauges and the GitHub adapter's counters."""
        sections: Iterable[list[str]] = (
            self.deliveries.lines(), self.jobs.lines(), self.triage_seconds.lines(),
            _gauge("prtriage_queue_depth", "Jobs waiting in the queue (None: the queue cannot be read).",
                   queue_depth),
            _gauge("prtriage_queue_scheduled", "Jobs scheduled for later (retries, rescheduled triages).",
                   scheduled),
            *_github_lines(github),
        )
        return "\n".join(line for section in sections for line in section) + "\n"


def _github_lines(snapshot: Mapping[str, object]) -> list[list[str]]:
    def mapping(key: str) -> Mapping[str, float]:
        value = snapshot.get(key)
        return value if isinstance(value, Mapping) else {}

    waited = snapshot.get("rate_limit_wait_seconds")
    wait_seconds = float(waited) if isinstance(waited, int | float) else 0.0
    return [
        _from_mapping("prtriage_github_api_calls_total", "GitHub API requests, retries included, by "
                      "operation.", "operation", mapping("api_calls")),
        _from_mapping("prtriage_github_retries_total", "GitHub requests retried after a server or connection "
                      "error, by reason.", "reason", mapping("retries")),
        _from_mapping("prtriage_github_rate_limit_waits_total", "Waits for a GitHub rate limit, by kind.",
                      "kind", mapping("rate_limit_waits")),
        ["# HELP prtriage_github_rate_limit_wait_seconds_total Seconds spent waiting for GitHub rate limits",
         "# TYPE prtriage_github_rate_limit_wait_seconds_total counter",
         f"prtriage_github_rate_limit_wait_seconds_total {_number(wait_seconds)}"],
    ]
