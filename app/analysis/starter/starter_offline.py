"""A refinement round's answer to validation that asks a server: the sandbox has no network.

slime's validation asks each external SGLang server its `--rollout-external-engine-addrs` name for its
topology over HTTP (CI starts the servers first); in the sandbox the request fails and the suite is a base
error. The function that asked (the innermost function of the tree around the error's line) then answers
as a server with no facts would: the empty value of what it returns, read from its annotation (`-> dict`:
`{}`, `-> list`: `[]`) or from a `return <response>.json()` (`{}`). One whose answer cannot be told is left
for the user, in the health report. Read only from the tree: nothing is run.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from app.analysis.core.model import Outcome
from app.analysis.core.tree_reading import import_prefixes, module_name
from app.analysis.verdict.doctor import NETWORK_CUES

EMPTY_BY_ANNOTATION: dict[str, Any] = {
    "dict": {}, "Dict": {}, "Mapping": {}, "MutableMapping": {}, "list": [], "List": [], "Sequence": [],
    "tuple": [], "Tuple": [], "set": [], "str": "", "None": None}
MAX_SOURCE_BYTES = 2_000_000

Function = ast.FunctionDef | ast.AsyncFunctionDef


def offline_answer(error: Outcome, root: Path) -> tuple[dict[str, Any], str] | None:
    """The `validation.replace` item answering for the function that asked a server, and why; None when
    ERROR is no network failure in the tree or its function's answer cannot be told."""
    message = f"{error.exception or ''}: {error.message or ''}"
    if not error.path or not error.line or not any(cue in message for cue in NETWORK_CUES):
        return None
    tree = _parse(root / error.path)
    found = _enclosing(tree, error.line) if tree is not None else None
    if found is None:
        return None
    qualname, function = found
    empty = _empty_answer(function)
    if empty is None:
        return None
    target = f"{module_name(error.path, import_prefixes(root))}:{qualname}"
    reason = (f"{target} asks a server over the network ({message.strip()[:120]}...), which the sandbox "
              f"does not have: it answers {empty[0]!r}, a server with no facts")
    return {"target": target, "with": "return_value", "value": empty[0], "only_if_missing": False}, reason


def _parse(path: Path) -> ast.Module | None:
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return None
        return ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def _enclosing(tree: ast.Module, line: int) -> tuple[str, Function] | None:
    """The innermost module-level function or class method holding LINE, with its qualified name (a
    function nested in another is no target a replacement can reach: its outer one is)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _holds(node, line):
            return node.name, node
        if isinstance(node, ast.ClassDef) and _holds(node, line):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _holds(item, line) \
                        and not _is_bound_method(item):
                    return f"{node.name}.{item.name}", item
    return None


def _holds(node: ast.stmt, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def _is_bound_method(function: Function) -> bool:
    """A method taking `self` reads its instance: a return_value stand-in (a staticmethod) would not fit
    where the instance's state matters; only static and class-level helpers are answered."""
    decorators = {d.id for d in function.decorator_list if isinstance(d, ast.Name)}
    arguments = function.args.posonlyargs + function.args.args
    return "staticmethod" not in decorators and bool(arguments) and arguments[0].arg in ("self", "cls")


def _empty_answer(function: Function) -> tuple[Any] | None:
    """(the empty value,) of what FUNCTION returns, or None when it cannot be told."""
    annotation = function.returns
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    name = annotation.attr if isinstance(annotation, ast.Attribute) else \
        annotation.id if isinstance(annotation, ast.Name) else \
        "None" if isinstance(annotation, ast.Constant) and annotation.value is None else None
    if name in EMPTY_BY_ANNOTATION:
        return (EMPTY_BY_ANNOTATION[name],)
    if annotation is None and any(_returns_json(node) for node in ast.walk(function)):
        return ({},)
    return None


def _returns_json(node: ast.AST) -> bool:
    return isinstance(node, ast.Return) and isinstance(node.value, ast.Call) \
        and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "json"

