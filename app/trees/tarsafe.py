"""Unpacking untrusted tar archives of source trees (GitHub's tarballs, `git archive --prefix`): every entry
is checked before anything of it is written, and the first that breaks a rule refuses the whole archive."""

from __future__ import annotations

import bz2
import gzip
import logging
import lzma
import os
import posixpath
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, Protocol, cast

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
    # GitHub refuses a pushed file over 100 MiB; a larger one is refused at its header, before any is written
    max_file_bytes: int = 100 << 20
    # A file system's NAME_MAX is 255 bytes and PATH_MAX 4096: the rest is left to the cache directory's path
    max_name_bytes: int = 255
    max_path_bytes: int = 3072
    # A run of zeros compresses about 1000:1, source code 3-10:1: past `ratio_floor_bytes` unpacked, a tree
    # unpacking to more than `max_ratio` times the bytes read is refused while its file is being written
    max_ratio: int = 200
    ratio_floor_bytes: int = 64 << 20
    # tarfile reads a pax or GNU long-name header whole, before any check of ours could run: a 2 GiB one
    # compresses to a few MB. Real ones hold a path or two (PATH_MAX is 4096).
    max_header_bytes: int = 64 << 10
    max_headers_bytes: int = 64 << 20  # all of them together


def extract_tree(archive: IO[bytes], dest: Path, *, limits: ArchiveLimits = ArchiveLimits(),
                 outward_links: OutwardLinks = "refuse") -> int:
    """Unpack a source archive (any compression, read as a stream) into the empty directory DEST, its one
    top-level directory stripped; the number of entries. Raises ArchiveRefused, and the caller discards DEST.

    Refused always: absolute names, `..`, entries outside the top-level directory, writes beneath a symlink,
    an entry twice, hard links to anything but an earlier file of the archive, devices and fifos, more than
    `max_files` entries or `max_tree_bytes` bytes. Files are created exclusively, never through a link, with
    modes 0644 or 0755 (no setuid, no group or world write); directories 0755.
    """
    counted = _Counted(archive)
    unpacker = _Unpacker(dest, limits, outward_links, counted)
    try:
        guarded = _HeaderGuard(_decompressed(counted), limits)
        with tarfile.open(fileobj=guarded, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                unpacker.add(tar, member)
    except (tarfile.TarError, EOFError, zlib.error, OSError, lzma.LZMAError) as exc:
        raise ArchiveRefused(f"unreadable archive: {exc}") from None
    return unpacker.finish()


BLOCK = 512
EXTENDED = {b"x": "pax", b"X": "pax", b"g": "global pax", b"L": "GNU long name", b"K": "GNU long link name"}
# CVE-2024-6232: before 3.11.10, tarfile searches pax data with a regex that is quadratic in a run of
# digits (16 KiB of them: 1 s, 64 KiB: 15 s). No real record holds a run longer than a number or a hash.
LONG_DIGIT_RUN = re.compile(rb"[0-9]{65}")
OCTAL = re.compile(rb"[0-7]*")


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Counted:
    """The archive as read, counting its bytes (compressed, when it is): what the unpacked size is held to."""

    def __init__(self, stream: _Readable) -> None:
        self.stream, self.bytes_read = stream, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.bytes_read += len(data)
        return data


class _Prefixed:
    """A stream whose first bytes were already read (to sniff the compression)."""

    def __init__(self, head: bytes, rest: _Readable) -> None:
        self.head, self.rest = head, rest

    def read(self, size: int = -1) -> bytes:
        if self.head:
            taken, self.head = (self.head, b"") if size < 0 else (self.head[:size], self.head[size:])
            return taken
        return self.rest.read(size)


def _decompressed(archive: _Readable) -> _Readable:
    """The archive's tar stream, decompressed as tarfile's "r|*" would (gzip, bzip2, xz or none)."""
    head = archive.read(6)
    raw = _Prefixed(head, archive)
    # the decompressors only call read(): the IO they are typed for is more than they use
    fileobj = cast(IO[bytes], raw)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=fileobj, mode="rb")
    if head.startswith(b"BZh"):
        return bz2.BZ2File(fileobj)
    if head.startswith((b"\xfd7zXZ", b"\x5d\x00\x00\x80")):
        return lzma.LZMAFile(fileobj)
    return raw


class _HeaderGuard:
    """The tar stream, passed on to tarfile unchanged, its raw 512-byte header blocks read first: a pax or
    GNU long-name header larger than the limit is refused before tarfile reads it whole, and pax data that
    would send tarfile's parser quadratic is refused before tarfile sees it."""

    def __init__(self, stream: _Readable, limits: ArchiveLimits) -> None:
        self.stream, self.limits = stream, limits
        self.pending = bytearray()  # read, not yet scanned (less than a block)
        self.ready = bytearray()  # scanned, not yet handed to tarfile
        self.skip = 0  # bytes of member data (and padding) still to pass
        self.extended: tuple[str, bytearray, int] | None = None  # kind, data so far, size
        self.next_size: int | None = None  # a pax "size" record for the next member
        self.headers_bytes = 0
        self.ended = False

    def read(self, size: int = -1) -> bytes:
        wanted = size if size >= 0 else 1 << 20
        while len(self.ready) < wanted and not self.ended:
            chunk = self.stream.read(1 << 16)
            if not chunk:
                self.ended = True
                self.ready += self.pending  # a truncated tail: tarfile reports it
                break
            self.pending += chunk
            self._scan()
        taken = bytes(self.ready[:wanted])
        del self.ready[:wanted]
        return taken

    def _scan(self) -> None:
        start = 0
        while len(self.pending) - start >= BLOCK or (self.skip and start < len(self.pending)):
            if self.skip:
                step = min(self.skip, len(self.pending) - start)
                self.skip -= step
            else:
                step = BLOCK
                self._block(bytes(self.pending[start:start + BLOCK]))
            self.ready += self.pending[start:start + step]
            start += step
        del self.pending[:start]

    def _block(self, block: bytes) -> None:
        if self.extended is not None:
            kind, data, size = self.extended
            data += block
            if len(data) >= size:
                self.extended = None
                self._check_extended(kind, bytes(data[:size]))
            return
        if block == bytes(BLOCK):
            return  # end-of-archive blocks
        self._header(block)

    def _header(self, block: bytes) -> None:
        kind, size = block[156:157], _header_size(block)
        if kind == b"S" or kind == b"M":
            raise ArchiveRefused("a sparse or multi-volume member, which no source tree has")
        if kind in EXTENDED:
            self._start_extended(EXTENDED[kind], size)
            return
        if self.next_size is not None:
            size, self.next_size = self.next_size, None
        if kind not in (b"1", b"2", b"3", b"4", b"5", b"6"):  # links, devices, dirs, fifos have no data
            self.skip = _padded(size)

    def _start_extended(self, kind: str, size: int) -> None:
        if size > self.limits.max_header_bytes:
            raise ArchiveRefused(f"a {kind} header of {size} bytes (more than the "
                                 f"{self.limits.max_header_bytes} allowed)")
        self.headers_bytes += size
        if self.headers_bytes > self.limits.max_headers_bytes:
            raise ArchiveRefused(f"pax and GNU long-name headers of more than "
                                 f"{self.limits.max_headers_bytes} bytes in all")
        if size:
            self.extended = (kind, bytearray(), size)

    def _check_extended(self, kind: str, data: bytes) -> None:
        if not kind.endswith("pax"):
            return
        if LONG_DIGIT_RUN.search(data):
            raise ArchiveRefused(f"a {kind} header with a run of more than 64 digits")
        size = _pax_records(data).get(b"size")
        if size is None:
            return
        if kind != "pax" or not size.isdigit():
            # tarfile applies a global size to later members in ways no real archive relies on
            raise ArchiveRefused(f"a {kind} header with size {size[:32]!r}")
        self.next_size = int(size)


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _header_size(block: bytes) -> int:
    """The size field of a ustar header: octal, or GNU base-256 when its first byte has the high bit."""
    field = block[124:136]
    text = field.split(b"\0", 1)[0].strip()
    if field[0] == 0x80:
        size = int.from_bytes(field[1:], "big")
    elif field[0] & 0x80 or not OCTAL.fullmatch(text):
        size = -1  # negative base-256, or not octal
    else:
        size = int(text, 8) if text else 0
    if size < 0:
        raise ArchiveRefused(f"unreadable archive: a header with size field {field!r}")
    return size


def _pax_records(data: bytes) -> dict[bytes, bytes]:
    """Records "LENGTH KEY=VALUE\\n", parsed in one pass; malformed data is refused (as tarfile would)."""
    records: dict[bytes, bytes] = {}
    pos = 0
    while pos < len(data) and data[pos:pos + 1] != b"\0":
        space = data.find(b" ", pos, pos + 21)
        length = int(data[pos:space]) if space > pos and data[pos:space].isdigit() else 0
        record = data[pos:pos + length]
        if length <= space - pos or len(record) < length or not record.endswith(b"\n") or b"=" not in record:
            raise ArchiveRefused("unreadable archive: a malformed pax header")
        key, _, value = record[space - pos + 1:-1].partition(b"=")
        if key.startswith(b"GNU.sparse."):
            raise ArchiveRefused("a sparse member (pax GNU.sparse), which no source tree has")
        records[key] = value
        pos += length
    return records


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

    def __init__(self, dest: Path, limits: ArchiveLimits, outward_links: OutwardLinks,
                 read: _Counted) -> None:
        self.dest = dest
        self.read = read
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
        self._check_length(name, parts)
        if self.root is None:
            self.root = parts[0]
        elif parts[0] != self.root:
            raise ArchiveRefused(f"{name!r}: outside the top-level directory {self.root!r}")
        if len(parts) == 1:
            if not member.isdir():
                raise ArchiveRefused(f"{name!r}: not inside a top-level directory")
            return None
        return "/".join(parts[1:])

    def _check_length(self, name: str, parts: list[str]) -> None:
        """Refused here, with their reason: the file system would refuse them later, as an unclear OSError."""
        length = len(os.fsencode(name))
        if length > self.limits.max_path_bytes:
            raise ArchiveRefused(f"{name[:64]!r}…: a path of {length} bytes (more than the "
                                 f"{self.limits.max_path_bytes} allowed)")
        longest = max(parts, key=lambda part: len(os.fsencode(part)))
        if len(os.fsencode(longest)) > self.limits.max_name_bytes:
            raise ArchiveRefused(f"{name[:64]!r}…: a name of {len(os.fsencode(longest))} bytes (file "
                                 f"systems allow {self.limits.max_name_bytes})")

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
        if member.size > self.limits.max_file_bytes:
            raise ArchiveRefused(f"{member.name!r}: a file of {member.size} bytes (more than the "
                                 f"{self.limits.max_file_bytes} allowed)")
        if self.size + member.size > self.limits.max_tree_bytes:
            raise ArchiveRefused(f"unpacks to more than the {self.limits.max_tree_bytes} bytes allowed")
        source = tar.extractfile(member)
        assert source is not None  # a regular file always has content
        target = self.dest / path
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as written, source:
            while chunk := source.read(CHUNK):
                written.write(chunk)
                self.size += len(chunk)
                self._check_ratio(member)
        target.chmod(0o755 if member.mode & 0o111 else 0o644)  # no setuid, no group or world write
        self.kinds[path] = "file"

    def _check_ratio(self, member: tarfile.TarInfo) -> None:
        limits = self.limits
        if self.size > limits.ratio_floor_bytes and self.size > limits.max_ratio * self.read.bytes_read:
            raise ArchiveRefused(f"{member.name!r}: the archive unpacks to more than {self.limits.max_ratio} "
                                 f"times its size (a compression bomb, or a blob of zeros)")

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
