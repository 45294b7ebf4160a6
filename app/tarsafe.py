"""Unpacking untrusted tar archives of source trees (GitHub's tarballs, `git archive --prefix`): every entry
is checked before anything of it is written, and the first that breaks a rule refuses the whole archive."""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

log = logging.getLogger(__name__)

SYMLINK_HOPS = 40  # as the kernel's limit
CHUNK = 1 << 16

# What to do with a symlink that points out of the tree (absolute, or through `..` or other links): refuse
# the archive (a tarball from the network), or omit the link and keep the rest (a local repository's own
# commit, where `/usr/bin/python`-style links are ordinary content). Either way none is ever written.
OutwardLinks = Literal["refuse", "omit"]


class ArchiveRefused(Exception):
    """An archive that will not be unpacked; the message says which entry and why."""


@dataclass(frozen=True)
class ArchiveLimits:
    """What one unpacked tree may amount to; a larger one is refused, not cut."""

    max_tree_bytes: int = 2 << 30
    max_files: int = 200_000


def extract_tree(archive: IO[bytes], dest: Path, *, limits: ArchiveLimits = ArchiveLimits(),
                 outward_links: OutwardLinks = "refuse") -> int:
    """Unpack a source archive (any compression, read as a stream) into the empty directory DEST, its one
    top-level directory stripped; the number of entries. Raises ArchiveRefused, and the caller discards DEST.

    Refused always: absolute names, `..`, entries outside the top-level directory, writes beneath a symlink,
    an entry twice, hard links to anything but an earlier file of the archive, devices and fifos, more than
    `max_files` entries or `max_tree_bytes` bytes. Files are created exclusively, never through a link, with
    modes 0644 or 0755 (no setuid, no group or world write); directories 0755.
    """
    unpacker = _Unpacker(dest, limits, outward_links)
    try:
        with tarfile.open(fileobj=archive, mode="r|*") as tar:
            for member in tar:
                unpacker.add(tar, member)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise ArchiveRefused(f"unreadable archive: {exc}") from None
    return unpacker.finish()


def _inside(base: str, target: str) -> bool:
    """Whether TARGET, relative to directory BASE of the tree, names a place in the tree (lexically)."""
    joined = posixpath.normpath(posixpath.join(base, target))
    return joined != ".." and not joined.startswith("../")


def _resolve(path: str, links: dict[str, str], hops: int = 0) -> list[str] | None:
    """PATH resolved through the archive's own symlinks as the kernel would; None if it leaves the tree
    (or loops). Needed beyond `_inside`: with `a -> .`, the target `a/..` is lexically inside, really not."""
    resolved: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
            continue
        resolved.append(part)
        target = links.get("/".join(resolved))
        if target is not None:
            if hops >= SYMLINK_HOPS or target.startswith("/"):
                return None
            through = _resolve("/".join([*resolved[:-1], target]), links, hops + 1)
            if through is None:
                return None
            resolved = through
    return resolved


class _Unpacker:
    """Writes the entries of one archive under DEST, each checked before anything of it is written."""

    def __init__(self, dest: Path, limits: ArchiveLimits, outward_links: OutwardLinks) -> None:
        self.dest = dest
        self.limits = limits
        self.outward_links = outward_links
        self.root: str | None = None
        self.entries = 0
        self.size = 0
        self.kinds: dict[str, str] = {}  # relative path -> "dir" | "file" | "symlink"
        self.links: dict[str, str] = {}  # symlink -> its target

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.entries += 1
        if self.entries > self.limits.max_files:
            raise ArchiveRefused(f"more than {self.limits.max_files} entries")
        path = self._relative(member)
        if path is None:
            return
        self._check_parents(member, path)
        if path in self.kinds and not (member.isdir() and self.kinds[path] == "dir"):
            raise ArchiveRefused(f"{member.name!r}: appears twice in the archive")
        if member.isdir():
            (self.dest / path).mkdir(mode=0o755, exist_ok=True)
            (self.dest / path).chmod(0o755)
            self.kinds[path] = "dir"
        elif member.isreg():
            self._write(tar, member, path)
        elif member.issym():
            self._symlink(member, path)
        elif member.islnk():
            self._hardlink(member, path)
        elif member.ischr() or member.isblk() or member.isfifo():
            raise ArchiveRefused(f"{member.name!r}: a device or fifo, which no source tree has")
        else:
            raise ArchiveRefused(f"{member.name!r}: an entry of unsupported type {member.type!r}")

    def _relative(self, member: tarfile.TarInfo) -> str | None:
        """The entry's path below the top-level directory; None for that directory itself."""
        name = member.name
        if name.startswith("/"):
            raise ArchiveRefused(f"{name!r}: an absolute path")
        parts = [part for part in name.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise ArchiveRefused(f"{name!r}: path traversal ('..')")
        if not parts:
            raise ArchiveRefused(f"{name!r}: an entry without a name")
        if self.root is None:
            self.root = parts[0]
        elif parts[0] != self.root:
            raise ArchiveRefused(f"{name!r}: outside the top-level directory {self.root!r}")
        if len(parts) == 1:
            if not member.isdir():
                raise ArchiveRefused(f"{name!r}: not inside a top-level directory")
            return None
        return "/".join(parts[1:])

    def _check_parents(self, member: tarfile.TarInfo, path: str) -> None:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            kind = self.kinds.setdefault(parent, "dir")  # made by the entry's mkdir below when missing
            if kind != "dir":
                # a write beneath a symlink would land wherever the link points
                raise ArchiveRefused(f"{member.name!r}: beneath {parent!r}, which is a {kind}, "
                                     "not a directory")
        if len(parts) > 1:
            (self.dest / "/".join(parts[:-1])).mkdir(mode=0o755, parents=True, exist_ok=True)

    def _write(self, tar: tarfile.TarFile, member: tarfile.TarInfo, path: str) -> None:
        self.size += member.size
        if self.size > self.limits.max_tree_bytes:
            raise ArchiveRefused(f"unpacks to more than the {self.limits.max_tree_bytes} bytes allowed")
        source = tar.extractfile(member)
        assert source is not None  # a regular file always has content
        target = self.dest / path
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as written, source:
            shutil.copyfileobj(source, written, CHUNK)
        target.chmod(0o755 if member.mode & 0o111 else 0o644)  # no setuid, no group or world write
        self.kinds[path] = "file"

    def _symlink(self, member: tarfile.TarInfo, path: str) -> None:
        target = member.linkname
        if not target:
            raise ArchiveRefused(f"{member.name!r}: symlink to nothing")
        if target.startswith("/"):
            outward: str | None = f"symlink to the absolute path {target!r}"
        elif not _inside(posixpath.dirname(path), target):
            outward = f"symlink to {target!r}, which points out of the tree"
        else:
            outward = None
        if outward is not None and self.outward_links == "refuse":
            raise ArchiveRefused(f"{member.name!r}: {outward}")
        self.kinds[path] = "symlink"  # an omitted one too: nothing may be written beneath it
        if outward is not None:
            log.info("left out of the unpacked tree: %r: %s", member.name, outward)
            return
        os.symlink(target, self.dest / path)
        self.links[path] = target

    def _hardlink(self, member: tarfile.TarInfo, path: str) -> None:
        target = member.linkname
        parts = [part for part in target.split("/") if part not in ("", ".")]
        if target.startswith("/") or ".." in parts or len(parts) < 2 or parts[0] != self.root:
            raise ArchiveRefused(f"{member.name!r}: hard link to {target!r}, outside the tree")
        linked = "/".join(parts[1:])
        if self.kinds.get(linked) != "file":
            raise ArchiveRefused(f"{member.name!r}: hard link to {target!r}, which is no earlier file of the "
                                 "archive")
        os.link(self.dest / linked, self.dest / path, follow_symlinks=False)
        self.kinds[path] = "file"

    def finish(self) -> int:
        if self.root is None:
            raise ArchiveRefused("an empty archive")
        # Omitting a link changes how the others resolve: look again until every link left stays inside.
        while escaping := [link for link in self.links if _resolve(link, self.links) is None]:
            if self.outward_links == "refuse":
                raise ArchiveRefused(f"{escaping[0]!r}: symlink that leads out of the tree through other "
                                     "symlinks (or loops)")
            for link in escaping:
                log.info("left out of the unpacked tree: %r: leads out of it through other symlinks", link)
                (self.dest / link).unlink()
                del self.links[link]
        return self.entries
