"""constraints.txt pins every package prtriage needs at run time, so the image runs what the tests ran."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def pins() -> dict[str, str]:
    pinned: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, equals, version = line.partition("==")
            assert equals and re.fullmatch(r"[\w.+!]+", version), f"not a pin: {line!r}"
            pinned[canonical(name)] = version
    return pinned


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("constraints", ROOT / "scripts" / "constraints.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_dependency_of_pyproject_is_pinned_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = pins()
    for line in project["dependencies"]:
        requirement = Requirement(line)
        name = canonical(requirement.name)
        assert name in pinned, f"{requirement.name} is not in constraints.txt (scripts/constraints.py)"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {name}=={pinned[name]}, outside pyproject.toml's {requirement}")


def test_what_the_dependencies_need_is_pinned_too() -> None:
    needed = generator().closure()
    assert {"pydantic-core", "starlette", "cryptography"} <= set(needed)  # through pydantic, fastapi, PyJWT
    missing = sorted(set(needed) - set(pins()))
    assert missing == [], f"pin these in constraints.txt (scripts/constraints.py): {missing}"


def test_the_image_and_the_development_setup_install_with_the_pins() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^COPY .*\bconstraints\.txt\b", dockerfile, re.MULTILINE)
    assert re.search(r"pip install .*-c constraints\.txt \.", dockerfile)
    assert "-c constraints.txt" in (ROOT / "scripts" / "setup").read_text()


def test_the_images_prebuild_argument_names_built_in_policies() -> None:
    """The Dockerfile's PREBUILD_POLICIES loop finds a built-in policy's file by owner/name, and nothing for a
    name that is not one (the loop then stops the build)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    [one_liner] = re.findall(r"python -c '([^']+)' \"\$slug\"", dockerfile)

    def found(slug: str) -> str:
        done = subprocess.run([sys.executable, "-c", one_liner, slug], capture_output=True, text=True,
                              check=True)
        return done.stdout.strip()

    assert Path(found("radixark/miles")).read_text() == (ROOT / "policies/radixark/miles.yml").read_text()
    assert found("nobody/nothing") == ""
    assert "prtriage env build --policy \"$policy\"" in dockerfile
