"""Property-based fuzzing of the intake over real HTTP: signed deliveries made from the real payloads of the
GitHub fixtures (tests/fixtures/github), mutated (values replaced, removed, turned into strings, huge
numbers, deep nesting, NaN …) or random, never answer 500, and a refused one leaves nothing stored.

PRTRIAGE_FUZZ_EXAMPLES sets the number of examples per database (default 300; docs/service.md records a run
of 10,000)."""

from __future__ import annotations

import copy
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.store.models import Delivery
from app.store.session import session_scope

from .conftest import Service
from .payloads import WEBHOOKS, delivery_headers

EXAMPLES = int(os.environ.get("PRTRIAGE_FUZZ_EXAMPLES", "300"))
REAL = {f"{path.parent.name}/{path.stem}": (path.parent.name, json.loads(path.read_text()))
        for path in sorted(WEBHOOKS.glob("*/*.json")) if path.parent.name not in {"schemas", "deliveries"}}
EVENTS = sorted({event for event, _ in REAL.values()} | {"star", "push"})
SPLICE = "\u2603splice\u2603"  # a string value replaced by raw JSON text once the payload is encoded
RAW = ["1e400", "-1e400", "NaN", "Infinity", "1.5", "-1", "0", "18446744073709551616", '"\\ud800"',
       '"a\\u0000b"', "[" * 199 + "]" * 199, "[" * 201 + "]" * 201, "[" * 1500 + "]" * 1500,
       '{"a":' * 1001 + "1" + "}" * 1001]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from([0, -1, 2**31, 2**63, 10**30])
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in VALUE, as the keys and indexes that lead there."""
    if at:
        yield at
    children: Any = []
    if isinstance(value, dict):
        children = value.items()
    elif isinstance(value, list):
        children = enumerate(value)
    for key, child in children:
        yield from paths(child, (*at, key))


def mutate(payload: dict[str, Any], path: tuple[Any, ...], how: str, value: Any) -> None:
    parent = payload
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == "delete" and isinstance(parent, dict):
        del parent[last]
    elif how == "stringify":
        parent[last] = str(parent[last])[:60]
    elif how == "splice":
        parent[last] = SPLICE
    else:
        parent[last] = value


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(REAL)))
    event, payload = REAL[name][0], copy.deepcopy(REAL[name][1])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(paths(payload)) or [("action",)]))
        mutate(payload, path, draw(st.sampled_from(["replace", "delete", "stringify", "splice"])),
               draw(json_values))
    body = json.dumps(payload).replace(json.dumps(SPLICE), draw(st.sampled_from(RAW)), 1)
    if draw(st.integers(0, 9)) == 0:  # now and then, the payload under another event's name
        event = draw(st.sampled_from(EVENTS))
    return event, body.encode()


random_deliveries = st.tuples(
    st.sampled_from(EVENTS),
    st.one_of(st.binary(max_size=200),
              st.dictionaries(st.sampled_from(["action", "installation", "repository", "pull_request",
                                               "issue", "comment", "check_run", "check_suite", "number"]),
                              json_values, max_size=6).map(lambda value: json.dumps(value).encode())))


def stored(service: Service, guid: str) -> bool:
    with session_scope(service.services.sessions, read_only=True) as session:
        return session.scalars(select(Delivery.id).where(Delivery.guid == guid)).first() is not None


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(delivery=st.one_of(mutated(), mutated(), random_deliveries))
def test_signed_mutated_and_random_deliveries_never_answer_500(service: Service,
                                                                delivery: tuple[str, bytes]) -> None:
    event, body = delivery
    guid = str(uuid.uuid4())
    answer = service.http.post("/webhooks/github", content=body,
                               headers=delivery_headers(event, body, guid=guid))
    assert answer.status_code in {200, 202, 400}, (answer.status_code, answer.text[:300])
    assert stored(service, guid) == (answer.status_code != 400), answer.text[:300]


def test_every_real_payload_is_among_the_seeds() -> None:
    assert len(REAL) >= 20 and Path(WEBHOOKS).is_dir()
