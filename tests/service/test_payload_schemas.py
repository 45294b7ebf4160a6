"""The payload models against GitHub's published webhook schemas (issue 23): every field a model reads is as
optional and as nullable as the schema says, every real and official example payload is accepted, and each
example with a field made null or left out, where the schema allows it, is still accepted.

The schemas are the shared fixtures' `openapi-webhooks-subset.json` (npm `@octokit/openapi-webhooks` 12.1.0,
GitHub's own description; see ../shared/fixtures/github/README.md for the provenance).
"""

from __future__ import annotations

import copy
import json
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from app.webhooks import ROUTER
from app.webhooks.router import Job, PayloadError

from .payloads import WEBHOOKS

SCHEMAS = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "github" / "webhooks" / "schemas"
DESCRIPTION: dict[str, Any] = json.loads((SCHEMAS / "openapi-webhooks-subset.json").read_text())
COMPONENTS = DESCRIPTION["components"]["schemas"]

# Fields a model accepts absent although GitHub's schema requires them: a default is harmless there, and
# captured deliveries older than the schema lack them. Reviewed one by one; a new one fails the test.
LENIENT_ABSENT = {
    "private",  # repositories: False when absent
    "pull_requests",  # check runs and suites: [] when absent
    "installation",  # repository webhooks send none; the job asks GitHub for the installation
    "action", "sender", "changes", "merged", "merged_by", "app", "base", "repo", "pull_request", "body",
    "user", "login", "slug", "type", "account", "requested_action", "repositories", "repositories_added",
    "repositories_removed",
    # a removed repository: one model reads installation_repositories added and removed, and the schema of
    # `added` requires nothing of `repositories_removed` items
    "id", "full_name",
}
# Fields a model accepts as null although the schema does not: each is read as "not given".
LENIENT_NULL = (LENIENT_ABSENT - {"private", "pull_requests"}) | {"identifier"}


def deref(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = COMPONENTS[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a value may take (anyOf/oneOf flattened, allOf merged), each dereferenced."""
    schema = deref(schema)
    found: list[dict[str, Any]] = []
    for alternative in schema.get("anyOf", []) + schema.get("oneOf", []):
        found += branches(alternative)
    if "allOf" in schema:
        merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        for part in schema["allOf"]:
            for branch in branches(part):
                merged["properties"].update(branch.get("properties", {}))
                merged["required"] += branch.get("required", [])
        found.append(merged)
    if not found or _types(schema) & {"null"}:
        found.append(schema)
    return found


def _types(schema: dict[str, Any]) -> set[str]:
    declared = schema.get("type", [])
    return {declared} if isinstance(declared, str) else set(declared)


def nullable(schema: dict[str, Any]) -> bool:
    return any("null" in _types(branch) or None in branch.get("enum", ()) for branch in branches(schema))


def member(schema: dict[str, Any], name: str) -> tuple[list[dict[str, Any]], bool]:
    """The schemas of property NAME in the object SCHEMA describes (items, for an array), and whether every
    alternative requires it."""
    objects = []
    for branch in branches(schema):
        if "array" in _types(branch) and "items" in branch:
            objects += branches(branch["items"])
        elif "properties" in branch:
            objects.append(branch)
    holders = [branch for branch in objects if name in branch.get("properties", {})]
    required = bool(holders) and all(name in branch.get("required", []) for branch in objects)
    return [branch["properties"][name] for branch in holders], required


def nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = nested_model(argument)
        if found is not None:
            return found
    return None


def allows_none(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


Field = tuple[tuple[str, ...], bool, bool]


def fields(model: type[BaseModel], path: tuple[str, ...] = ()) -> Iterator[Field]:
    """(path, optional, nullable) of every field MODEL reads, nested models included."""
    for name, field in model.model_fields.items():
        yield (*path, name), not field.is_required(), allows_none(field.annotation)
        inner = nested_model(field.annotation)
        if inner is not None:
            yield from fields(inner, (*path, name))


def routes() -> Iterator[tuple[str, str, type[BaseModel]]]:
    """(event, action, model) of every route, with the schema key GitHub's description gives it."""
    for (event, action), route in ROUTER._routes.items():
        actions = [action] if action else sorted({key.split("-", 2)[-1] for key in DESCRIPTION["webhooks"]
                                                  if key.startswith(event.replace("_", "-") + "-")})
        for each in actions or [None]:
            key = event.replace("_", "-") + (f"-{each.replace('_', '-')}" if each else "")
            if key in DESCRIPTION["webhooks"]:
                yield key, each or "", route.model


def payload_schema(key: str) -> dict[str, Any]:
    return DESCRIPTION["webhooks"][key]["post"]["requestBody"]["content"]["application/json"]["schema"]


ROUTES = sorted({(key, action): model for key, action, model in routes()}.items())


def test_the_description_covers_the_routes() -> None:
    assert {key for (key, _), _ in ROUTES} >= {
        "pull-request-opened", "pull-request-synchronize", "pull-request-closed", "pull-request-edited",
        "issue-comment-created", "check-run-rerequested", "check-run-requested-action",
        "check-suite-rerequested", "installation-created", "installation-deleted",
        "installation-repositories-added", "installation-repositories-removed", "ping"}


@pytest.mark.parametrize(("key", "model"), [(key, model) for (key, _), model in ROUTES],
                         ids=[key for (key, _), _ in ROUTES])
def test_every_field_read_is_as_optional_and_nullable_as_the_schema(key: str, model: type[BaseModel]) -> None:
    problems = []
    for path, optional, accepts_none in fields(model):
        schemas, required = [payload_schema(key)], True
        for name in path:
            found: list[dict[str, Any]] = []
            for schema in schemas:
                members, each_required = member(schema, name)
                found += members
                required = each_required
            schemas = found
        if not schemas:
            continue  # a field this event's schema does not describe (another event's, on a shared model)
        may_be_null = any(nullable(schema) for schema in schemas)
        where = ".".join(path)
        if not required and not optional:
            problems.append(f"{where}: the schema lets it be absent, the model requires it")
        if may_be_null and not accepts_none:
            problems.append(f"{where}: the schema lets it be null, the model refuses null")
        if required and optional and path[-1] not in LENIENT_ABSENT:
            problems.append(f"{where}: required by the schema, optional in the model (not reviewed)")
        if accepts_none and not may_be_null and path[-1] not in LENIENT_NULL:
            problems.append(f"{where}: never null in the schema, nullable in the model (not reviewed)")
    assert problems == []


def examples() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(event, name, payload): the shared real payloads (tests' copies) and the description's examples."""
    for path in sorted(WEBHOOKS.glob("*/*.json")):
        if path.parent.name not in ("deliveries", "schemas"):
            yield path.parent.name, path.stem, json.loads(path.read_text())
    for name, example in DESCRIPTION["components"]["examples"].items():  # check-run-*, ping
        event = "check_run" if name.startswith("check-run-") else name
        yield event, f"openapi:{name}", example["value"]


EXAMPLES = list(examples())


@pytest.mark.parametrize(("event", "payload"), [(event, payload) for event, _, payload in EXAMPLES],
                         ids=[f"{event}/{name}" for event, name, _ in EXAMPLES])
def test_every_example_payload_is_accepted(event: str, payload: dict[str, Any]) -> None:
    ROUTER.decide(event, payload)  # no PayloadError


def loosened(payload: dict[str, Any], schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """PAYLOAD with each member the schema lets be null made null, and each it lets be absent left out,
    one at a time, down to the objects it holds (first items of arrays)."""
    def walk(value: Any, schemas: list[dict[str, Any]], path: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
        if isinstance(value, list) and value:
            inner = [item for schema in schemas for branch in branches(schema) if "items" in branch
                     for item in [branch["items"]]]
            yield from walk(value[0], inner, (*path, 0))
        if not isinstance(value, dict):
            return
        for name, child in value.items():
            found, required = [], True
            for schema in schemas:
                members, required = member(schema, name)
                found += members
            if not found:
                continue
            if not required:
                yield (*path, name, "absent")
            if any(nullable(schema) for schema in found) and child is not None:
                yield (*path, name, "null")
            yield from walk(child, found, (*path, name))

    for *where, how in walk(payload, [schema], ()):
        changed = copy.deepcopy(payload)
        holder = changed
        for step in where[:-1]:
            holder = holder[step]
        if how == "absent":
            del holder[where[-1]]
        else:
            holder[where[-1]] = None
        yield f"{'.'.join(map(str, where))} {how}", changed


def schema_key(event: str, payload: dict[str, Any]) -> str:
    action = payload.get("action")
    return event.replace("_", "-") + (f"-{action.replace('_', '-')}" if action else "")


HANDLED = [(event, name, payload) for event, name, payload in EXAMPLES
           if schema_key(event, payload) in {key for (key, _), _ in ROUTES}]


@pytest.mark.parametrize(("event", "payload"), [(event, payload) for event, _, payload in HANDLED],
                         ids=[f"{event}/{name}" for event, name, _ in HANDLED])
def test_what_the_schema_allows_absent_or_null_is_accepted(event: str, payload: dict[str, Any]) -> None:
    refused = []
    for change, variant in loosened(payload, payload_schema(schema_key(event, payload))):
        try:
            ROUTER.decide(event, variant)
        except PayloadError as exc:
            refused.append(f"{change}: {exc}")
    assert refused == []


@pytest.mark.parametrize(("account", "login"), [
    (None, None),  # the stored login stays (app/store/repos.py)
    ({"id": 1, "node_id": "E_1", "name": "Acme Corp", "slug": "acme-corp", "html_url": "https://x"},
     "acme-corp"),
])
def test_an_installation_of_a_null_or_enterprise_account_is_recorded(account: Any, login: str | None) -> None:
    payload = json.loads((WEBHOOKS / "installation" / "created.json").read_text())
    payload["installation"]["account"] = account
    job = ROUTER.decide("installation", payload)
    assert isinstance(job, Job) and job.data["account"]["login"] == login
