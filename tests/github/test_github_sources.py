"""Source trees from the fake GitHub's tarballs: the 302 to another host followed without the token,
safe unpacking into the cache, cache hits that download nothing, and hostile archives refused whole."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from app.demo.localgithub import FakeGitHub, entry, raw_tarball
from app.github import GitHubClient, NotFound, TarballRefused, TreeLimits, download_tree

SHA = "0123456789abcdef0123456789abcdef01234567"
TOP = f"octo-widgets-{SHA[:7]}"
TARBALL = rf"/repos/octo/widgets/tarball/{SHA}"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "source"
    (root / "miles" / "utils").mkdir(parents=True)
    (root / "miles" / "utils" / "arguments.py").write_text("def validate_args(args):\n    assert args\n")
    (root / "scripts").mkdir()
    (root / "scripts" / "run.sh").write_text("#!/bin/sh\npython3 train.py --colocate\n")
    (root / "scripts" / "run.sh").chmod(0o755)
    (root / "README.md").write_text("# widgets\n")
    (root / "docs").symlink_to("README.md")
    return root


def listing(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def test_download_and_unpack(fake: FakeGitHub, client: GitHubClient, source: Path, tmp_path: Path):
    fake.add_tarball("octo/widgets", SHA, source)
    cache = tmp_path / "cache"

    tree = download_tree(client, "octo", "widgets", SHA, cache)

    assert tree == cache / SHA
    assert listing(tree) == ["README.md", "docs", "miles", "miles/utils", "miles/utils/arguments.py",
                             "scripts", "scripts/run.sh"]
    validator = (tree / "miles" / "utils" / "arguments.py").read_text()
    assert validator == "def validate_args(args):\n    assert args\n"
    assert os.readlink(tree / "docs") == "README.md"
    assert stat.S_IMODE((tree / "scripts" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((tree / "README.md").stat().st_mode) == 0o644
    assert stat.S_IMODE((tree / "miles").stat().st_mode) == 0o755
    assert os.listdir(cache) == [SHA]  # no temporary file or directory left behind


def test_the_token_goes_to_the_api_but_not_to_the_download_host(fake: FakeGitHub, client: GitHubClient,
                                                                 source: Path, tmp_path: Path, caplog):
    caplog.set_level(logging.DEBUG)
    fake.add_tarball("octo/widgets", SHA, source)

    download_tree(client, "octo", "widgets", SHA, tmp_path / "cache")

    [redirect] = fake.calls("GET", TARBALL)
    [download] = fake.calls("GET", server="download")
    assert redirect.auth == "token" and redirect.status == 302
    assert download.auth is None and "authorization" not in download.headers and download.status == 200
    signed = download.query["token"]
    assert signed not in caplog.text  # the download URL's own credential is not logged either
    assert all(token not in caplog.text for token in fake.tokens)


def test_a_cache_hit_downloads_nothing(fake: FakeGitHub, client: GitHubClient, source: Path, tmp_path: Path):
    fake.add_tarball("octo/widgets", SHA, source)
    first = download_tree(client, "octo", "widgets", SHA, tmp_path / "cache")
    fake.clear_log()

    again = download_tree(client, "octo", "widgets", SHA, tmp_path / "cache")

    assert again == first and fake.requests == []


def test_download_faults_are_retried(fake: FakeGitHub, client: GitHubClient, source: Path, tmp_path: Path,
                                     sleeps):
    fake.add_tarball("octo/widgets", SHA, source)
    fake.fail_next(1, status=502, path=TARBALL)
    fake.fail_next(1, status=503, server="download")

    tree = download_tree(client, "octo", "widgets", SHA, tmp_path / "cache")

    assert (tree / "README.md").is_file() and sleeps == [1.0, 1.0]


def test_unknown_sha_and_malformed_sha(fake: FakeGitHub, client: GitHubClient, tmp_path: Path):
    with pytest.raises(NotFound):
        download_tree(client, "octo", "widgets", SHA, tmp_path / "cache")
    with pytest.raises(ValueError, match="not a full commit sha"):
        download_tree(client, "octo", "widgets", "../../etc", tmp_path / "cache")
    assert os.listdir(tmp_path / "cache") == []


def test_a_download_larger_than_allowed_is_refused(fake: FakeGitHub, client: GitHubClient, source: Path,
                                                   tmp_path: Path):
    data = fake.add_tarball("octo/widgets", SHA, source)

    with pytest.raises(TarballRefused, match=rf"more than the {len(data) - 1} bytes allowed"):
        download_tree(client, "octo", "widgets", SHA, tmp_path / "cache",
                      limits=TreeLimits(max_download_bytes=len(data) - 1))
    assert os.listdir(tmp_path / "cache") == []


def hostile(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    return raw_tarball([entry(f"{TOP}/", tarfile.DIRTYPE, mode=0o755), *members])


HOSTILE = {
    "traversal": (hostile(entry(f"{TOP}/../../x", content=b"owned")), "path traversal"),
    "traversal first": (raw_tarball([entry("../x", content=b"owned")]), "path traversal"),
    "absolute path": (hostile(entry("/tmp/prtriage-owned", content=b"owned")), "absolute path"),
    "outside the top directory": (hostile(entry("elsewhere/x", content=b"x")), "outside the top-level"),
    "symlink out": (hostile(entry(f"{TOP}/link", tarfile.SYMTYPE, linkname="../../outside")),
                    "points out of the tree"),
    "symlink absolute": (hostile(entry(f"{TOP}/link", tarfile.SYMTYPE, linkname="/etc")), "absolute path"),
    "symlink out through a symlink": (hostile(entry(f"{TOP}/a", tarfile.SYMTYPE, linkname="."),
                                              entry(f"{TOP}/b", tarfile.SYMTYPE, linkname="a/..")),
                                      "through other symlinks"),
    "write through a symlink": (hostile(entry(f"{TOP}/sub/", tarfile.DIRTYPE, mode=0o755),
                                        entry(f"{TOP}/d", tarfile.SYMTYPE, linkname="sub"),
                                        entry(f"{TOP}/d/x", content=b"x")), "beneath"),
    "hardlink out": (hostile(entry(f"{TOP}/h", tarfile.LNKTYPE, linkname="../outside")), "hard link"),
    "hardlink absolute": (hostile(entry(f"{TOP}/h", tarfile.LNKTYPE, linkname="/etc/passwd")), "hard link"),
    "hardlink to a later name": (hostile(entry(f"{TOP}/h", tarfile.LNKTYPE, linkname=f"{TOP}/later")),
                                 "no earlier file"),
    "character device": (hostile(entry(f"{TOP}/null", tarfile.CHRTYPE)), "device or fifo"),
    "block device": (hostile(entry(f"{TOP}/disk", tarfile.BLKTYPE)), "device or fifo"),
    "fifo": (hostile(entry(f"{TOP}/pipe", tarfile.FIFOTYPE)), "device or fifo"),
    "duplicate": (hostile(entry(f"{TOP}/a", content=b"1"), entry(f"{TOP}/a", content=b"2")), "appears twice"),
    "not a tarball": (b"<html>rate limited</html>", "unreadable archive"),
    "empty": (raw_tarball([]), "empty archive"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_tarballs_are_refused_whole(fake: FakeGitHub, client: GitHubClient, tmp_path: Path,
                                            case: str):
    data, reason = HOSTILE[case]
    fake.set_tarball("octo/widgets", SHA, data)
    before = listing(tmp_path)

    with pytest.raises(TarballRefused, match=reason):
        download_tree(client, "octo", "widgets", SHA, tmp_path / "cache")

    assert os.listdir(tmp_path / "cache") == []  # nothing kept, no temporary left
    assert listing(tmp_path) == [*before, "cache"]  # nothing written beside the cache
    assert not Path("/tmp/prtriage-owned").exists()


def test_too_many_files(fake: FakeGitHub, client: GitHubClient, tmp_path: Path):
    files = [entry(f"{TOP}/f{index}", content=b"x") for index in range(10)]
    fake.set_tarball("octo/widgets", SHA, hostile(*files))

    with pytest.raises(TarballRefused, match="more than 5 entries"):
        download_tree(client, "octo", "widgets", SHA, tmp_path / "cache", limits=TreeLimits(max_files=5))
    assert os.listdir(tmp_path / "cache") == []


def test_too_large_unpacked(fake: FakeGitHub, client: GitHubClient, tmp_path: Path):
    # compresses to a few bytes: only the unpacked size gives it away
    fake.set_tarball("octo/widgets", SHA, hostile(entry(f"{TOP}/zeros", content=bytes(200_000))))

    with pytest.raises(TarballRefused, match="unpacks to more than the 100000 bytes"):
        download_tree(client, "octo", "widgets", SHA, tmp_path / "cache",
                      limits=TreeLimits(max_tree_bytes=100_000))
    assert os.listdir(tmp_path / "cache") == []


def test_a_blob_of_zeros_is_neither_written_out_in_full_nor_kept_in_the_cache(
        fake: FakeGitHub, client: GitHubClient, tmp_path: Path) -> None:
    size = TreeLimits().max_file_bytes  # the largest file a header may announce
    fake.set_tarball("octo/widgets", SHA, hostile(entry(f"{TOP}/zeros", content=bytes(size))))

    with pytest.raises(TarballRefused, match="unpacks to more than 200 times its size"):
        download_tree(client, "octo", "widgets", SHA, tmp_path / "cache")
    assert os.listdir(tmp_path / "cache") == []


def test_a_symlink_chain_that_stays_inside_is_kept(fake: FakeGitHub, client: GitHubClient, tmp_path: Path):
    fake.set_tarball("octo/widgets", SHA, hostile(
        entry(f"{TOP}/pkg/", tarfile.DIRTYPE, mode=0o755), entry(f"{TOP}/pkg/real.py", content=b"x = 1\n"),
        entry(f"{TOP}/latest", tarfile.SYMTYPE, linkname="pkg"),
        entry(f"{TOP}/alias.py", tarfile.SYMTYPE, linkname="latest/real.py"),
        entry(f"{TOP}/pkg/copy.py", tarfile.LNKTYPE, linkname=f"{TOP}/pkg/real.py")))

    tree = download_tree(client, "octo", "widgets", SHA, tmp_path / "cache")

    assert (tree / "alias.py").read_text() == "x = 1\n"
    assert (tree / "pkg" / "copy.py").read_text() == "x = 1\n"


def git_archive_of(tmp_path: Path, files: dict[str, str]) -> tuple[Path, bytes, str]:
    """A git repository holding FILES in one commit: its checkout, `git archive`'s tarball of it (made as
    GitHub makes its tarballs, `.gitattributes` applied) and the commit's sha."""
    work = tmp_path / "work"
    for name, content in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(content)

    def git(*args: str) -> bytes:
        return subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True).stdout

    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "one")
    sha = git("rev-parse", "HEAD").decode().strip()
    archive = git("archive", "--format=tar.gz", f"--prefix=octo-widgets-{sha[:7]}/", "HEAD")
    shutil.rmtree(work / ".git")
    return work, archive, sha


HIDDEN_CHECK = {
    "pkg/arguments.py": "try:\n    from pkg.strict import check\nexcept ImportError:\n    check = None\n",
    "pkg/strict.py": "def check(args):\n    assert not args.colocate\n",
    "pkg/version.py": "REVISION = '$Format:%H$'\n",
}


@pytest.mark.parametrize(("attributes", "named"), [
    ("pkg/strict.py export-ignore\n", "pkg/strict.py is missing"),
    ("pkg/version.py export-subst\n", "pkg/version.py differs"),
])
def test_a_tarball_without_what_the_commit_has_is_refused(fake: FakeGitHub, client: GitHubClient,
                                                          tmp_path: Path, attributes: str, named: str):
    """A head hiding its new check from GitHub's tarball with .gitattributes (the checkout has it)."""
    checkout, archive, sha = git_archive_of(tmp_path, {**HIDDEN_CHECK, ".gitattributes": attributes})
    fake.set_tarball("octo/widgets", sha, archive)
    fake.set_tree("octo/widgets", sha, checkout)

    with pytest.raises(TarballRefused, match=f"not the commit's tree .*: {named}"):
        download_tree(client, "octo", "widgets", sha, tmp_path / "cache")
    assert os.listdir(tmp_path / "cache") == []  # nothing of it is kept


def test_a_git_archive_without_export_attributes_is_the_commits_tree(fake: FakeGitHub, client: GitHubClient,
                                                                     tmp_path: Path):
    checkout, archive, sha = git_archive_of(tmp_path, {**HIDDEN_CHECK, ".gitattributes": "*.py text\n"})
    fake.set_tarball("octo/widgets", sha, archive)
    fake.set_tree("octo/widgets", sha, checkout)

    tree = download_tree(client, "octo", "widgets", sha, tmp_path / "cache")

    assert (tree / "pkg" / "strict.py").read_text() == HIDDEN_CHECK["pkg/strict.py"]
