"""The local GitHub ships copies of the shared GitHub fixtures it answers and sends with (so that `prtriage
demo` runs without them): they must stay byte for byte what the shared fixtures are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.localgithub import deliveries, shapes

SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "github"


def files_under(root: Path) -> list[Path]:
    return sorted(path.relative_to(root) for path in root.rglob("*.json"))


def test_the_rest_description_subset_is_the_shared_one() -> None:
    assert files_under(shapes.REST) == files_under(SHARED / "rest")
    for name in files_under(shapes.REST):
        assert (shapes.REST / name).read_bytes() == (SHARED / "rest" / name).read_bytes(), name


PAYLOADS = [path.with_suffix("").as_posix() for path in files_under(deliveries.WEBHOOKS)]


def test_the_demo_payload_is_packaged() -> None:
    assert "pull_request/opened" in PAYLOADS


@pytest.mark.parametrize("name", PAYLOADS)
def test_each_packaged_payload_is_a_shared_real_one(name: str) -> None:
    shared = SHARED / "webhooks" / f"{name}.json"
    assert (deliveries.WEBHOOKS / f"{name}.json").read_bytes() == shared.read_bytes()
    assert deliveries.packaged(name) == json.loads(shared.read_text())
