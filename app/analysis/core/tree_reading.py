"""A repository's tree read without running anything of it: a file's text within a bound, its Python modules
parsed when first asked. What `prtriage init`'s detections read, in `starter/` and beside each kind of matrix
source (`sources/`)."""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from app.sandbox.harness.common import import_roots

MAX_FILE_BYTES = 2_000_000  # a generated or vendored file is not where a validator lives
SKIP_DIRS = frozenset({".git", ".github", "docs", "doc", "third_party", "3rdparty", "node_modules", "build",
                       "dist", ".venv", "venv", "__pycache__", "examples"})


@dataclass(frozen=True)
class Module:
    """One Python file of the tree; parsed when first asked (a tree holds thousands)."""

    name: str  # dotted
    path: str  # repo-relative
    source: str

    @functools.cached_property
    def tree(self) -> ast.Module:
        try:
            return ast.parse(self.source)
        except (SyntaxError, ValueError):
            return ast.Module(body=[], type_ignores=[])

    def functions(self) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        return {node.name: node for node in self.tree.body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}

    def imported(self) -> Iterator[tuple[str, str]]:
        """(module, name) of every `from module import name` anywhere in the file."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                yield from ((node.module, alias.name) for alias in node.names)


def read_modules(root: Path, wanted: Callable[[str], bool]) -> dict[str, Module]:
    """The tree's Python files whose text WANTED accepts, by the dotted name CI imports each under."""
    found: dict[str, Module] = {}
    prefixes = import_prefixes(root)
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if any(part in SKIP_DIRS or part.startswith(".") for part in relative.parts[:-1]):
            continue
        try:
            if path.stat().st_size > MAX_FILE_BYTES or path.is_symlink():
                continue
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if not wanted(text):
            continue
        name = module_name(relative.as_posix(), prefixes)
        found[name] = Module(name, relative.as_posix(), text)
    return found


def import_prefixes(root: Path) -> list[str]:
    """The tree's directories CI imports its packages from, repo-relative and deepest first ("" for the
    root): the harness's import roots (a src layout's `src/`, a uv workspace member's), less one that is a
    package itself (`src/__init__.py`: imported as `src.x`)."""
    repo = os.path.abspath(root)
    top = repo.rstrip("/") + "/"
    found = [path[len(top):].rstrip("/") + "/" for path in import_roots(repo) if path.startswith(top)
             and not Path(path, "__init__.py").exists()]
    return [*sorted(found, key=len, reverse=True), ""]


def module_name(path: str, prefixes: list[str]) -> str:
    """The dotted name a repo-relative PATH is imported under: relative to the deepest of PREFIXES
    (import_prefixes) holding it (`src/prime_rl/x.py` -> `prime_rl.x` in a src layout)."""
    under = next((prefix for prefix in prefixes if path.startswith(prefix)), "")
    parts = PurePosixPath(path[len(under):]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1:] == ("__init__",) else parts)


def tree_package(root: Path, top: str, prefixes: list[str]) -> bool:
    """Whether the tree holds the top-level package or module TOP at one of its import PREFIXES."""
    return any((root / prefix / top).is_dir() or (root / prefix / f"{top}.py").is_file()
               for prefix in prefixes)


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace") if path.stat().st_size <= MAX_FILE_BYTES else ""
    except OSError:
        return ""
