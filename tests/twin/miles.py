"""Builders of the miles twin: its tree at base or at a PR head, and a git repository holding them all.

The sources live in `miles_src/` with a `.txt` suffix on Python files, so that neither pytest nor ruff
takes the twin's own `tests/e2e/test_*.py` for ours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .variants import VARIANTS, edits_of

SOURCES = Path(__file__).resolve().parent / "miles_src"
TEMPLATE_SUFFIX = ".txt"

_GIT_ENV = {"GIT_AUTHOR_NAME": "miles twin", "GIT_AUTHOR_EMAIL": "twin@example.invalid",
            "GIT_COMMITTER_NAME": "miles twin", "GIT_COMMITTER_EMAIL": "twin@example.invalid",
            "GIT_AUTHOR_DATE": "2025-06-01T12:00:00+00:00", "GIT_COMMITTER_DATE": "2025-06-01T12:00:00+00:00",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _templates() -> dict[str, Path]:
    """Repo-relative path of each twin file -> its template."""
    files: dict[str, Path] = {}
    for template in sorted(SOURCES.rglob("*")):
        if template.is_file() and "__pycache__" not in template.parts:
            relative = template.relative_to(SOURCES).as_posix()
            files[relative.removesuffix(TEMPLATE_SUFFIX)] = template
    return files


def build_miles_twin(dest: Path, *, variant: str = "base") -> Path:
    """Write the twin's tree: the base (`variant="base"`) or the head of a variant. Returns `dest`."""
    edits = edits_of(variant)
    unused = {id(edit) for edit in edits}
    dest.mkdir(parents=True, exist_ok=True)
    for relative, template in _templates().items():
        text = template.read_text()
        for edit in edits:
            if edit.path == relative:
                text = edit.apply(text)
                unused.discard(id(edit))
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    if unused:
        raise ValueError(f"variant {variant!r} edits files the twin does not have")
    return dest


def base_branch(variant: str) -> str:
    """The branch a variant's head is compared against (`prtriage check --base`)."""
    return VARIANTS[variant].base


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **_GIT_ENV}, timeout=60)
    return done.stdout


def _replace_tree(repo: Path, variant: str) -> None:
    for child in repo.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    build_miles_twin(repo, variant=variant)


def _commit_variant(repo: Path, variant: str, made: set[str]) -> None:
    parent = base_branch(variant)
    if parent not in made:
        _commit_variant(repo, parent, made)
    _git(repo, "checkout", "-q", "-b", variant, parent)
    _replace_tree(repo, variant)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", VARIANTS[variant].message)
    made.add(variant)


def make_git_repo(dest: Path, variants: list[str]) -> Path:
    """A repository with the base on `main` and each variant's head on a branch named after it.

    A variant whose base is another variant (revert, harness_noise) gets that branch too.
    """
    dest.mkdir(parents=True, exist_ok=True)
    _git(dest, "init", "-q", "-b", "main")
    build_miles_twin(dest)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "miles: RL post-training on Megatron and SGLang")
    made = {"main"}
    for variant in variants:
        if variant not in made:
            _commit_variant(dest, variant, made)
    _git(dest, "checkout", "-q", "main")
    return dest


def line_of(repo: Path, rev: str, path: str, snippet: str) -> int:
    """1-based line of the only line of `path` at `rev` that contains `snippet`."""
    lines = _git(repo, "show", f"{rev}:{path}").splitlines()
    found = [number for number, line in enumerate(lines, start=1) if snippet in line]
    if len(found) != 1:
        raise ValueError(f"{path}@{rev}: {snippet!r} on lines {found}, expected exactly one")
    return found[0]
