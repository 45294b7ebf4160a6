"""A refinement round's real torch: validation failed at a line of the tree using torch, stubbed.

Where the machine running `init` lacks torch, detection leaves it stubbed, and a stub answers nothing a
validation asks of it (verl's `-torch.finfo(torch.float8_e4m3fn).max` at the import of
`verl/utils/kernel/fp8_kernel.py`, dtypes its config dataclasses are typed with). CI has torch. Where the
harness recorded a base failure, at a line of the tree's module that ran: when that module imports torch
at module level (not in a function body, not under `if TYPE_CHECKING:`), validation imported torch there,
and a failure at a line naming what that import bound is the stub's answer, not the repository's (the
module's import may not have finished: the harness's list of imported modules leaves it out then).
Then torch is made real, as the built-in policies make it: a CPU
build at the version they pin (CI's own pin is a CUDA build of gigabytes; no device is touched here), with
the limits torch needs. Where the stub answered well enough (the built-in miles and slime policies stub
torch), nothing is added: a real torch costs an install and seconds of import per suite. Read from the tree
only: nothing is run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from app.analysis.core.model import Outcome
from app.analysis.core.tree_reading import read_text
from app.analysis.starter.starter_tree import TORCH_LIMITS, Starter

# The CPU build of torch the built-in policies pin (policies/*/*.yml): validation needs its types and
# dtypes, never a device, and this version's CPU wheel installs on the Python prtriage runs on.
TORCH_REQUIREMENT = "torch==2.13.0"
WHY = ("torch: validation failed at {where} on what the stub answered, a line using the torch its module "
       "imports at its top; CI has it: a CPU build, as the built-in policies pin it")


def capture_failures(reasons: Iterable[str]) -> Iterator[Outcome]:
    """Where scripts died while capture imported the tree (`... (at path:line)`, app/sandbox/harness/
    capture.py): a stub failing there fails every suite those scripts would have launched."""
    for reason in reasons:
        found = _AT.search(reason)
        if found:
            yield Outcome("error", None, reason, found["path"], int(found["line"]))


_AT = re.compile(r"\(at (?P<path>[^\s():]+\.py):(?P<line>\d+)\)")


def real_torch(starter: Starter, root: Path, failures: Iterable[Outcome]) -> list[str]:
    """Torch made real in STARTER's harness when one of the base's FAILURES (or a capture's) is at a line
    of the tree using the torch its module imports at its top; the changes made."""
    harness = starter.policy["harness"]
    if "torch" in harness["real_packages"]:
        return []
    where = next((f"{f.path}:{f.line}" for f in failures if f.path and f.path.endswith(".py") and f.line
                  and _uses_torch_at(root / f.path, f.line)), None)
    if where is None:
        return []
    harness["real_packages"] = sorted([*harness["real_packages"], "torch"])
    harness["requirements"] = [*harness["requirements"], TORCH_REQUIREMENT]
    harness["limits"] = {**TORCH_LIMITS, **harness.get("limits", {})}
    # a real package answers its own version; the stub's stand-in no longer applies
    stubbed = harness.get("stub_attributes", {})
    for key in [k for k in stubbed if k.split(".")[0] == "torch"]:
        del stubbed[key]
    if "stub_attributes" in harness and not stubbed:
        del harness["stub_attributes"]
    starter.why["harness.real_packages"] = "; ".join(
        filter(None, [starter.why.get("harness.real_packages"), WHY.format(where=where)]))
    starter.why["harness.limits"] = "importing torch maps more than 4 GiB of address space"
    return [f"harness.real_packages += torch ({TORCH_REQUIREMENT}: the stub failed at {where})"]


def _uses_torch_at(path: Path, line: int) -> bool:
    """Whether the module at PATH imports torch at its top and its LINE names what that import bound, or
    a module-level name computed from it (`FP8_MAX = torch.finfo(FP8_DTYPE).max`, then `-FP8_MAX`)."""
    text = read_text(path)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    statements = list(module_level(tree.body))
    bound = {name for node in statements for name in _torch_names(node)}
    for node in statements if bound else []:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None \
                and bound & {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    # a module-level function or class a torch decorator made (`@torch.library.custom_op(...) def op`): its
    # stubbed result lacks what torch's has (`@op.register_fake`, torchtitan's async EP at import)
    bound |= {node.name for node in tree.body
              if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
              and any(bound & _names(decorator) for decorator in node.decorator_list)}
    lines = text.split("\n")
    at = lines[line - 1] if 0 < line <= len(lines) else ""
    return any(re.search(rf"\b{re.escape(name)}\b", at) for name in bound)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _torch_names(node: ast.AST) -> Iterator[str]:
    """The names an import statement binds from torch (`import torch.nn as nn`: nn; `import torch.nn`:
    torch; `from torch import finfo`: finfo)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == "torch":
                yield alias.asname or "torch"
    elif isinstance(node, ast.ImportFrom) and node.level == 0 \
            and (node.module or "").split(".")[0] == "torch":
        yield from (alias.asname or alias.name for alias in node.names)


def module_level(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The statements a module runs when imported: a function's body does not run, nor an `if
    TYPE_CHECKING:` block's."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.If) and _type_checking(node.test):
            yield from module_level(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from module_level(inner)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
