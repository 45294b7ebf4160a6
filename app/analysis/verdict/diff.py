"""What a pull request changed between two trees: paths, changed head lines, and head-to-base line numbers.

Pure: the caller compares the trees and passes the contents of the files whose bytes differ (None for a
binary file); nothing here reads a file.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

FileStatus = Literal["added", "removed", "modified"]


@dataclass(frozen=True)
class FileDiff:
    """One changed file. Lines are 1-based head line numbers."""

    path: str
    status: FileStatus
    changed: frozenset[int] = frozenset()  # head lines added or changed
    head_to_base: Mapping[int, int] = field(default_factory=dict)  # unchanged head lines only


@dataclass(frozen=True)
class TreeDiff:
    """The files that differ between base and head; every other file is identical at both."""

    files: Mapping[str, FileDiff] = field(default_factory=dict)

    @property
    def changed_paths(self) -> list[str]:
        return sorted(self.files)

    def changed_lines(self, path: str) -> frozenset[int]:
        file = self.files.get(path)
        return file.changed if file is not None else frozenset()

    def in_diff(self, path: str | None, line: int | None) -> bool:
        if path is None or line is None:
            return False
        return line in self.changed_lines(path)

    def to_base(self, path: str, line: int) -> int | None:
        """The base line a head line came from; None when the PR added or changed it."""
        file = self.files.get(path)
        if file is None:
            return line  # an untouched file has the same lines at both revisions
        return file.head_to_base.get(line)


def diff_trees(base: Mapping[str, str | None], head: Mapping[str, str | None]) -> TreeDiff:
    """Diff the files whose bytes differ: a path only in `base` was removed, only in `head` added.

    A value of None marks a binary file: its path changed, it has no lines.
    """
    files: dict[str, FileDiff] = {}
    for path in base.keys() | head.keys():
        if path not in head:
            files[path] = FileDiff(path, "removed")
        elif path not in base:
            files[path] = _added(path, head[path])
        else:
            files[path] = diff_file(path, base[path], head[path])
    return TreeDiff(files)


def _added(path: str, text: str | None) -> FileDiff:
    lines = frozenset(range(1, len(text.splitlines()) + 1)) if text is not None else frozenset()
    return FileDiff(path, "added", changed=lines)


def diff_file(path: str, base_text: str | None, head_text: str | None) -> FileDiff:
    """A modified file: which head lines are new, and where the others were at base."""
    if base_text is None or head_text is None:
        return FileDiff(path, "modified")
    base_lines, head_lines = base_text.splitlines(), head_text.splitlines()
    matcher = difflib.SequenceMatcher(None, base_lines, head_lines, autojunk=False)
    changed: set[int] = set()
    head_to_base: dict[int, int] = {}
    for tag, base_start, _, head_start, head_end in matcher.get_opcodes():
        for offset in range(head_end - head_start):
            if tag == "equal":
                head_to_base[head_start + offset + 1] = base_start + offset + 1
            else:
                changed.add(head_start + offset + 1)
    return FileDiff(path, "modified", changed=frozenset(changed), head_to_base=head_to_base)
