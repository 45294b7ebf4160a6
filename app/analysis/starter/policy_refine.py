"""One refine round on the policy a check uses: `prtriage init`'s rules (starter.refine) read the errors of
an unhealthy base and add what they ask for, here to a policy that was written by hand or by `init` at an
older revision. The result is the refined policy and what changed, as keys, reasons and YAML."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from app.analysis.core.model import Suite
from app.analysis.core.policy import Policy
from app.analysis.starter.starter import refine
from app.analysis.starter.starter_tree import Starter
from app.analysis.verdict.health import Health
from app.analysis.verdict.refinement import Refinement


def refine_policy(policy: Policy, suites: Iterable[Suite], health: Health,
                  root: Path) -> tuple[Policy, Refinement] | None:
    """POLICY with what one refine round on HEALTH's errors adds (ROOT: the tree whose lines the errors
    are at, the base's), and the refinement; None when the round adds nothing."""
    written = _dumped(policy)
    # every key present, defaults included: the rules index sections (`harness["real_packages"]`) that a
    # hand-written policy may leave out
    refined = refine(Starter(_dumped(policy)), suites, health, root)
    if not refined.rounds[-1]:
        return None
    try:
        changed = Policy.model_validate(refined.policy)
    except ValidationError:  # a rule wrote what the policy language refuses: nothing to apply
        return None
    after = _dumped(changed)
    keys = tuple(changed_keys(written, after))
    if not keys:
        return None
    sparse = changed.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return changed, Refinement(keys=keys, changes=tuple(refined.rounds[-1]),
                               why=tuple(sorted(refined.why.items())), yaml=change_yaml(keys, sparse, after),
                               before=health.reason)


def _dumped(policy: Policy) -> dict[str, Any]:
    return policy.model_dump(mode="json", by_alias=True)


def changed_keys(before: dict[str, Any], after: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted keys whose values differ, down to the mappings' own keys (a new attribute default is
    `validation.attribute_defaults.NAME`); a list is one value."""
    for key, value in after.items():
        old = before.get(key)
        if old == value:
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            yield from changed_keys(old, value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def change_yaml(keys: Iterable[str], sparse: dict[str, Any], full: dict[str, Any]) -> str:
    """The changed KEYS as one YAML mapping to merge into the policy: each value as the policy would be
    written (SPARSE: defaults left out, so a list of fixtures reads as it was written), else FULL's."""
    change: dict[str, Any] = {}
    for key in keys:
        path = key.split(".")
        place = change
        for part in path[:-1]:
            place = place.setdefault(part, {})
        place[path[-1]] = _at(sparse, path, _at(full, path, None))
    return yaml.safe_dump(change, sort_keys=False, width=100)


def _at(document: dict[str, Any], path: list[str], missing: Any) -> Any:
    found: Any = document
    for part in path:
        if not isinstance(found, dict) or part not in found:
            return missing
        found = found[part]
    return found
