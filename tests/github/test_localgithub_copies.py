"""The local GitHub ships copies of the shared GitHub fixtures it answers and sends with (so that `prtriage
demo` runs without them), and the tests keep copies of the webhook payloads they send (so that a clone of
the project alone runs them): all must stay byte for byte what the shared fixtures are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from needs import shared

from app.demo.localgithub import hook_deliveries as deliveries
from app.demo.localgithub import rest_shapes as shapes

TESTS_WEBHOOKS = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhooks"


@pytest.fixture(scope="module")
def shared_github() -> Path:
    return shared("fixtures/github")


def files_under(root: Path) -> list[Path]:
    return sorted(path.relative_to(root) for path in root.rglob("*.json"))


def test_the_rest_description_subset_is_the_shared_one(shared_github: Path) -> None:
    assert files_under(shapes.REST) == files_under(shared_github / "rest")
    for name in files_under(shapes.REST):
        assert (shapes.REST / name).read_bytes() == (shared_github / "rest" / name).read_bytes(), name


PAYLOADS = [path.with_suffix("").as_posix() for path in files_under(deliveries.WEBHOOKS)]


def test_the_demo_payload_is_packaged() -> None:
    assert "pull_request/opened" in PAYLOADS


@pytest.mark.parametrize("name", PAYLOADS)
def test_each_packaged_payload_is_a_shared_real_one(name: str, shared_github: Path) -> None:
    real = shared_github / "webhooks" / f"{name}.json"
    assert (deliveries.WEBHOOKS / f"{name}.json").read_bytes() == real.read_bytes()
    assert deliveries.packaged(name) == json.loads(real.read_text())


def test_the_tests_webhook_payloads_are_the_shared_ones(shared_github: Path) -> None:
    """Every payload but the JSON schemas (1.2 MB the tests do not read)."""
    shared_webhooks = shared_github / "webhooks"
    expected = [name for name in files_under(shared_webhooks) if name.parts[0] != "schemas"]
    assert files_under(TESTS_WEBHOOKS) == expected
    for name in expected:
        assert (TESTS_WEBHOOKS / name).read_bytes() == (shared_webhooks / name).read_bytes(), name
    assert (TESTS_WEBHOOKS.parent / "README.md").read_bytes() == (shared_github / "README.md").read_bytes()
