"""Whether an unpacked tree is exactly a commit's git tree: every file and symlink at its path with its
content, and nothing else.

GitHub makes its tarballs as `git archive` does, so a commit's `.gitattributes` can leave files out
(`export-ignore`) or rewrite them (`export-subst`): a head could hide the file holding its new check from
the archive and import it under `try/except ImportError`. The CLI reads trees from git objects with the
attributes neutralised (`gitrepo`); the App checks the archive it unpacked against the commit's tree as the
Git Trees API lists it, here.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

LINK_MODE = "120000"
SHOWN = 5  # differences named in the reason


def blob_sha(data: bytes) -> str:
    """The git object id of a blob holding DATA (sha1 of its header and content)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def differences(tree: Path, blobs: Mapping[str, tuple[str, str]]) -> list[str]:
    """What differs between TREE and BLOBS (path -> (git mode, blob id) of every file and symlink of the
    commit), each in a few words; empty when TREE is the commit's."""
    found: list[str] = []
    for path, (mode, sha) in sorted(blobs.items()):
        local = tree / path
        if mode == LINK_MODE:
            content = os.readlink(local).encode() if local.is_symlink() else None
        else:
            content = local.read_bytes() if local.is_file() and not local.is_symlink() else None
        if content is None:
            found.append(f"{path} is missing")
        elif blob_sha(content) != sha:
            found.append(f"{path} differs")
    for path in sorted(_files(tree) - set(blobs)):
        found.append(f"{path} is not in the commit")
    return found


def describe(found: list[str]) -> str:
    """The reason an archive with these differences is refused."""
    named = "; ".join(found[:SHOWN])
    more = f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else ""
    return ("the archive is not the commit's tree (export-ignore or export-subst in .gitattributes?): "
            f"{named}{more}")


def _files(tree: Path) -> set[str]:
    """Every file and symlink under TREE, relative, with `/`; symlinks to directories are not followed."""
    paths: set[str] = set()
    for directory, subdirectories, files in os.walk(tree):
        relative = Path(directory).relative_to(tree)
        for name in files + [d for d in subdirectories if (Path(directory) / d).is_symlink()]:
            paths.add((relative / name).as_posix())
    return paths
