"""Gzip tarballs as GitHub serves them (`<owner>-<repo>-<short sha>/` on top, the sha in a pax global
header), and raw ones for hostile-archive tests."""

from __future__ import annotations

import io
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
