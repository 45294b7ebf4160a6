"""gitrepo on real repositories: revisions resolve, trees export faithfully, the checkout stays untouched."""

from __future__ import annotations

import hashlib
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.trees.gitrepo import GitError, cached_tree, export_tree, github_slug, resolve


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "train.py").write_text("print('train')\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("x = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    commit_all(root, "first")
    return root


def snapshot(repo: Path) -> dict[str, str]:
    """Every file of the checkout, .git included, by content hash; plus HEAD and the branches."""
    files = {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(repo.rglob("*")) if p.is_file() and not p.is_symlink()}
    files["<HEAD>"] = git(repo, "symbolic-ref", "HEAD")
    files["<branches>"] = git(repo, "branch", "--list", "--all")
    return files


def test_resolve_gives_the_full_sha(repo: Path) -> None:
    sha = resolve(repo, "HEAD")
    assert sha == git(repo, "rev-parse", "HEAD")
    assert resolve(repo, "main") == sha
    assert resolve(repo, sha[:8]) == sha


def test_resolve_rejects_what_names_no_commit(repo: Path, tmp_path: Path) -> None:
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    for bad in ("nope", tree, "--output=/tmp/x", "HEAD~5"):
        with pytest.raises(GitError, match="names no commit"):
            resolve(repo, bad)
    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    with pytest.raises(GitError, match="not a git repository"):
        resolve(not_a_repo, "HEAD")
    with pytest.raises(GitError, match="no such directory"):
        resolve(tmp_path / "missing", "HEAD")


def test_export_writes_the_committed_tree(repo: Path, tmp_path: Path) -> None:
    sha = resolve(repo, "HEAD")
    (repo / "train.py").write_text("uncommitted\n")
    tree = export_tree(repo, sha, tmp_path / "out" / sha)
    assert (tree / "train.py").read_text() == "print('train')\n"
    assert (tree / "tests" / "test_x.py").read_text() == "x = 1\n"
    assert os.access(tree / "run.sh", os.X_OK)
    assert tree.stat().st_mode & 0o777 == 0o755
    assert not (tree / ".git").exists()
    assert [p.name for p in (tmp_path / "out").iterdir()] == [sha]  # no partial directory left behind


def test_export_ignores_the_trees_own_archive_attributes(repo: Path, tmp_path: Path) -> None:
    attributes = "tests/** export-ignore\nversion.txt export-subst\n* text eol=crlf\n"
    (repo / ".gitattributes").write_text(attributes)
    (repo / "version.txt").write_text("$Format:%H$\n")
    sha = commit_all(repo, "attributes")
    tree = export_tree(repo, sha, tmp_path / sha)
    assert (tree / "tests" / "test_x.py").read_bytes() == b"x = 1\n"
    assert (tree / "version.txt").read_bytes() == b"$Format:%H$\n"


def test_export_leaves_out_links_that_point_out_of_the_tree(repo: Path, tmp_path: Path) -> None:
    (repo / "escape").symlink_to("/etc/passwd")
    (repo / "inside").symlink_to("train.py")
    sha = commit_all(repo, "links")
    tree = export_tree(repo, sha, tmp_path / sha)
    assert not (tree / "escape").exists() and not (tree / "escape").is_symlink()
    assert (tree / "inside").read_text() == "print('train')\n"


def test_export_never_touches_the_checkout(repo: Path, tmp_path: Path) -> None:
    first = resolve(repo, "HEAD")
    git(repo, "branch", "feature")
    (repo / "train.py").write_text("print('second')\n")
    second = commit_all(repo, "second")
    (repo / "train.py").write_text("dirty work tree\n")
    (repo / "staged.py").write_text("staged\n")
    git(repo, "add", "staged.py")
    (repo / "untracked.txt").write_text("untracked\n")
    status_before = git(repo, "status", "--porcelain")  # first, as it may refresh the index
    before = snapshot(repo)
    export_tree(repo, first, tmp_path / "trees" / first)
    cached_tree(repo, "feature", tmp_path / "cache")
    cached_tree(repo, second, tmp_path / "cache")
    assert snapshot(repo) == before
    assert git(repo, "status", "--porcelain") == status_before


def test_concurrent_exports_of_one_sha_agree(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(max_workers=4) as pool:
        exported = list(pool.map(lambda _: cached_tree(repo, "HEAD", cache), range(4)))
    sha = resolve(repo, "HEAD")
    assert {path for _, path in exported} == {cache / "trees" / sha}
    assert sorted(p.name for p in (cache / "trees").iterdir()) == [sha]
    assert (cache / "trees" / sha / "train.py").read_text() == "print('train')\n"


def test_a_cached_tree_is_reused(repo: Path, tmp_path: Path) -> None:
    sha, tree = cached_tree(repo, "HEAD", tmp_path)
    (tree / "marker").write_text("kept")
    assert cached_tree(repo, "HEAD", tmp_path) == (sha, tree)
    assert (tree / "marker").exists()


def test_export_refuses_a_name_that_is_not_a_sha(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(GitError, match="not a full commit sha"):
        export_tree(repo, "../../etc", tmp_path / "x")


def test_github_slug_reads_origin(repo: Path) -> None:
    assert github_slug(repo) is None
    git(repo, "remote", "add", "origin", "git@github.com:radixark/miles.git")
    assert github_slug(repo) == ("radixark", "miles")
    git(repo, "remote", "set-url", "origin", "https://github.com/radixark/miles")
    assert github_slug(repo) == ("radixark", "miles")


def write_object(repo: Path, kind: str, data: bytes) -> str:
    return subprocess.run(["git", "hash-object", "-w", "-t", kind, "--literally", "--stdin"], cwd=repo,
                          input=data, check=True, capture_output=True).stdout.strip().decode()


def crafted_commit(repo: Path, entries: list[tuple[bytes, bytes, str]]) -> str:
    """A commit whose tree git would never write itself (a fetched one can hold it all the same)."""
    tree = write_object(repo, "tree", b"".join(mode + b" " + name + b"\0" + bytes.fromhex(sha)
                                               for mode, name, sha in entries))
    return git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit-tree", tree, "-m", "x")


@pytest.mark.parametrize("case", ["a name twice", "a link and a directory of one name"])
def test_an_ambiguous_tree_is_refused_whole(repo: Path, tmp_path: Path, case: str) -> None:
    one, two, target = (write_object(repo, "blob", data) for data in (b"1\n", b"2\n", str(tmp_path).encode()))
    inner = write_object(repo, "tree", b"100644 planted\0" + bytes.fromhex(one))
    entries = ([(b"100644", b"a", one), (b"100644", b"a", two)] if case == "a name twice"
               else [(b"120000", b"d", target), (b"40000", b"d", inner)])
    sha = crafted_commit(repo, entries)

    with pytest.raises(GitError, match=rf"git archive {sha}: refused: .*(appears twice|beneath)"):
        export_tree(repo, sha, tmp_path / "trees" / sha)

    assert os.listdir(tmp_path / "trees") == []  # nothing kept, no temporary left
    assert not (tmp_path / "planted").exists()
