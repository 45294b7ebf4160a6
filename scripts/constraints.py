"""Writes constraints.txt: every package prtriage needs at run time, pinned to the version installed here.

The container image installs with these pins (`pip install -c constraints.txt .`), and so does
scripts/setup, so that the image runs what the tests ran. Run it after changing a dependency:

    .venv/bin/python scripts/constraints.py > constraints.txt
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

from packaging.requirements import Requirement

HEADER = """\
# Every package prtriage needs at run time, pinned: the image installs with them (`pip install -c
# constraints.txt .`) and so does scripts/setup. Written by scripts/constraints.py from the environment the
# tests ran in; tests/test_constraints.py checks that it covers pyproject.toml's dependencies.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str = "prtriage") -> dict[str, str]:
    """Canonical name -> installed version of every run-time dependency of ROOT, extras followed, markers
    evaluated for this interpreter and platform (the image's: Linux, the same Python minor)."""
    found: dict[str, str] = {}
    pending: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop()
        if (canonical(name), extras) in seen:
            continue
        seen.add((canonical(name), extras))
        distribution = metadata.distribution(name)
        if canonical(name) != canonical(root):
            found[canonical(name)] = distribution.version
        for line in distribution.requires or []:
            requirement = Requirement(line)
            wanted = requirement.marker is None or any(
                requirement.marker.evaluate({"extra": extra}) for extra in (extras or {""}))
            if wanted:
                pending.append((requirement.name, frozenset(requirement.extras)))
    return found


def main() -> int:
    pins = closure()
    sys.stdout.write(HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
