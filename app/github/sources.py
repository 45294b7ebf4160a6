"""Source trees of commits from GitHub's tarballs: streamed to disk with httpx, unpacked with every entry
checked first (size, count, traversal, links, devices: app/trees/tarsafe.py), checked against the commit's
tree as the Git Trees API lists it (app/trees/committree.py: a tarball is made with `git archive`'s
`export-ignore` and `export-subst`), cached by sha and renamed into place whole (app/trees/cachedir.py)."""

from __future__ import annotations

import functools
import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from app.github import logsafe
from app.github.client import GitHubClient
from app.github.errors import GitHubError, TarballRefused
from app.github.github_models import CommitTree
from app.github.retry import AttemptFailed
from app.trees.cachedir import cached_entry, use
from app.trees.committree import describe, differences
from app.trees.tarsafe import ArchiveLimits, ArchiveRefused, extract_tree

log = logging.getLogger(__name__)

SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
MAX_REDIRECTS = 5
CHUNK = 1 << 16

logsafe.install()  # a download URL carries a signed token: keep it out of httpx's and httpcore's logs


@dataclass(frozen=True)
class TreeLimits(ArchiveLimits):
    """What one source archive may amount to, downloaded and unpacked; a larger one is refused, not cut."""

    max_download_bytes: int = 1 << 30


def download_tree(client: GitHubClient, owner: str, repo: str, sha: str, dest_cache: Path, *,
                  limits: TreeLimits = TreeLimits()) -> Path:
    """The source tree of commit SHA at DEST_CACHE/<sha>, downloaded and unpacked unless already there
    (then only marked used).

    The tree is complete whenever the directory exists (unpacked under a temporary name, then renamed);
    GitHub's top-level `<owner>-<repo>-<sha>/` directory is stripped. Raises TarballRefused (nothing kept)
    for an archive that breaks a limit or a safety rule, GitHubError when it cannot be had.
    """
    if not SHA.fullmatch(sha):
        raise ValueError(f"not a full commit sha: {sha!r}")
    tree = dest_cache / sha
    if use(tree):
        return tree
    dest_cache.mkdir(parents=True, exist_ok=True)
    label = f"{owner}/{repo} at {sha[:12]}"
    listing = client.commit_tree(owner, repo, sha)
    if listing.truncated:
        raise TarballRefused(f"{label}: GitHub lists the commit's tree only in part (too large), so the "
                             "archive cannot be checked against it")
    with tempfile.TemporaryFile(dir=dest_cache, prefix=f".{sha}.", suffix=".tar.gz") as archive:
        log.info("downloading the tarball of %s", label)
        _download(client, owner, repo, sha, archive, limits)
        return cached_entry(tree, functools.partial(_unpack, archive, limits, label, listing))


def _unpack(archive: IO[bytes], limits: TreeLimits, label: str, listing: CommitTree, partial: Path) -> None:
    archive.seek(0)
    try:
        files = extract_tree(archive, partial, limits=limits)
    except ArchiveRefused as exc:
        raise TarballRefused(str(exc)) from None
    if found := differences(partial, listing.blobs):
        raise TarballRefused(f"{label}: {describe(found)}")
    log.info("%s: %d entries unpacked, the commit's tree exactly", label, files)


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
