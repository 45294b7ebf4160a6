"""Source trees of commits from GitHub's tarballs: streamed to disk with httpx, unpacked with every entry
checked first (size, count, traversal, links, devices), cached by sha and renamed into place whole."""

from __future__ import annotations

import functools
import logging
import os
import posixpath
import re
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from app.github import logsafe
from app.github.client import GitHubClient
from app.github.errors import GitHubError, TarballRefused
from app.github.retry import AttemptFailed

log = logging.getLogger(__name__)

SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
MAX_REDIRECTS = 5
SYMLINK_HOPS = 40  # as the kernel's limit
CHUNK = 1 << 16

logsafe.install()  # a download URL carries a signed token: keep it out of httpx's and httpcore's logs


@dataclass(frozen=True)
class TreeLimits:
    """What one source archive may amount to; a larger one is refused, not cut."""

    max_download_bytes: int = 1 << 30
    max_tree_bytes: int = 2 << 30
    max_files: int = 200_000


def download_tree(client: GitHubClient, owner: str, repo: str, sha: str, dest_cache: Path, *,
                  limits: TreeLimits = TreeLimits()) -> Path:
    """The source tree of commit SHA at DEST_CACHE/<sha>, downloaded and unpacked unless already there.

    The tree is complete whenever the directory exists (unpacked under a temporary name, then renamed);
    GitHub's top-level `<owner>-<repo>-<sha>/` directory is stripped. Raises TarballRefused (nothing kept)
    for an archive that breaks a limit or a safety rule, GitHubError when it cannot be had.
    """
    if not SHA.fullmatch(sha):
        raise ValueError(f"not a full commit sha: {sha!r}")
    tree = dest_cache / sha
    if tree.is_dir():
        return tree
    dest_cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=dest_cache, prefix=f".{sha}.", suffix=".tar.gz") as archive:
        log.info("downloading the tarball of %s/%s at %s", owner, repo, sha[:12])
        _download(client, owner, repo, sha, archive, limits)
        archive.seek(0)
        partial = Path(tempfile.mkdtemp(prefix=f".{sha}.", suffix=".partial", dir=dest_cache))
        try:
            files = extract_tarball(archive, partial, limits=limits)
            partial.chmod(0o755)  # the sandbox reads the tree as an unprivileged uid
            try:
                partial.rename(tree)
            except OSError:
                if not tree.is_dir():
                    raise
                shutil.rmtree(partial)  # another worker unpacked the same sha first
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    log.info("%s/%s at %s: %d entries unpacked", owner, repo, sha[:12], files)
    return tree


# Downloading


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


def _download(client: GitHubClient, owner: str, repo: str, sha: str, out: IO[bytes], limits: TreeLimits,
              ) -> None:
    url, headers = client.tarball_request(owner, repo, sha)
    api_origin = _origin(httpx.URL(url))
    operation = "repos/download-tarball-archive"
    with httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0), follow_redirects=False) as http:
        for _ in range(MAX_REDIRECTS + 1):
            fetch = functools.partial(_fetch, http, url, headers, out, limits)
            location = client.policy.run(operation, fetch)
            if location is None:
                return
            url, operation = location, "tarball/download"
            if _origin(httpx.URL(url)) != api_origin:
                # the download host is someone else: the installation token stays with GitHub's API
                headers = {name: value for name, value in headers.items() if name.lower() != "authorization"}
    raise GitHubError(operation, None, f"more than {MAX_REDIRECTS} redirects")


def _fetch(http: httpx.Client, url: str, headers: dict[str, str], out: IO[bytes], limits: TreeLimits,
           ) -> str | None:
    """One GET: the redirect's target, or None once the body is in OUT."""
    try:
        with http.stream("GET", url, headers=headers) as response:
            if response.is_redirect:
                location = response.headers.get("location")
                if not location:
                    raise AttemptFailed(response.status_code, response.headers, "redirect without a Location")
                target = response.url.join(location)
                if target.scheme not in ("http", "https"):
                    raise GitHubError("tarball/download", response.status_code, "redirect to a non-HTTP URL")
                log.debug("tarball redirect to %s", target.copy_with(query=None))
                return str(target)
            if response.status_code >= 400:
                response.read()
                raise AttemptFailed(response.status_code, response.headers, _message(response))
            _save(response, out, limits)
            return None
    except httpx.TransportError as exc:
        raise AttemptFailed(None, {}, type(exc).__name__) from None


def _message(response: httpx.Response) -> str:
    try:
        answer = response.json()
    except ValueError:
        return response.reason_phrase
    return str(answer.get("message") or "") if isinstance(answer, dict) else ""


def _save(response: httpx.Response, out: IO[bytes], limits: TreeLimits) -> None:
    declared = int(response.headers.get("content-length") or 0)
    if declared > limits.max_download_bytes:
        raise TarballRefused(f"the archive is {declared} bytes, more than the {limits.max_download_bytes} "
                             "bytes allowed")
    out.seek(0)
    out.truncate()  # a retry starts over
    received = 0
    for chunk in response.iter_bytes(CHUNK):
        received += len(chunk)
        if received > limits.max_download_bytes:
            raise TarballRefused(f"the archive is more than the {limits.max_download_bytes} bytes allowed")
        out.write(chunk)


# Unpacking


def extract_tarball(archive: IO[bytes], dest: Path, *, limits: TreeLimits = TreeLimits()) -> int:
    """Unpack a GitHub source archive into the empty directory DEST, its top-level directory stripped;
    the number of entries. Every entry is checked before anything of it is written; the first that breaks
    a rule refuses the whole archive (TarballRefused), and the caller discards DEST."""
    unpacker = _Unpacker(dest, limits)
    try:
        with tarfile.open(fileobj=archive, mode="r|*") as tar:
            for member in tar:
                unpacker.add(tar, member)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise TarballRefused(f"unreadable archive: {exc}") from None
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

    def __init__(self, dest: Path, limits: TreeLimits) -> None:
        self.dest = dest
        self.limits = limits
        self.root: str | None = None
        self.entries = 0
        self.size = 0
        self.kinds: dict[str, str] = {}  # relative path -> "dir" | "file" | "symlink"
        self.links: dict[str, str] = {}  # symlink -> its target

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.entries += 1
        if self.entries > self.limits.max_files:
            raise TarballRefused(f"more than {self.limits.max_files} entries")
        path = self._relative(member)
        if path is None:
            return
        self._check_parents(member, path)
        if path in self.kinds and not (member.isdir() and self.kinds[path] == "dir"):
            raise TarballRefused(f"{member.name!r}: appears twice in the archive")
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
            raise TarballRefused(f"{member.name!r}: a device or fifo, which no source tree has")
        else:
            raise TarballRefused(f"{member.name!r}: an entry of unsupported type {member.type!r}")

    def _relative(self, member: tarfile.TarInfo) -> str | None:
        """The entry's path below the top-level directory; None for that directory itself."""
        name = member.name
        if name.startswith("/"):
            raise TarballRefused(f"{name!r}: an absolute path")
        parts = [part for part in name.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise TarballRefused(f"{name!r}: path traversal ('..')")
        if not parts:
            raise TarballRefused(f"{name!r}: an entry without a name")
        if self.root is None:
            self.root = parts[0]
        elif parts[0] != self.root:
            raise TarballRefused(f"{name!r}: outside the top-level directory {self.root!r}")
        if len(parts) == 1:
            if not member.isdir():
                raise TarballRefused(f"{name!r}: not inside a top-level directory")
            return None
        return "/".join(parts[1:])

    def _check_parents(self, member: tarfile.TarInfo, path: str) -> None:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            kind = self.kinds.setdefault(parent, "dir")  # made by the entry's mkdir below when missing
            if kind != "dir":
                # a write beneath a symlink would land wherever the link points
                raise TarballRefused(f"{member.name!r}: beneath {parent!r}, which is a {kind}, "
                                     "not a directory")
        if len(parts) > 1:
            (self.dest / "/".join(parts[:-1])).mkdir(mode=0o755, parents=True, exist_ok=True)

    def _write(self, tar: tarfile.TarFile, member: tarfile.TarInfo, path: str) -> None:
        self.size += member.size
        if self.size > self.limits.max_tree_bytes:
            raise TarballRefused(f"unpacks to more than the {self.limits.max_tree_bytes} bytes allowed")
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
        if not target or target.startswith("/"):
            raise TarballRefused(f"{member.name!r}: symlink to the absolute path {target!r}")
        if not _inside(posixpath.dirname(path), target):
            raise TarballRefused(f"{member.name!r}: symlink to {target!r}, which points out of the tree")
        os.symlink(target, self.dest / path)
        self.kinds[path] = "symlink"
        self.links[path] = target

    def _hardlink(self, member: tarfile.TarInfo, path: str) -> None:
        target = member.linkname
        parts = [part for part in target.split("/") if part not in ("", ".")]
        if target.startswith("/") or ".." in parts or len(parts) < 2 or parts[0] != self.root:
            raise TarballRefused(f"{member.name!r}: hard link to {target!r}, outside the tree")
        linked = "/".join(parts[1:])
        if self.kinds.get(linked) != "file":
            raise TarballRefused(f"{member.name!r}: hard link to {target!r}, which is no earlier file of the "
                                 "archive")
        os.link(self.dest / linked, self.dest / path, follow_symlinks=False)
        self.kinds[path] = "file"

    def finish(self) -> int:
        if self.root is None:
            raise TarballRefused("an empty archive")
        for link in self.links:
            if _resolve(link, self.links) is None:
                raise TarballRefused(f"{link!r}: symlink that leads out of the tree through other symlinks "
                                     "(or loops)")
        return self.entries
