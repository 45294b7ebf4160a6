"""A refinement round's answer to a base failure saying a package CI installs is not installed.

A starter leaves optional imports of absent packages absent (`harness.optional_imports`' default): `try:
import transformer_engine` takes the not-installed branch here, as on a host without the package. Where CI's
image has the package, that branch is the harness's, not CI's: Megatron-LM's Bert entries fail at import
with "Transformer Engine is not installed. Please use local Bert layer spec instead.", which no CI run
sees. When a base failure's message says a package is missing ("X is not installed", "requires X", "X not
available", "No module named 'x'", "please install X"), and X, its words joined as a distribution's name
is (spaces, dashes, underscores and case aside: "Transformer Engine" is `transformer-engine` is
`transformer_engine`), is a package the tree's dependency files ask for (what CI installs with the project)
or its workflows install (torchtitan's torchao: `python -m pip install --pre torchao`, in no dependency
file; `starter_tree.declared`) and the tree imports, absent here: CI has it. It goes to `harness.ci_has`
(its optional imports stubbed, the branch CI takes), with its stub's `__version__` at the tree's pin, else
the one the workflows' install commands agree on (version checks follow the import). Read from the tree
only: nothing is run.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from app.analysis.core.model import Outcome
from app.analysis.core.tree_reading import read_modules
from app.analysis.starter.starter_tree import (
    Starter,
    declared,
    import_names,
    in_dependency_files,
    installed,
    pinned_version,
)

_WORD = r"(?!(?:is|are|not|package|library|module)\b)[A-Za-z][\w.+-]*"
# A name of up to three words before or after what says it is missing.
_BEFORE = rf"((?:{_WORD}[ ]){{0,2}}{_WORD})"
_AFTER = rf"((?:{_WORD})(?:[ ]{_WORD}){{0,2}})"
_MISSING_AFTER = re.compile(  # the name ends right before: "Transformer Engine is not installed"
    rf"['\"`]?{_BEFORE}['\"`]? (?:package |library |module )?(?:is |are )?(?:not (?:installed|available|"
    r"found)|unavailable|(?:is |are )?required|missing)", re.I)
_MISSING_BEFORE = re.compile(  # the name starts right after: "requires transformer_engine"
    rf"(?:requires?:? |required: |install |No module named |missing (?:package |module )?)['\"`]?{_AFTER}",
    re.I)
WHY = ("packages the tree's dependency files ask for (CI installs them with the project), or its workflows "
       "install, that a base failure said were not installed: their optional imports are stubbed, the branch "
       "CI takes")


def ci_has_declared(starter: Starter, root: Path, failures: Iterable[Outcome]) -> list[str]:
    """`harness.ci_has` and each one's stub `__version__`, for the packages FAILURES say are missing that
    the tree declares and imports and this machine lacks; the changes made."""
    harness = starter.policy["harness"]
    has = list(harness.get("ci_has", []))
    imported: set[str] | None = None
    changes = []
    for failure in failures:
        for name in _named(f"{failure.exception or ''}: {failure.message or ''}"):
            if imported is None:
                imported = _tree_imports(root)
            found = _declared_import(root, name, imported)
            if found is None or found[1] in has or found[1] in harness["real_packages"]:
                continue
            distribution, module = found
            has.append(module)
            asked = "the tree's dependency files ask for it" if in_dependency_files(root, distribution) else \
                "CI's workflows install it"
            changes.append(f"harness.ci_has += {module} ({distribution}: {_where(failure)} says it is not "
                           f"installed; {asked})")
            changes += _stub_version(starter, root, distribution, module)
    if changes:
        harness["ci_has"] = has
        starter.why["harness.ci_has"] = WHY
    return changes


def _named(text: str) -> Iterator[str]:
    """The names TEXT may say are missing, as distributions' names (words joined by dashes), the longest
    last: "Transformer Engine is not installed" gives engine, transformer-engine."""
    for match in _MISSING_AFTER.finditer(text):
        words = _words(match.group(1))
        yield from ("-".join(words[start:]) for start in range(len(words) - 1, -1, -1))
    for match in _MISSING_BEFORE.finditer(text):
        words = _words(match.group(1))
        yield from ("-".join(words[:end]) for end in range(1, len(words) + 1))


def _words(phrase: str) -> list[str]:
    return [word.strip(".,:;'\"`").split(".")[0] for word in phrase.split() if word.strip(".,:;'\"`")]


def _declared_import(root: Path, name: str, imported: set[str]) -> tuple[str, str] | None:
    """(the distribution, its import name) when NAME is a distribution the tree's dependency files ask
    for, whose name is (case, dashes and underscores aside) a top-level package the tree imports and this
    machine lacks."""
    if not re.fullmatch(r"[A-Za-z][\w-]*", name) or len(_key(name)) < 3:
        return None
    module = next((m for m in sorted(imported) if _key(m) == _key(name)), None)
    if module is None or installed(module) or (root / module).exists() or not declared(root, name):
        return None
    return name.lower(), module


def _key(name: str) -> str:
    return re.sub(r"[-_. ]", "", name).lower()


def _tree_imports(root: Path) -> set[str]:
    """The third-party top-level packages the tree's modules import (its own packages left out)."""
    modules = read_modules(root, lambda text: True)
    local = {name.split(".")[0] for name in modules}
    return {name.split(".")[0] for m in modules.values() for node in ast.walk(m.tree)
            for name in import_names(node)} - local - set(sys.stdlib_module_names)


def _stub_version(starter: Starter, root: Path, distribution: str, module: str) -> list[str]:
    attributes = starter.policy["harness"].setdefault("stub_attributes", {})
    key = f"{module}.__version__"
    version = None if key in attributes else \
        pinned_version(root, distribution, exact=True, ci_installs=True) or \
        pinned_version(root, distribution, ci_installs=True)
    if version is None:
        if not attributes:
            del starter.policy["harness"]["stub_attributes"]
        return []
    attributes[key] = version
    return [f"harness.stub_attributes.{key} = {version!r}"]


def _where(failure: Outcome) -> str:
    return f"{failure.path}:{failure.line}" if failure.path and failure.line else "a base failure"
