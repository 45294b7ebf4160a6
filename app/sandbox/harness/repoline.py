"""The repository line a harness hook was reached from: what a report points a reader at.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
"""

from __future__ import annotations

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
