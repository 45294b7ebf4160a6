"""Sizes and lengths an untrusted archive is held to before the file system is asked: one file's size at its
header, a blob of zeros stopped while it is being written (the ratio of unpacked to read bytes), paths and
names longer than a file system takes refused with their own reason, never "unreadable archive"."""

from __future__ import annotations

import io
import tarfile
import zlib
from pathlib import Path

import pytest

from app.demo.localgithub import entry, raw_tarball
from app.trees.tarsafe import CHUNK, ArchiveLimits, ArchiveRefused, extract_tree

MIB = 1024 * 1024
GIB = 1024 * MIB
LIMITS = ArchiveLimits()


def header(name: str, size: int = 0) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    if name.endswith("/"):
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info.tobuf(format=tarfile.GNU_FORMAT)


def gzipped(*parts: bytes, zeros: int = 0) -> io.BytesIO:
    """PARTS then ZEROS zero bytes, gzip at its best ratio, built a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [packer.compress(part) for part in parts]
    block = bytes(MIB)
    for _ in range(zeros // MIB):
        out.append(packer.compress(block))
    out.append(packer.compress(bytes(zeros % MIB)))
    out.append(packer.flush())
    return io.BytesIO(b"".join(out))


def files_in(root: Path) -> dict[str, int]:
    return {str(path.relative_to(root)): path.stat().st_size for path in root.rglob("*") if path.is_file()}


def test_a_file_over_the_limit_is_refused_at_its_header_before_anything_is_written(tmp_path: Path) -> None:
    # two GiB of zeros announced, one MiB of them sent: the header alone must be enough to refuse
    archive = gzipped(header("top/"), header("top/blob", 2 * GIB), zeros=MIB)

    with pytest.raises(ArchiveRefused, match=f"'top/blob': a file of {2 * GIB} bytes \\(more than the "
                                             f"{LIMITS.max_file_bytes} allowed\\)"):
        extract_tree(archive, tmp_path)

    assert files_in(tmp_path) == {}


def test_a_file_at_the_limit_with_ordinary_content_unpacks(tmp_path: Path) -> None:
    limits = ArchiveLimits(max_file_bytes=300_000)
    content = b"".join(b"def f%d(): return %d\n" % (index, index) for index in range(15_000))[:300_000]

    extract_tree(io.BytesIO(raw_tarball([entry("top/", tarfile.DIRTYPE, mode=0o755),
                                         entry("top/big.py", content=content)])), tmp_path, limits=limits)

    assert files_in(tmp_path) == {"big.py": 300_000}
    with pytest.raises(ArchiveRefused, match=r"'top/big\.py': a file of 300000 bytes"):
        extract_tree(io.BytesIO(raw_tarball([entry("top/", tarfile.DIRTYPE, mode=0o755),
                                             entry("top/big.py", content=content)])), tmp_path / "again",
                     limits=ArchiveLimits(max_file_bytes=299_999))


def test_a_blob_of_zeros_under_the_file_limit_is_not_written_out_in_full(tmp_path: Path) -> None:
    size = LIMITS.max_file_bytes - MIB  # allowed by its header
    archive = gzipped(header("top/"), header("top/zeros", size), zeros=size)
    assert len(archive.getvalue()) < size // 500

    with pytest.raises(ArchiveRefused, match=f"'top/zeros': the archive unpacks to more than "
                                             f"{LIMITS.max_ratio} times its size"):
        extract_tree(archive, tmp_path)

    written = files_in(tmp_path)["zeros"]
    assert LIMITS.ratio_floor_bytes < written <= LIMITS.ratio_floor_bytes + CHUNK < size


def test_zeros_below_the_floor_and_compressible_source_unpack(tmp_path: Path) -> None:
    source = b"".join(b"assert args.flag_%d is not None\n" % index for index in range(400_000))
    members = [entry("top/", tarfile.DIRTYPE, mode=0o755), entry("top/zeros.bin", content=bytes(8 * MIB)),
               entry("top/generated.py", content=source)]

    extract_tree(io.BytesIO(raw_tarball(members)), tmp_path)

    assert files_in(tmp_path) == {"zeros.bin": 8 * MIB, "generated.py": len(source)}


@pytest.mark.parametrize(("name", "reason"), [
    ("top/" + "/".join(["d" * 199] * 20) + "/x.py", "a path of 4008 bytes \\(more than the 3072 allowed\\)"),
    ("top/" + "n" * 300 + ".py", "a name of 303 bytes \\(file systems allow 255\\)"),
    ("top/" + "é" * 130 + ".py", "a name of 263 bytes"),  # bytes, not characters
])
def test_a_path_or_name_longer_than_a_file_system_takes_is_refused_with_its_reason(
        tmp_path: Path, name: str, reason: str) -> None:
    archive = io.BytesIO(raw_tarball([entry("top/", tarfile.DIRTYPE, mode=0o755),
                                      entry(name, content=b"1\n")]))

    with pytest.raises(ArchiveRefused, match=reason) as refused:
        extract_tree(archive, tmp_path)

    assert "unreadable archive" not in str(refused.value)
    assert files_in(tmp_path) == {}


def test_the_longest_path_allowed_still_unpacks(tmp_path: Path) -> None:
    name = "top/" + "/".join(["d" * 250] * 12)[:3072 - len("top/") - len("/x.py")].rstrip("/") + "/x.py"
    assert len(name) <= LIMITS.max_path_bytes
    archive = io.BytesIO(raw_tarball([entry("top/", tarfile.DIRTYPE, mode=0o755),
                                      entry(name, content=b"1\n")]))

    extract_tree(archive, tmp_path)

    assert files_in(tmp_path) == {name.removeprefix("top/"): 2}
