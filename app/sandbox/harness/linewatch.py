"""Which of a revision's changed lines ran: the statements holding them say so; nothing else pays.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
The files the job traces are compiled, when they are imported, with one call inserted before each statement
that holds a changed line: `__prtriage_hit__.add(key)`, which adds the statement's key to `hits`. A global
tracer (sys.settrace) would instead run a Python callback on every call of every function.

A changed line counts as run when the statement it belongs to runs: any line of a simple statement, the
header of a compound one (decorators included). The inserted calls carry the location of the statement they
precede and nothing else moves, so line numbers, tracebacks and record mode's rewrites stay the file's.
The name resolves through builtins, so the repository's module namespaces stay as they are. Only imports
are instrumented: a traced file run some other way (runpy, exec of its text) reports no hits.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence

HIT = "__prtriage_hit__"

hits: set[int] = set()  # keys of the traced statements that ran since the last reset()
_holds: list[tuple[str, frozenset[int]]] = []  # key -> (repo-relative path, changed lines it holds)


def install(repo: str, trace: dict[str, list[int]]) -> None:
    """Trace `trace` ({repo-relative path: changed lines}): must run before repository code imports them."""
    prefix = os.path.abspath(repo).rstrip("/") + "/"
    files = {prefix + path: (path, frozenset(lines)) for path, lines in trace.items() if lines}
    if not files:
        return
    setattr(builtins, HIT, hits)
    finder = _Finder(files)
    position = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
                    len(sys.meta_path))
    sys.meta_path.insert(position, finder)  # after stubs' forced modules, before the regular search


def reset() -> None:
    hits.clear()  # the set the instrumented modules hold: emptied, never replaced


def lines_hit() -> dict[str, list[int]]:
    """{repo-relative path: changed lines whose statement ran} since the last reset()."""
    found: dict[str, set[int]] = {}
    for key in hits:
        path, lines = _holds[key]
        found.setdefault(path, set()).update(lines)
    return {path: sorted(lines) for path, lines in found.items()}


def instrument(tree: ast.Module, path: str, changed: frozenset[int]) -> ast.Module:
    """`tree` with a hit call before each statement holding a changed line (in place, and returned)."""
    _instrument_bodies(tree, path, sorted(changed))
    return tree


def _instrument_bodies(node: ast.AST, path: str, changed: list[int]) -> None:
    """Instrument the statement lists of `node` (a module, a statement, an except or case clause)."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        value = getattr(node, field, None)
        if not isinstance(value, list):
            continue
        if field in ("handlers", "cases"):  # clauses are no statements, their bodies hold statements
            for clause in value:
                _instrument_bodies(clause, path, changed)
        elif value and isinstance(value[0], ast.stmt):
            setattr(node, field, [s for statement in value for s in _with_hit(statement, path, changed)])


def _with_hit(statement: ast.stmt, path: str, changed: list[int]) -> list[ast.stmt]:
    own = own_lines(statement)
    next_changed = bisect.bisect_left(changed, own.start)
    if next_changed == len(changed) or changed[next_changed] > (statement.end_lineno or statement.lineno):
        return [statement]  # no changed line inside: nothing below it to instrument either
    _instrument_bodies(statement, path, changed)
    held = frozenset(changed[next_changed:bisect.bisect_left(changed, own.stop)])
    if not held or _never_runs(statement):
        return [statement]
    _holds.append((path, held))
    call = ast.Call(func=ast.Attribute(ast.Name(HIT, ast.Load()), "add", ast.Load()),
                    args=[ast.Constant(len(_holds) - 1)], keywords=[])
    hit = ast.copy_location(ast.Expr(call), statement)
    ast.fix_missing_locations(hit)  # the call's own nodes take the statement's location too
    return [hit, statement]


def _never_runs(statement: ast.stmt) -> bool:
    """A docstring or bare constant compiles to nothing, and a call before it would end a docstring's role;
    future imports must stay first."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True
    return isinstance(statement, ast.ImportFrom) and statement.module == "__future__"


def own_lines(statement: ast.stmt) -> range:
    """A simple statement's lines; a compound statement's header lines (decorators included)."""
    first = statement.lineno
    decorators = getattr(statement, "decorator_list", None)
    if decorators:
        first = min(first, *(d.lineno for d in decorators))
    body = getattr(statement, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return range(first, max(first, body[0].lineno - 1) + 1)
    return range(first, (statement.end_lineno or statement.lineno) + 1)


class _Finder(importlib.abc.MetaPathFinder):
    """Hands the traced files to the instrumenting loader; other modules go on to the regular search."""

    def __init__(self, files: dict[str, tuple[str, frozenset[int]]]) -> None:
        self.files = files
        # A module's file is <last name part>.py or <last name part>/__init__.py: other names cannot be
        # traced, and skip the second search of the path below.
        self.names = {os.path.basename(os.path.dirname(f)) if os.path.basename(f) == "__init__.py"
                      else os.path.basename(f)[:-3] for f in files}

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.rpartition(".")[2] not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        origin = os.path.abspath(spec.origin) if spec is not None and spec.origin else None
        if spec is None or origin not in self.files \
                or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        spec.loader = _Loader(fullname, spec.origin or origin, *self.files[origin])
        return spec


class _Loader(importlib.machinery.SourceFileLoader):
    """Compiles the file from source, instrumented; never from cached bytecode (the file uninstrumented)."""

    def __init__(self, fullname: str, filename: str, path: str, changed: frozenset[int]) -> None:
        super().__init__(fullname, filename)
        self.traced_path, self.changed = path, changed

    def get_code(self, fullname: str) -> types.CodeType:
        filename = self.get_filename(fullname)
        try:
            tree = ast.parse(self.get_data(filename), filename)
        except (SyntaxError, ValueError):
            return super().get_code(fullname)  # type: ignore[return-value]  # the import's own error
        return compile(instrument(tree, self.traced_path, self.changed), filename, "exec", dont_inherit=True)
