"""`/docs`: the API's reference as a plain page rendered from the app's own OpenAPI document, with no script
and nothing from a CDN (FastAPI's Swagger UI loads its code from one, which the dashboard's
Content-Security-Policy rightly refuses and an offline machine cannot reach)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.dashboard.views import render

METHODS = ("get", "post", "put", "patch", "delete")
router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class Parameter:
    name: str
    where: str  # query, path, header
    required: bool
    schema: str
    description: str


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    description: str
    parameters: list[Parameter] = field(default_factory=list)
    body: str | None = None  # the request body's schema
    responses: list[tuple[str, str, str]] = field(default_factory=list)  # status, description, schema


def schema_text(schema: dict[str, Any]) -> str:
    """A schema in a few words: `RiskWindowPage`, `integer (>= 1)`, `one of open, closed, all`, `string[]`."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "enum" in schema:
        return "one of " + ", ".join(str(value) for value in schema["enum"])
    for combined in ("anyOf", "oneOf", "allOf"):
        if combined in schema:
            return " | ".join(schema_text(part) for part in schema[combined])
    if schema.get("type") == "array":
        return schema_text(schema.get("items", {})) + "[]"
    bounds = [f"{sign} {schema[key]}" for key, sign in (("minimum", ">="), ("maximum", "<="),
                                                        ("maxLength", "length <="), ("pattern", "matches"))
              if key in schema]
    kind = str(schema.get("type", "any"))
    return f"{kind} ({', '.join(bounds)})" if bounds else kind


def _operation(path: str, method: str, spec: dict[str, Any]) -> Operation:
    body = spec.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    return Operation(
        method.upper(), path, str(spec.get("summary", "")), str(spec.get("description", "")),
        [Parameter(str(p["name"]), str(p["in"]), bool(p.get("required")), schema_text(p.get("schema", {})),
                   str(p.get("description", ""))) for p in spec.get("parameters", [])],
        schema_text(body) if body else None,
        [(str(status), str(answer.get("description", "")),
          schema_text(answer.get("content", {}).get("application/json", {}).get("schema", {}))
          if answer.get("content") else "") for status, answer in sorted(spec.get("responses", {}).items())])


def operations(document: dict[str, Any]) -> list[Operation]:
    return [_operation(path, method, spec) for path, item in sorted(document.get("paths", {}).items())
            for method, spec in item.items() if method in METHODS]


def schemas(document: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, bool]]]]:
    """Each component schema with its properties: (name, type, required)."""
    found = []
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        required = set(schema.get("required", []))
        found.append((name, [(prop, schema_text(spec), prop in required)
                             for prop, spec in schema.get("properties", {}).items()]))
    return found


@router.get("/docs")
def api_docs(request: Request) -> Response:
    """Open to anyone, as /openapi.json is: it describes the API and shows no data."""
    document = request.app.openapi()
    return render(request, "api_docs.html", {"info": document.get("info", {}),
                                              "operations": operations(document),
                                              "schemas": schemas(document)})
