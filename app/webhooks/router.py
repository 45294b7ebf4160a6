"""Which handler answers a delivery: each concern module registers its handlers for (event, action) pairs on
its own Router; the intake combines the routers (as gidgethub's routing does).

A handler reads the verified payload and says what to do with it, without any I/O: queue a Job (its data is
stored as the delivery's payload summary, and the worker runs it) or ignore the delivery with a reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

JobKind = Literal["triage", "pull_request_closed", "installation", "command"]
Payload = Mapping[str, Any]


@dataclass(frozen=True)
class Job:
    """Work for the queue: KIND names the pipeline step, DATA (plain JSON) is all it needs."""

    kind: JobKind
    installation_id: int | None
    data: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {"job": self.kind, "installation_id": self.installation_id, **self.data}


@dataclass(frozen=True)
class Ignored:
    reason: str


Decision = Job | Ignored
Handler = Callable[[Payload], Decision]


class PayloadError(ValueError):
    """A verified delivery whose payload lacks what its event must carry; the intake answers 400."""


class Router:
    """(event, action) -> handler; action None registers for every action of the event (and for events
    that have none, such as ping)."""

    def __init__(self, *routers: Router) -> None:
        self._handlers: dict[tuple[str, str | None], Handler] = {}
        for router in routers:
            for key, handler in router._handlers.items():
                self._add(key, handler)

    def _add(self, key: tuple[str, str | None], handler: Handler) -> None:
        if key in self._handlers:
            raise ValueError(f"two handlers for {key}")
        self._handlers[key] = handler

    def register(self, event: str, *actions: str) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            for action in actions or (None,):
                self._add((event, action), handler)
            return handler
        return decorate

    def decide(self, event: str, payload: Payload) -> Decision:
        action = payload.get("action")
        action = action if isinstance(action, str) else None
        handler = self._handlers.get((event, action)) or self._handlers.get((event, None))
        if handler is None:
            return Ignored(f"no handler for {event}" + (f".{action}" if action else ""))
        return handler(payload)

    @property
    def events(self) -> set[str]:
        return {event for event, _ in self._handlers}


def require(payload: Payload, *path: str) -> Any:
    """payload[path[0]][path[1]]…, or PayloadError naming what is missing."""
    value: Any = payload
    for depth, key in enumerate(path):
        if not isinstance(value, Mapping) or value.get(key) is None:
            raise PayloadError(f"payload lacks {'.'.join(path[:depth + 1])}")
        value = value[key]
    return value


def installation_id(payload: Payload) -> int | None:
    """The App installation the delivery is for; None for a repository webhook (no `installation`)."""
    installation = payload.get("installation")
    if isinstance(installation, Mapping) and isinstance(installation.get("id"), int):
        return int(installation["id"])
    return None


def repository(payload: Payload) -> dict[str, Any]:
    """The repository the event is about, as the job needs it."""
    return {"id": int(require(payload, "repository", "id")),
            "full_name": str(require(payload, "repository", "full_name")),
            "private": bool(payload["repository"].get("private", False))}
