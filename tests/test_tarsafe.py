"""The one safe unpacker of source archives: what `omit` (git's trees) leaves out and what it still refuses;
the hostile tarballs of the network are in tests/github/test_github_sources.py."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from app.demo.localgithub import entry, raw_tarball
from app.trees.tarsafe import ArchiveLimits, ArchiveRefused, extract_tree

TOP = "top"


def archive(*members: tuple[tarfile.TarInfo, bytes | None]) -> io.BytesIO:
    return io.BytesIO(raw_tarball([entry(f"{TOP}/", tarfile.DIRTYPE, mode=0o755), *members]))


def listing(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


OUTWARD = (entry(f"{TOP}/a.py", content=b"x = 1\n"),
           entry(f"{TOP}/absolute", tarfile.SYMTYPE, linkname="/etc/passwd"),
           entry(f"{TOP}/up", tarfile.SYMTYPE, linkname="../../outside"),
           entry(f"{TOP}/here", tarfile.SYMTYPE, linkname="."),
           entry(f"{TOP}/through", tarfile.SYMTYPE, linkname="here/.."),
           entry(f"{TOP}/inside", tarfile.SYMTYPE, linkname="a.py"))


def test_omit_leaves_out_every_link_that_leads_out_and_keeps_the_rest(tmp_path: Path) -> None:
    dest = tmp_path / "tree"
    dest.mkdir()

    assert extract_tree(archive(*OUTWARD), dest, outward_links="omit") == 7

    assert listing(dest) == ["a.py", "here", "inside"]
    assert (dest / "inside").read_text() == "x = 1\n"
    assert listing(tmp_path) == ["tree", *(f"tree/{name}" for name in listing(dest))]


@pytest.mark.parametrize(("links", "reason"), [(OUTWARD[1:2], "absolute path"),
                                             (OUTWARD[2:3], "points out of the tree"),
                                             (OUTWARD[3:5], "through other symlinks")])
def test_refuse_refuses_each_of_them(tmp_path: Path, links: tuple[tuple[tarfile.TarInfo, bytes | None], ...],
                                     reason: str) -> None:
    with pytest.raises(ArchiveRefused, match=reason):
        extract_tree(archive(OUTWARD[0], *links), tmp_path)


STILL_REFUSED = {
    "traversal": ((entry(f"{TOP}/../x", content=b"owned"),), "path traversal"),
    "absolute name": ((entry("/tmp/prtriage-owned", content=b"owned"),), "absolute path"),
    "write beneath an omitted link": ((entry(f"{TOP}/d", tarfile.SYMTYPE, linkname="/tmp"),
                                       entry(f"{TOP}/d/prtriage-owned", content=b"owned")), "beneath"),
    "hard link out": ((entry(f"{TOP}/h", tarfile.LNKTYPE, linkname="/etc/passwd"),), "hard link"),
    "device": ((entry(f"{TOP}/null", tarfile.CHRTYPE),), "device or fifo"),
    "fifo": ((entry(f"{TOP}/pipe", tarfile.FIFOTYPE),), "device or fifo"),
    "duplicate": ((entry(f"{TOP}/a", content=b"1"), entry(f"{TOP}/a", content=b"2")), "appears twice"),
}


@pytest.mark.parametrize("case", list(STILL_REFUSED))
def test_omit_refuses_everything_else_whole(tmp_path: Path, case: str) -> None:
    members, reason = STILL_REFUSED[case]
    with pytest.raises(ArchiveRefused, match=reason):
        extract_tree(archive(*members), tmp_path, outward_links="omit")
    assert not Path("/tmp/prtriage-owned").exists()


def test_limits_hold_for_a_git_archive(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for index in range(5):
        (repo / f"f{index}.py").write_text("x = 1\n" * 1000)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "x"],
                   cwd=repo, check=True)
    stream = subprocess.run(["git", "archive", "--format=tar", "--prefix=p/", "HEAD"], cwd=repo, check=True,
                            capture_output=True).stdout

    for limits, reason in ((ArchiveLimits(max_files=3), "more than 3 entries"),
                           (ArchiveLimits(max_tree_bytes=20_000), "more than the 20000 bytes allowed")):
        dest = tmp_path / reason[:12]
        dest.mkdir()
        with pytest.raises(ArchiveRefused, match=reason):
            extract_tree(io.BytesIO(stream), dest, limits=limits, outward_links="omit")
    complete = tmp_path / "complete"
    complete.mkdir()
    assert extract_tree(io.BytesIO(stream), complete, outward_links="omit") == 6
    assert listing(complete) == [f"f{index}.py" for index in range(5)]
