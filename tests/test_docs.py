"""Every policy key, setting and command is documented: a new one without docs fails here."""

from __future__ import annotations

import argparse
import types
import typing
from pathlib import Path

from pydantic import BaseModel

from app.analysis.core.policy import Policy, parse_policy
from app.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """Pydantic models reachable through Optional, list, Annotated and unions."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _is_list(annotation: object) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_is_list(a) for a in typing.get_args(annotation))
    return origin is list


def policy_keys(model: type[BaseModel] = Policy, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        path = prefix + (field.alias or name)
        keys.add(path)
        joiner = "[]." if _is_list(field.annotation) else "."
        for sub in _models_in(field.annotation):
            keys |= policy_keys(sub, path + joiner)
    return keys


def test_walker_sees_nested_and_union_keys() -> None:
    keys = policy_keys()
    assert "matrix.sources[].registration.disabled_kwarg" in keys
    assert "matrix.sources[].suites[].argv" in keys
    assert "validation.replace[].with" in keys
    assert "harness.limits.suite_seconds" in keys


def test_every_policy_key_is_documented() -> None:
    documented = (ROOT / "docs" / "policy.md").read_text()
    missing = sorted(k for k in policy_keys() if f"`{k}`" not in documented)
    assert missing == [], f"document these policy keys in docs/policy.md: {missing}"


def test_builtin_policies_are_valid() -> None:
    files = sorted((ROOT / "policies").rglob("*.yml"))
    assert ROOT / "policies" / "default.yml" in files
    for path in files:
        parse_policy(path.read_text(), str(path))


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    import re

    # Quoted names outside the harness: the harness's own variables are set by us inside the sandbox.
    pattern = r"[\"'](PRTRIAGE_[A-Z_]+|GITHUB_[A-Z_]+|DASHBOARD_TOKEN|DATABASE_URL|QUEUE_URL)[\"']"
    names = {name for path in (ROOT / "app").rglob("*.py") if "harness" not in path.parts
             for name in re.findall(pattern, path.read_text())}
    assert {"PRTRIAGE_BWRAP", "PRTRIAGE_CACHE_DIR", "GITHUB_WEBHOOK_SECRET"} <= names
    docs = "".join((ROOT / name).read_text() for name in ("README.md", "docs/service.md", "docs/sandbox.md"))
    missing = sorted(name for name in names if f"`{name}`" not in docs)
    assert missing == [], f"document these environment variables in README or docs/: {missing}"


def test_the_quick_start_begins_with_the_demo_and_names_real_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = quick_start.split("```", 2)[1].strip().splitlines()
    assert block == ["bash scripts/demo", "bash scripts/check"]
    assert (ROOT / "scripts" / "demo").is_file() and (ROOT / "scripts" / "check").is_file()
    assert "bash scripts/check" in (ROOT / ".ci" / "run").read_text()
    table = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    named = {row.split("`prtriage ", 1)[1].split()[0].strip("`") for row in table.splitlines()
             if row.startswith("| `prtriage ")}
    [commands] = [action for action in build_parser()._actions
                  if isinstance(action, argparse._SubParsersAction)]
    assert named == set(commands.choices)
