"""The repository line a harness hook was reached from: what a report points a reader at.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
"""

from __future__ import annotations

import itertools
from types import FrameType


def repository_line(frame: FrameType | None, prefix: str) -> tuple[str | None, int | None]:
    """The innermost frame from FRAME outwards whose file lies under PREFIX (the repository's directory with
    its trailing slash), as (path relative to the repository, line); (None, None) when none does or no
    repository is known (an empty PREFIX would match every file)."""
    while prefix and frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(prefix):
            return filename[len(prefix):], frame.f_lineno
        frame = frame.f_back
    return None, None


def repository_place(frame: FrameType | None, prefix: str) -> tuple[str, int, int | None] | None:
    """`repository_line`'s frame as (path, line, column of the instruction it runs; None when unknown):
    a line holds an assert's test and its message, which only the column tells apart."""
    while prefix and frame is not None and not frame.f_code.co_filename.startswith(prefix):
        frame = frame.f_back
    if frame is None or not prefix:
        return None
    positions = getattr(frame.f_code, "co_positions", None)  # Python 3.11 on: the repository's may be older
    position = next(itertools.islice(positions(), frame.f_lasti // 2, None), None) if positions else None
    line = position[0] if position is not None and position[0] is not None else frame.f_lineno
    column = position[2] if position is not None else None
    return frame.f_code.co_filename[len(prefix):], line, column
