"""The tree as `prtriage init` reads it: its Python modules, parsed when asked, and the starter policy being
built (shared by the detections of app/analysis/starter/starter.py, starter_shapes.py and
starter_hydra.py)."""

from __future__ import annotations

import ast
import copy
import functools
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# With torch real: importing it maps more than 4 GiB of address space, and takes tens of seconds on a
# loaded host.
TORCH_LIMITS = {"memory_mb": 8192, "suite_seconds": 120}
MAX_FILE_BYTES = 2_000_000  # a generated or vendored file is not where a validator lives
SKIP_DIRS = frozenset({".git", ".github", "docs", "doc", "third_party", "3rdparty", "node_modules", "build",
                       "dist", ".venv", "venv", "__pycache__", "examples"})


@dataclass
class Starter:
    """A starter policy and, for each key path ("validation.entry", "matrix.sources[0]" ...), why."""

    policy: dict[str, Any]
    why: dict[str, str] = field(default_factory=dict)
    rounds: list[list[str]] = field(default_factory=list)  # what each refinement round changed

    def copy(self) -> Starter:
        return Starter(copy.deepcopy(self.policy), dict(self.why), [list(r) for r in self.rounds])


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



class NoValidator(Exception):
    """The tree has no command-line validator this detection knows."""



def read_modules(root: Path, wanted: Callable[[str], bool]) -> dict[str, Module]:
    found: dict[str, Module] = {}
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
        parts = relative.with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = Module(name, relative.as_posix(), text)
    return found


def imported_modules(module: Module, modules: dict[str, Module]) -> list[Module]:
    """The tree's modules MODULE imports (at the top or inside functions), of those detection parsed."""
    names = {name for node in ast.walk(module.tree) for name in import_names(node)}
    names |= {f"{imported}.{name}" for imported, name in module.imported()}
    return [modules[name] for name in sorted(names) if name in modules and name != module.name]


def is_test(module: Module) -> bool:
    return module.path.startswith(("tests/", "test/")) or "/tests/" in module.path



def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace") if path.stat().st_size <= MAX_FILE_BYTES else ""
    except OSError:
        return ""



def import_names(node: ast.AST) -> Iterable[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module]
    return []


def installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


DEPENDENCY_FILES = ("uv.lock", "pyproject.toml", "setup.py", "requirements*.txt", "requirements/*.txt")


def pinned_version(root: Path, distribution: str) -> str | None:
    """The version of DISTRIBUTION the tree's dependency files give CI: a lock file's, else a pin `==X`,
    else the highest allowed `<=X`, else the lowest `>=X` (a local part `+abc` dropped)."""
    name = "[-_.]".join(re.escape(part) for part in re.split(r"[-_.]", distribution))
    for pattern in DEPENDENCY_FILES:
        for path in sorted(root.glob(pattern)):
            text = read_text(path)
            locked = re.search(rf'^name = "{name}"\s*\nversion = "([^"]+)"', text, re.M | re.I)
            if locked:
                return locked.group(1).split("+")[0]
            pins = rf"(?<![\w-]){name}\s*(?:\[[^\]]*\])?\s*((?:[<>=!~]=?\s*[\w.*]+\s*,?\s*)+)"
            for specifiers in re.findall(pins, text, re.I):
                found: dict[str, str] = dict(re.findall(r"(==|<=|>=)\s*([\w.]+)", specifiers))
                for operator in ("==", "<=", ">="):
                    if operator in found:
                        return found[operator].split("+")[0]
    return None


def real_packages(used: list[Module], modules: dict[str, Module]) -> list[str]:
    imported = {name.split(".")[0] for m in used for node in ast.walk(m.tree) for name in import_names(node)}
    local = {name.split(".")[0] for name in modules}
    return sorted(name for name in imported - local - set(sys.stdlib_module_names)
                  if name and installed(name))
