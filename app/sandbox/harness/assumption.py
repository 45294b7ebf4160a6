"""Whether a rejection rests on what the harness assumed: a neutral value it gave an option no parser
defined, where a stubbed or replaced upstream parser parsed (tolerant.py, neutral.py).

Such a value is the harness's guess, not CI's: a rejection it decides says nothing about the repository.
A rejection rests on an assumed option when the option was read in what decided it: the rejecting
statement (an assert's test alone: its message only says why; a raise's own arguments do not count
either), or the condition of an `if`/`while` around it in its function (`if args.x > 1: raise …`).
Static and cheap: no run more. A value carried through a variable first (`dp = args.x` on a line of its
own) is not followed: such a rejection stands.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Iterator, Mapping
from typing import Any

Place = tuple[int, int]  # line, column (0-based, as ast and co_positions count)
Span = tuple[Place, Place]  # from, up to (exclusive)
Read = tuple[str, int, "int | None"]  # repo-relative path, line, column when known


def rests_on(outcome: Mapping[str, Any], read_at: Mapping[str, set[Read]], repo: str) -> list[str]:
    """The assumed options (READ_AT: where the repository read each) a rejection OUTCOME rests on."""
    path, line = outcome.get("path"), outcome.get("line")
    if outcome.get("outcome") != "rejected" or not read_at or not isinstance(path, str) \
            or not isinstance(line, int):
        return []
    spans = deciding_spans(os.path.join(repo, path), line)
    return [name for name, places in read_at.items()
            if any(where == path and any(_within(at, column, span) for span in spans)
                   for where, at, column in places)]


def _within(line: int, column: int | None, span: Span) -> bool:
    (first, _), (last, _) = span
    if column is None:  # the line alone is known
        return first <= line <= last
    return span[0] <= (line, column) < span[1]


def deciding_spans(filename: str, line: int) -> tuple[Span, ...]:
    """The lines of FILENAME that decide a rejection raised at LINE: see the module's docstring."""
    tree = _parsed(filename)
    if tree is None:
        return _whole(line)  # unreadable: the rejecting line alone
    path = list(_enclosing(tree, line))
    if not path:
        return _whole(line)
    statement, spans = path[-1], []
    if isinstance(statement, ast.Assert):
        spans.append(_span(statement.test))
    elif not isinstance(statement, ast.Raise):
        spans.append(_span(statement))
    for outer in reversed(path[:-1]):
        if isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            break  # the conditions of the function's callers are theirs
        if isinstance(outer, ast.If | ast.While):
            spans.append(_span(outer.test))
    return tuple(spans)


def _enclosing(node: ast.AST, line: int) -> Iterator[ast.stmt]:
    """The statements from the module down to the innermost one whose lines hold LINE."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt) and child.lineno <= line <= (child.end_lineno or child.lineno):
            yield child
            yield from _enclosing(child, line)
            return


def _span(node: ast.AST) -> Span:
    first = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
    last = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    return first, (last if None not in last else (first[0], 1 << 30))  # type: ignore[return-value]


def _whole(line: int) -> tuple[Span, ...]:
    return (((line, 0), (line, 1 << 30)),)


@functools.lru_cache(maxsize=32)
def _parsed(filename: str) -> ast.Module | None:
    try:
        with open(filename, "rb") as handle:
            return ast.parse(handle.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return None
