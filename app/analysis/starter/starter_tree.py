"""The starter policy being built, and what `prtriage init` asks of a tree's modules beyond reading them
(`core/tree_reading.py`): their imports, the packages installed here, the versions CI pins (shared by the
detections of app/analysis/starter/starter.py, starter_shapes.py and starter_hydra.py)."""

from __future__ import annotations

import ast
import copy
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.analysis.core.tree_reading import Module, read_text
from app.analysis.starter.starter_ci_installs import installed_by_ci, normalized

# With torch real: importing it maps more than 4 GiB of address space, and takes tens of seconds on a
# loaded host.
TORCH_LIMITS = {"memory_mb": 8192, "suite_seconds": 120}


@dataclass
class Starter:
    """A starter policy and, for each key path ("validation.entry", "matrix.sources[0]" ...), why."""

    policy: dict[str, Any]
    why: dict[str, str] = field(default_factory=dict)
    rounds: list[list[str]] = field(default_factory=list)  # what each refinement round changed

    def copy(self) -> Starter:
        return Starter(copy.deepcopy(self.policy), dict(self.why), [list(r) for r in self.rounds])


class NoValidator(Exception):
    """The tree has no command-line validator this detection knows."""


def imported_modules(module: Module, modules: dict[str, Module]) -> list[Module]:
    """The tree's modules MODULE imports (at the top or inside functions), of those detection parsed."""
    names = {name for node in ast.walk(module.tree) for name in import_names(node)}
    names |= {f"{imported}.{name}" for imported, name in module.imported()}
    return [modules[name] for name in sorted(names) if name in modules and name != module.name]


def is_test(module: Module) -> bool:
    return module.path.startswith(("tests/", "test/")) or "/tests/" in module.path


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


def pinned_version(root: Path, distribution: str, *, exact: bool = False,
                   ci_installs: bool = False) -> str | None:
    """The version of DISTRIBUTION the tree's dependency files give CI, else (with CI_INSTALLS) the one
    its workflows' install commands agree on (`pip install x==2.1`): a lock file's, else a pin `==X`, else
    (unless EXACT) the highest allowed `<=X`, else the lowest `>=X` (a local part `+abc` dropped). Not
    CI_INSTALLS for the analysis environment's requirements: a workflow may install from an index of its
    own (`torch==2.14.0` from a release candidates' index), which pip here would not find."""
    name = "[-_.]".join(re.escape(part) for part in re.split(r"[-_.]", distribution))
    for pattern in DEPENDENCY_FILES:
        for path in sorted(root.glob(pattern)):
            text = read_text(path)
            locked = re.search(rf'^name = "{name}"\s*\nversion = "([^"]+)"', text, re.M | re.I)
            if locked:
                return locked.group(1).split("+")[0]
            pins = rf"(?<![\w-]){name}\s*(?:\[[^\]]*\])?\s*((?:[<>=!~]=?\s*[\w.*]+\s*,?\s*)+)"
            for specifiers in re.findall(pins, text, re.I):
                version = _pin(specifiers, exact)
                if version:
                    return version
    return _pin(installed_by_ci(root).get(normalized(distribution), ""), exact) if ci_installs else None


def _pin(specifiers: str, exact: bool) -> str | None:
    found: dict[str, str] = dict(re.findall(r"(==|<=|>=)\s*([\w.]+)", specifiers))
    for operator in ("==",) if exact else ("==", "<=", ">="):
        if operator in found:
            return found[operator].split("+")[0]
    return None


def declared(root: Path, distribution: str) -> bool:
    """Whether CI installs DISTRIBUTION: the tree's dependency files ask for it, with the project, or its
    workflows' shell steps install it beside it (`pip install --pre torchao`: starter_ci_installs)."""
    return in_dependency_files(root, distribution) or normalized(distribution) in installed_by_ci(root)


def in_dependency_files(root: Path, distribution: str) -> bool:
    """Whether the tree's dependency files ask for DISTRIBUTION (a requirement line, a quoted entry of
    pyproject's lists, a lock's package)."""
    name = "[-_.]".join(re.escape(part) for part in re.split(r"[-_.]", distribution))
    entry = re.compile(rf'(?:^\s*|["\']|^name = "){name}(?=\s*(?:\[|[<>=!~;]|["\']|$))', re.M | re.I)
    return any(entry.search(read_text(path)) for pattern in DEPENDENCY_FILES for path in root.glob(pattern))


REQUIREMENTS_WHY = ("the distributions of the real packages, installed by prtriage into the analysis "
                    "environment the sandbox runs: the tree's pinned versions, else this machine's")


# The configuration stack a launch composes and checks its configuration with (and compares versions with):
# run to its training boundary, a launch's validation is theirs, so they are real whether or not the machine
# running `init` has them (import name -> distribution).
CONFIG_STACK = {"hydra": "hydra-core", "omegaconf": "omegaconf", "packaging": "packaging", "yaml": "PyYAML",
                "pydantic": "pydantic", "tyro": "tyro"}


def config_stack(modules: Iterable[Module]) -> list[str]:
    """The CONFIG_STACK packages the tree's (non-test) modules import."""
    imported = {name.split(".")[0] for m in modules if not is_test(m)
                for node in ast.walk(m.tree) for name in import_names(node)}
    return sorted(imported & set(CONFIG_STACK))


def requirements_for(real: list[str], root: Path) -> list[str]:
    """The distributions providing the import packages REAL, as requirements of the analysis environment:
    pinned at the version the tree's dependency files fix for CI (a lock file's, or `==X`), else at the
    version this machine has (a CONFIG_STACK package this machine lacks: at the tree's version, else
    unpinned)."""
    providers = importlib.metadata.packages_distributions()
    found: list[str] = []
    for name in real:
        if not providers.get(name) and name in CONFIG_STACK:
            distribution = CONFIG_STACK[name]
            version = pinned_version(root, distribution, exact=True)
            found.append(f"{distribution}=={version}" if version else distribution)
            continue
        for distribution in sorted(set(providers.get(name, []))):
            version = pinned_version(root, distribution, exact=True)
            if version is None:
                try:
                    version = importlib.metadata.version(distribution)
                except importlib.metadata.PackageNotFoundError:
                    continue
            found.append(f"{distribution}=={version}")
    return list(dict.fromkeys(found))


def packages_harness(root: Path, used: list[Module], modules: dict[str, Module],
                     stack_from: Iterable[Module] = ()) -> dict[str, Any]:
    """The harness's packages: the real ones the USED modules import that this machine has, and the
    configuration stack they (and STACK_FROM, modules a launch may import beside them) import whether or
    not it has it (a stubbed Hydra or pydantic validates nothing, and what runs `init` decides nothing of
    CI's environment), with the requirements that install them; any other missing module stubbed."""
    real = sorted({*real_packages(used, modules), *config_stack([*used, *stack_from])})
    return {"stub_missing_modules": True, "real_packages": real, "requirements": requirements_for(real, root)}


def real_packages(used: list[Module], modules: dict[str, Module]) -> list[str]:
    imported = {name.split(".")[0] for m in used for node in ast.walk(m.tree) for name in import_names(node)}
    local = {name.split(".")[0] for name in modules}
    return sorted(name for name in imported - local - set(sys.stdlib_module_names)
                  if name and installed(name))


def stub_versions(root: Path, modules: Iterable[Module], real: list[str]) -> dict[str, str]:
    """`name.__version__` for each package the tree's (non-test) modules import that is absent here and
    not made real, and whose version the tree's dependency files give CI (an exact pin first: a lock or an
    override beats a floor)."""
    modules = list(modules)
    local = {m.name.split(".")[0] for m in modules}
    imported = {name.split(".")[0] for m in modules if not is_test(m)
                for node in ast.walk(m.tree) for name in import_names(node)}
    versions: dict[str, str] = {}
    for name in sorted(imported - local - set(sys.stdlib_module_names) - set(real)):
        if not name or installed(name):
            continue
        version = pinned_version(root, name, exact=True) or pinned_version(root, name)
        if version:
            versions[f"{name}.__version__"] = version
    return versions
