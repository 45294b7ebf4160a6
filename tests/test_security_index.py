"""docs/security.md names, for every attack tried, the tests that hold it: each must exist, and every
numbered attack must have one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "security.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def _rows() -> list[str]:
    return [line for line in PAGE.read_text().splitlines() if line.startswith("| ") and "`tests/" in line]


def test_every_test_the_page_names_exists() -> None:
    named = [match.groups() for row in _rows() for match in NAMED.finditer(row)]
    assert len(named) >= 40
    missing = [f"{path}::{name}" for path, name in named
               if not re.search(rf"^(?:async )?def {name}\(", (ROOT / path).read_text(), re.M)]
    assert missing == []


def test_every_attack_that_once_succeeded_has_a_test() -> None:
    numbers = [row.split("|")[1].strip() for row in _rows() if re.match(r"\| \d", row)]
    assert numbers == ["1", "2", "3", "4", "5", "6", "7", "8", "9a", "9b", "9c", "9d", "10", "11", "12", "13",
                       "14a", "14b", "15", "16", "17", "18", "19", "20"]
