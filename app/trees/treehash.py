"""Content fingerprints of an unpacked tree, computed on the host: what a cache may be keyed by.

Nothing a sandboxed process reports goes into them: a pull request's code cannot make two different trees
look alike.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SKIPPED = frozenset({".git", "__pycache__"})  # a checkout's own metadata, not its content


def fingerprints(tree: Path) -> dict[str, str]:
    """Repo-relative path -> content hash of every file and symlink (links are not followed)."""
    prints: dict[str, str] = {}
    for directory, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED]
        here = Path(directory)
        linked_dirs = [d for d in dirnames if (here / d).is_symlink()]
        for name in [*(f for f in filenames if f not in SKIPPED), *linked_dirs]:
            path = here / name
            relative = path.relative_to(tree).as_posix()
            if path.is_symlink():
                prints[relative] = "link:" + os.readlink(path)
            elif path.is_file():
                with path.open("rb") as handle:
                    prints[relative] = hashlib.file_digest(handle, "sha256").hexdigest()
    return prints


def tree_digest(prints: dict[str, str]) -> str:
    """One hash of a whole tree's fingerprints: equal only for trees with the same files and contents."""
    digest = hashlib.sha256()
    for path in sorted(prints):
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0" + prints[path].encode() + b"\n")
    return digest.hexdigest()
