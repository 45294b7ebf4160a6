"""GitHub's example payloads as octokit publishes them (npm `@octokit/webhooks-examples` 7.6.1, vendored in
tests/fixtures/octokit-webhooks-examples/ for the events the App handles): every one is accepted by the
payload models of its event, handled action or not, and routed without a PayloadError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.webhooks import ROUTER
from app.webhooks.router import Ignored, Job, validate

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "octokit-webhooks-examples"
VERSION = "7.6.1"


def load() -> list[tuple[str, int, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES_DIR.glob("*.json")):
        entry = json.loads(path.read_text())
        assert entry["name"] == path.stem
        found += [(path.stem, index, example) for index, example in enumerate(entry["examples"])]
    return found


EXAMPLES = load()
IDS = [f"{event}[{index}]:{example.get('action', '-')}" for event, index, example in EXAMPLES]


def models_of(event: str) -> set[type]:
    return {route.model for (name, _), route in ROUTER._routes.items() if name == event}


def test_the_vendored_examples_are_the_pinned_version_for_every_event_the_app_handles() -> None:
    assert f"version **{VERSION}**" in (EXAMPLES_DIR / "README.md").read_text()
    assert {path.stem for path in EXAMPLES_DIR.glob("*.json")} == ROUTER.events
    assert len(EXAMPLES) == 77
    handled = [(event, example) for event, _, example in EXAMPLES
               if (event, example.get("action")) in ROUTER._routes or (event, None) in ROUTER._routes]
    assert len(handled) >= 30  # most are actions the App routes, not only ignored ones


@pytest.mark.parametrize(("event", "example"), [(event, example) for event, _, example in EXAMPLES], ids=IDS)
def test_every_example_is_accepted_by_its_events_models(event: str, example: dict[str, Any]) -> None:
    for model in models_of(event):
        validate(model, example)  # PayloadError names the field otherwise


@pytest.mark.parametrize(("event", "example"), [(event, example) for event, _, example in EXAMPLES], ids=IDS)
def test_every_example_is_routed_without_a_payload_error(event: str, example: dict[str, Any]) -> None:
    decision = ROUTER.decide(event, example)
    assert isinstance(decision, Job | Ignored)
