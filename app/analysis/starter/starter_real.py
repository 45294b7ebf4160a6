"""A refinement round's real package: a configuration parser choked on a type the harness stubbed.

The harness stubs the packages the analysis environment lacks, a stub class standing in for each of their
types. Code handed one mostly runs on; a configuration parser does not: it builds itself from its config
classes' field types, and a stub's is none it knows. torchtitan from a plain install: tyro, real, failed
every suite at `tyro.cli()` ("Could not create CLI parser from the provided type. • Type
typing.Tuple[typing.Any, ...] with struct-type values requires a default value"), its data loader's config
typing a field `grain.ReadOptions`, grain stubbed; pydantic says "Unable to generate pydantic-core schema for
<stub grain.ReadOptions>". CI installs the package with the project, so where the tree's dependency files ask
for it, it is made real at the tree's pin.

Which package: the stub the error names (a stub's repr is `<stub module.Name>`, app/sandbox/harness/
stubs.py), else, where the parser's message names none (tyro's does not), every package the tree's config
classes (dataclasses, pydantic models) type a field with, stubbed here, that the dependency files pin
exactly: a guess from the tree, each one an install; the next round's health is the judge. Read from the
tree only: nothing is run.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from app.analysis.core.model import Outcome
from app.analysis.core.tree_reading import Module, read_modules
from app.analysis.starter.starter_torch import module_level
from app.analysis.starter.starter_tree import Starter, declared, is_test, pinned_version

# What a configuration parser says when it cannot build itself from a type: tyro's parser, pydantic's schema,
# OmegaConf's structured config.
PARSER_CHOKED = re.compile(r"Could not create CLI parser|Invalid input to tyro\.cli|pydantic-core schema"
                           r"|arbitrary_types_allowed|Unsupported value type|Unexpected type annotation")
_STUB = re.compile(r"<stub ([A-Za-z_]\w*)")
# A config class: made by a dataclass decorator (dataclasses', pydantic's, attrs' `define`), or a pydantic
# model or settings class.
_CONFIG_DECORATOR = re.compile(r"dataclass|^(?:attr|attrs)\.(?:s|define|frozen)$|^define$")
_CONFIG_BASE = re.compile(r"(?:^|\.)(?:BaseModel|BaseSettings)$")
_CONFIG_CUES = ("dataclass", "BaseModel", "BaseSettings", "@define", "@attr")  # the modules worth parsing


def real_config_types(starter: Starter, root: Path, failures: Iterable[Outcome]) -> list[str]:
    """Packages made real in STARTER's harness where one of the base's FAILURES is a configuration parser
    choking on a type: the package of the stub the error names, else those the tree's config classes type
    their fields with (see the module's doc); the changes made."""
    harness = starter.policy["harness"]
    changes: list[str] = []
    for failure in failures:
        message = f"{failure.exception or ''}: {failure.message or ''}"
        if not PARSER_CHOKED.search(message):
            continue
        named = {name: "the error names its stub" for name in _STUB.findall(message)}
        wanted = named or _field_types(root, set(harness["real_packages"]))
        for name, why in wanted.items():
            version = pinned_version(root, name, exact=True)
            if name in harness["real_packages"] or not declared(root, name) or (not named and not version):
                continue
            harness["real_packages"] = sorted([*harness["real_packages"], name])
            harness["requirements"] = [*harness["requirements"], f"{name}=={version}" if version else name]
            starter.why["harness.real_packages"] = "; ".join(filter(None, [
                starter.why.get("harness.real_packages"),
                f"{name}: a configuration parser failed on its stubbed type ({why}), and the tree's "
                "dependency files ask for it"]))
            changes.append(f"harness.real_packages += {name} (the configuration parser failed at "
                           f"{failure.path}:{failure.line} on a stubbed type: {why})")
    return changes


def _field_types(root: Path, real: set[str]) -> dict[str, str]:
    """The packages, neither the tree's nor the standard library's nor real, whose types the tree's config
    classes annotate their fields with: each with the first field found (`path:line`)."""
    modules = read_modules(root, lambda text: any(cue in text for cue in _CONFIG_CUES))
    local = {name.split(".")[0] for name in modules} | {p.name for p in root.iterdir() if p.is_dir()} \
        | {p.stem for p in root.glob("*.py")}
    found: dict[str, str] = {}
    for module in modules.values():
        if is_test(module):
            continue
        bound = _imported_names(module)
        for node in _fields(module.tree):
            for name in _annotation_names(node.annotation):
                top = bound.get(name)
                if top and top not in local | real and top not in sys.stdlib_module_names:
                    found.setdefault(top, f"{module.path}:{node.lineno}")
    return found


def _imported_names(module: Module) -> dict[str, str]:
    """The names the module's imports bind when it is imported, each to the top-level package it came from
    (`import grain.python as grain`: grain; `from grain.python import ReadOptions`: ReadOptions)."""
    bound: dict[str, str] = {}
    for node in module_level(module.tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                bound[alias.asname or alias.name] = node.module.split(".")[0]
    return bound


def _fields(tree: ast.Module) -> Iterator[ast.AnnAssign]:
    """The annotated fields of every config class of the module, nested ones too (`Loader.Config`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and _config_class(node):
            yield from (item for item in node.body if isinstance(item, ast.AnnAssign))


def _config_class(node: ast.ClassDef) -> bool:
    decorators = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
    return any(_CONFIG_DECORATOR.search(d) for d in decorators) \
        or any(_CONFIG_BASE.search(ast.unparse(base)) for base in node.bases)


def _annotation_names(annotation: ast.expr) -> Iterator[str]:
    """The names an annotation starts from, a quoted one's too (`Annotated[grain.ReadOptions, ...]`:
    Annotated, grain)."""
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                yield from _annotation_names(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                continue
