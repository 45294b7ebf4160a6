"""Which handler answers a delivery: each concern module registers its handlers for (event, action) pairs on
its own Router; the intake combines the routers (as gidgethub's routing does).

A handler reads the verified payload as the typed model it registered with (app/webhooks/payloads.py) and says
what to do with it, without any I/O: queue a Job (one of the typed payloads of app/triage/job_payloads.py,
stored as the delivery's payload summary; the worker runs it) or ignore the delivery with a reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from app.triage.job_payloads import JobKind, JobPayload
from app.webhooks.payloads import Envelope, describe

Payload = Mapping[str, Any]
E = TypeVar("E", bound=Envelope)


@dataclass(frozen=True)
class Job:
    """Work for the queue: KIND names the job, DATA (plain JSON) is all it needs. Handlers make it from a
    typed payload (`Job.of`), which the delivery's job reads back from the summary."""

    kind: JobKind
    installation_id: int | None
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, payload: JobPayload) -> Job:
        return cls(payload.KIND, payload.installation_id, payload.data())

    def summary(self) -> dict[str, Any]:
        return {"job": self.kind, "installation_id": self.installation_id, **self.data}


@dataclass(frozen=True)
class Ignored:
    reason: str


Decision = Job | Ignored
Handler = Callable[[Any], Decision]


class PayloadError(ValueError):
    """A verified delivery whose payload lacks what its event must carry; the intake answers 400."""


@dataclass(frozen=True)
class Route:
    model: type[Envelope]  # what the handler reads, validated before it is called
    handler: Handler


class Router:
    """(event, action) -> handler and the payload model it reads; action None registers for every action of
    the event (and for events that have none, such as ping)."""

    def __init__(self, *routers: Router) -> None:
        self._routes: dict[tuple[str, str | None], Route] = {}
        for router in routers:
            for key, route in router._routes.items():
                self._add(key, route)

    def _add(self, key: tuple[str, str | None], route: Route) -> None:
        if key in self._routes:
            raise ValueError(f"two handlers for {key}")
        self._routes[key] = route

    def register(self, event: str, *actions: str, model: type[E]) -> Callable[[Callable[[E], Decision]],
                                                                                Callable[[E], Decision]]:
        def decorate(handler: Callable[[E], Decision]) -> Callable[[E], Decision]:
            for action in actions or (None,):
                self._add((event, action), Route(model, handler))
            return handler
        return decorate

    def decide(self, event: str, payload: Payload) -> Decision:
        """The handler's decision on the payload, validated by the handler's model first: PayloadError when
        it is malformed."""
        action = payload.get("action")
        action = action if isinstance(action, str) else None
        route = self._routes.get((event, action)) or self._routes.get((event, None))
        if route is None:
            return Ignored(f"no handler for {event}" + (f".{action[:64]}" if action else ""))
        return route.handler(validate(route.model, payload))

    @property
    def events(self) -> set[str]:
        return {event for event, _ in self._routes}


def validate(model: type[E], payload: Payload) -> E:
    """PAYLOAD as MODEL, or PayloadError naming the first field that does not fit."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise PayloadError(describe(exc)) from None
