"""Gzip tarballs as GitHub serves them (`<owner>-<repo>-<short sha>/` on top, the sha in a pax global
header), and raw ones for hostile-archive tests."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path


def _as_github_does(member: tarfile.TarInfo) -> tarfile.TarInfo:
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    member.mtime = 1_700_000_000
    if member.isreg():
        member.mode = 0o775 if member.mode & 0o111 else 0o664
    elif member.isdir():
        member.mode = 0o775
    return member


def build_tarball(owner: str, repo: str, sha: str, directory: Path) -> bytes:
    """DIRECTORY as GitHub's tarball of OWNER/REPO at SHA."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": sha}) as tar:
        tar.add(directory, arcname=f"{owner}-{repo}-{sha[:7]}", recursive=True, filter=_as_github_does)
    return buffer.getvalue()


def raw_tarball(entries: Iterable[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A gzip tarball of exactly ENTRIES (member, content), in order, nothing checked."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for member, content in entries:
            if content is not None:
                member.size = len(content)
            tar.addfile(member, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, *, content: bytes | None = None, linkname: str = "",
          mode: int = 0o644, size: int | None = None) -> tuple[tarfile.TarInfo, bytes | None]:
    """One member for `raw_tarball`: a file (CONTENT), directory, link (LINKNAME), device or fifo."""
    member = tarfile.TarInfo(name)
    member.type = kind
    member.mode = mode
    member.linkname = linkname
    if kind == tarfile.REGTYPE and content is None:
        content = b""
    if size is not None:
        member.size = size
    return member, content


Blobs = dict[str, tuple[str, str]]  # path -> (git mode, blob id), as the Git Trees API lists them


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def blobs_of_tarball(data: bytes) -> Blobs:
    """The files and symlinks of a tarball built here, as the Git Trees API would list its commit's."""
    blobs: Blobs = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                path = member.name.partition("/")[2]
                if member.issym():
                    blobs[path] = ("120000", _blob_id(member.linkname.encode()))
                elif (member.isreg() or member.islnk()) and path:
                    content = tar.extractfile(member)
                    mode = "100755" if member.mode & 0o111 else "100644"
                    blobs[path] = (mode, _blob_id(content.read() if content else b""))
    except (tarfile.TarError, EOFError, OSError, KeyError, ValueError):
        return {}  # a hostile archive: its commit lists nothing
    return blobs


def blobs_of_directory(directory: Path) -> Blobs:
    """DIRECTORY's files and symlinks as the Git Trees API lists a commit's (directories not followed)."""
    blobs: Blobs = {}
    for root, subdirectories, files in os.walk(directory):
        for name in files + [d for d in subdirectories if (Path(root) / d).is_symlink()]:
            path = Path(root) / name
            relative = path.relative_to(directory).as_posix()
            if path.is_symlink():
                blobs[relative] = ("120000", _blob_id(os.readlink(path).encode()))
            else:
                mode = "100755" if os.access(path, os.X_OK) else "100644"
                blobs[relative] = (mode, _blob_id(path.read_bytes()))
    return blobs


def tree_listing(sha: str, blobs: Blobs) -> dict[str, object]:
    """The Git Trees API's answer (recursive) for a commit holding BLOBS."""
    entries = [{"path": path, "mode": mode, "type": "blob", "sha": blob, "size": 0} for path, (mode, blob)
               in sorted(blobs.items())]
    return {"sha": sha, "tree": entries, "truncated": False}
