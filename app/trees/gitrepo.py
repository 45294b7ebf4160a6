"""Revisions of a local git repository as plain trees, read from its objects only.

Never touches the user's work tree, index, branches or HEAD: trees are exported from a scratch bare
repository that borrows the user's object store, so that no attribute of the exported tree (export-ignore,
export-subst, eol conversion, filters) alters what is analysed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from pathlib import Path

from app.trees.cachedir import cached_entry
from app.trees.tarsafe import ArchiveRefused, extract_tree

SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# Highest-precedence attributes: the bytes of the commit, whatever its own .gitattributes say.
NEUTRAL_ATTRIBUTES = "* -export-ignore -export-subst -text -eol -filter -ident -working-tree-encoding\n"
HERMETIC = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}


class GitError(Exception):
    """A git operation failed; the message says which and why."""


def _git(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed (no `git` on PATH)") from None
    if done.returncode != 0:
        raise GitError(done.stderr.strip() or f"git {args[0]} exited with status {done.returncode}")
    return done.stdout.strip()


def resolve(repo: Path, rev: str) -> str:
    """The full commit sha REV names in REPO."""
    if not repo.is_dir():
        raise GitError(f"{repo}: no such directory")
    try:
        _git(["rev-parse", "--git-dir"], cwd=repo)
    except GitError as exc:
        raise GitError(f"{repo}: not a git repository ({exc})") from None
    try:
        return _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], cwd=repo)
    except GitError:
        raise GitError(f"{repo}: {rev!r} names no commit (a shallow clone may lack it: fetch it)") from None


def object_store(repo: Path) -> Path:
    common = _git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=repo)
    return Path(common) / "objects"


def export_tree(repo: Path, sha: str, dest: Path) -> Path:
    """Unpack commit SHA of REPO at DEST (kept, and marked used, when already there); concurrent exports
    of one sha are safe.

    Written under a temporary name and renamed, so DEST is complete whenever it exists.
    """
    if not SHA.fullmatch(sha):
        raise GitError(f"not a full commit sha: {sha!r}")
    return cached_entry(dest, lambda partial: _archive_into(repo, sha, partial))


def cached_tree(repo: Path, rev: str, cache_dir: Path) -> tuple[str, Path]:
    """Resolve REV and export it under CACHE_DIR/trees/<sha>."""
    sha = resolve(repo, rev)
    return sha, export_tree(repo, sha, cache_dir / "trees" / sha)


def _archive_into(repo: Path, sha: str, dest: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="prtriage-git-") as scratch_dir:
        scratch = Path(scratch_dir) / "scratch.git"
        env = {**os.environ, **HERMETIC}
        _git(["init", "--quiet", "--bare", "--template=", str(scratch)], env=env)
        (scratch / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (scratch / "objects" / "info" / "alternates").write_text(f"{object_store(repo)}\n")
        (scratch / "info").mkdir(exist_ok=True)
        (scratch / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)
        _stream_archive(scratch, sha, dest, {**env, "GIT_DIR": str(scratch)})


def _stream_archive(scratch: Path, sha: str, dest: Path, env: dict[str, str]) -> None:
    """`git archive` of SHA unpacked at DEST through the checks a tarball from the network gets (a fetched
    commit is no more trusted than a downloaded one), except that a link out of the tree is left out, not
    fatal: a repository's own absolute symlinks are ordinary content."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(["git", "archive", "--format=tar", f"--prefix={sha[:12]}/", sha],
                                   cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=errors)
        assert process.stdout is not None
        refusal: ArchiveRefused | None = None
        try:
            extract_tree(process.stdout, dest, outward_links="omit")
        except BaseException as exc:
            process.kill()  # it may be blocked writing what nobody reads any more
            if not isinstance(exc, ArchiveRefused):
                raise
            refusal = exc
        finally:
            process.stdout.close()
            status = process.wait()
        if status not in (0, -signal.SIGKILL) or (status != 0 and refusal is None):
            errors.seek(0)  # git failed first: its own reason, not what its cut-short output looked like
            reason = errors.read().decode("utf-8", "replace").strip()
            raise GitError(f"git archive {sha} failed: {reason or f'status {status}'}")
        if refusal is not None:
            raise GitError(f"git archive {sha}: refused: {refusal}")


MAX_DIFF_BYTES = 64 * 2**20  # of `git diff` read; what is beyond is not looked at (diffrefs bounds the rest)
MAX_COMMITS = 250  # as many as GitHub lists for one pull request
# Whatever the user's configuration says: the new side's path as `b/...`, no colour, no external program
DIFF_OPTIONS = ["--no-ext-diff", "--no-textconv", "--no-color", "--no-relative", "--src-prefix=a/",
                "--dst-prefix=b/", "--unified=3"]


def diff_of(repo: Path, base: str, head: str, *, limit: int = MAX_DIFF_BYTES) -> str:
    """The unified diff a pull request of HEAD into BASE shows (from their merge base, `BASE...HEAD`),
    read from objects only; cut after LIMIT bytes."""
    command = ["git", "diff", *DIFF_OPTIONS, f"{base}...{head}", "--"]
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, cwd=repo, env={**os.environ, **HERMETIC}, stdout=subprocess.PIPE,
                                   stderr=errors)
        assert process.stdout is not None
        data = process.stdout.read(limit)
        cut = bool(process.stdout.read(1))
        if cut:
            process.kill()
        process.stdout.close()
        status = process.wait()
        if status != 0 and not cut:
            errors.seek(0)
            raise GitError(f"git diff {base}...{head} failed: "
                           f"{errors.read().decode('utf-8', 'replace').strip() or f'status {status}'}")
    return data.decode("utf-8", "replace")


def commit_messages(repo: Path, base: str, head: str) -> list[str]:
    """The messages of the commits HEAD has and BASE has not, oldest first (at most MAX_COMMITS)."""
    log = _git(["log", "--reverse", f"--max-count={MAX_COMMITS}", "--format=%B%x00", f"{base}..{head}", "--"],
               cwd=repo, env={**os.environ, **HERMETIC})
    return [message.strip() for message in log.split("\0") if message.strip()]


def file_at(repo: Path, rev: str, path: str) -> str | None:
    """The text of PATH at REV, None when REV has no file there."""
    try:
        return _git(["cat-file", "blob", f"{rev}:{path}"], cwd=repo, env={**os.environ, **HERMETIC})
    except GitError:
        return None


def github_slug(repo: Path) -> tuple[str, str] | None:
    """(owner, name) of the GitHub repository `origin` points at, if it does."""
    try:
        url = _git(["remote", "get-url", "origin"], cwd=repo)
    except GitError:
        return None
    match = re.search(r"github\.com[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", url)
    return (match.group(1), match.group(2)) if match else None


def merge_base(repo: Path, one: str, other: str) -> str | None:
    """The best common ancestor of two revisions; None when they share no history."""
    try:
        return _git(["merge-base", "--end-of-options", one, other], cwd=repo)
    except GitError:
        return None


def full_ref_name(repo: Path, rev: str) -> str | None:
    """`refs/remotes/origin/main` for `@{upstream}` (REV itself when it has no name); None when REV names no
    commit."""
    try:
        _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], cwd=repo)
    except GitError:
        return None
    return _git(["rev-parse", "--symbolic-full-name", rev], cwd=repo) or rev
