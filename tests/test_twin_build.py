"""The miles twin builders: each variant applies, compiles, and lands on its branch with only its change."""

from __future__ import annotations

import py_compile
import subprocess
from pathlib import Path

import pytest
from twin import base_branch, build_miles_twin
from twin.variants import VARIANTS


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("variant", ["base", *VARIANTS])
def test_every_tree_builds_and_its_python_compiles(variant: str, tmp_path: Path) -> None:
    tree = build_miles_twin(tmp_path / variant, variant=variant)
    sources = sorted(tree.rglob("*.py"))
    assert len([s for s in sources if s.match("tests/e2e/*/test_*.py")]) >= 8
    for source in sources:
        py_compile.compile(str(source), cfile=str(tmp_path / "compiled.pyc"), doraise=True)
    assert not list(tree.rglob("*.txt"))  # template suffixes are gone


def test_an_unknown_variant_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="no miles twin variant"):
        build_miles_twin(tmp_path, variant="no-such-pr")


def test_each_branch_changes_only_what_its_pull_request_changes(miles_repo: Path) -> None:
    for name, variant in VARIANTS.items():
        changed = git(miles_repo, "diff", "--name-only", f"{base_branch(name)}..{name}").split()
        base_edits = VARIANTS[variant.base].edits if variant.base != "main" else ()
        assert changed == sorted({edit.path for edit in set(variant.edits) ^ set(base_edits)}), name
    assert git(miles_repo, "diff", "main", "revert") == ""  # a revert restores the base exactly
    assert git(miles_repo, "status", "--porcelain") == ""
    assert git(miles_repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
