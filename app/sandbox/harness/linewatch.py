"""Which of a revision's changed lines ran: a tracer that costs nothing outside the files it watches.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
A changed line counts as run when the statement it belongs to runs; Python reports a multi-line statement
at whichever of its lines its first instruction carries, so every line of the statement is a key.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")
Watched = dict[str, dict[int, set[int]]]  # absolute filename -> {line Python may report: changed lines}


def watch_map(repo: str, trace: dict[str, list[int]]) -> Watched:
    """For each traced repo-relative file, the lines that stand for each changed line."""
    watched: Watched = {}
    for path, lines in trace.items():
        filename = os.path.join(repo, path)
        changed = set(lines)
        keys = {line: {line} for line in changed}
        for statement in _statements(filename):
            own = _own_lines(statement)
            mine = changed.intersection(own)
            if mine:
                for line in own:
                    keys.setdefault(line, set()).update(mine)
        watched[filename] = keys
    return watched


def _statements(filename: str) -> list[ast.stmt]:
    try:
        with open(filename, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return []
    return [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]


def _own_lines(statement: ast.stmt) -> range:
    """A simple statement's lines; a compound statement's header lines (decorators included)."""
    first = statement.lineno
    decorators = getattr(statement, "decorator_list", None)
    if decorators:
        first = min(first, *(d.lineno for d in decorators))
    body = getattr(statement, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return range(first, max(first, body[0].lineno - 1) + 1)
    return range(first, (statement.end_lineno or statement.lineno) + 1)


def traced(watched: Watched, hits: dict[str, set[int]], run: Callable[[], T]) -> T:
    """`run()` while adding to `hits` the changed lines whose statement ran."""

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            lines = watched[frame.f_code.co_filename].get(frame.f_lineno)
            if lines:
                hits.setdefault(frame.f_code.co_filename, set()).update(lines)
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        return on_line if frame.f_code.co_filename in watched else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        return run()
    finally:
        sys.settrace(previous)
