"""Tar headers bounded before tarfile reads them: a huge pax or GNU long-name header (tarfile reads it whole)
and pax data that sends Python 3.11.7's parser quadratic (CVE-2024-6232) are refused at once, in little
memory; real pax and GNU archives, compressed every way tarfile knows, still unpack."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import time
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from app.trees.tarsafe import ArchiveRefused, extract_tree

MIB = 1024 * 1024
HUGE = 256 * MIB


def header(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode = kind, size, 0o644
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def padding(size: int) -> bytes:
    return b"\0" * (-size % 512)


def gzipped_with_huge_header(kind: bytes) -> io.BytesIO:
    """A top dir, a `kind` header of HUGE bytes (zeros, streamed: about 1.2 MB compressed), then a file."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    out = [packer.compress(header("top/", tarfile.DIRTYPE, 0))]
    out.append(packer.compress(header("././@LongLink", kind, HUGE)))
    zeros = bytes(MIB)
    for _ in range(HUGE // MIB):
        out.append(packer.compress(zeros))
    member = header("top/a.py", tarfile.REGTYPE, 6) + b"x = 1\n" + padding(6)
    out.append(packer.compress(member + bytes(1024)))
    out.append(packer.flush())
    return io.BytesIO(b"".join(out))


@pytest.mark.parametrize(("kind", "what"), [
    (tarfile.XHDTYPE, "pax"), (tarfile.GNUTYPE_LONGNAME, "GNU long name"),
    (tarfile.GNUTYPE_LONGLINK, "GNU long link name")])
def test_a_huge_extended_header_is_refused_before_it_is_read(tmp_path: Path, kind: bytes, what: str) -> None:
    archive = gzipped_with_huge_header(kind)
    assert len(archive.getvalue()) < 2 * MIB
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ArchiveRefused, match=f"a {what} header of {HUGE} bytes"):
            extract_tree(archive, tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB  # tarfile alone reads all HUGE bytes into one bytes object
    assert time.monotonic() - started < 2


def pax_tar(records: bytes, member: bytes = b"x = 1\n") -> io.BytesIO:
    body = header("top/", tarfile.DIRTYPE, 0) + header("top/PaxHeader", tarfile.XHDTYPE, len(records))
    body += records + padding(len(records))
    body += header("top/a.py", tarfile.REGTYPE, len(member)) + member + padding(len(member)) + bytes(1024)
    return io.BytesIO(body)


def record(key: bytes, value: bytes) -> bytes:
    """One pax record, "LENGTH KEY=VALUE\\n", its length counting itself."""
    rest = b" " + key + b"=" + value + b"\n"
    length = len(rest) + 1
    while len(str(length).encode()) + len(rest) != length:
        length += 1
    return str(length).encode() + rest


def test_pax_data_that_makes_tarfile_quadratic_is_refused_at_once(tmp_path: Path) -> None:
    # 60 KB of digits under the size bound: Python 3.11.7's tarfile spends about 13 s in one regex search
    started = time.monotonic()
    with pytest.raises(ArchiveRefused, match="a run of more than 64 digits"):
        extract_tree(pax_tar(record(b"comment", b"1" * 60_000)), tmp_path)
    assert time.monotonic() - started < 1


def test_a_pax_size_record_is_followed(tmp_path: Path) -> None:
    # the member's ustar size says 6, its pax record 12: the next header is where the pax size puts it
    content = b"x = 1\ny = 2\n"
    records = record(b"size", b"12")
    body = header("top/", tarfile.DIRTYPE, 0) + header("top/PaxHeader", tarfile.XHDTYPE, len(records))
    body += records + padding(len(records)) + header("top/a.py", tarfile.REGTYPE, 6) + content
    body += padding(len(content)) + header("top/b.py", tarfile.REGTYPE, 0) + bytes(1024)
    assert extract_tree(io.BytesIO(body), tmp_path) == 3
    assert (tmp_path / "a.py").read_bytes() == content and (tmp_path / "b.py").exists()


@pytest.mark.parametrize("refused", [record(b"GNU.sparse.major", b"1"), b"12 path=x\n", b"99 path=x\n"],
                         ids=["sparse", "short-length", "long-length"])
def test_malformed_or_sparse_pax_is_refused(tmp_path: Path, refused: bytes) -> None:
    with pytest.raises(ArchiveRefused):
        extract_tree(pax_tar(refused), tmp_path)


def real_archive(fmt: int) -> bytes:
    deep = "top/" + "/".join(["d" * 60] * 6) + "/module.py"  # 370 bytes: a pax or GNU long name
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as tar:
        for name, data in (("top/", None), (deep, b"x = 1\n"), ("top/ok.py", b"y = 2\n")):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE if data is None else tarfile.REGTYPE
            info.size, info.mode = len(data or b""), 0o755 if data is None else 0o644
            tar.addfile(info, io.BytesIO(data or b""))
        link = tarfile.TarInfo("top/" + "l" * 200)
        link.type, link.linkname = tarfile.SYMTYPE, "ok.py" + "/../ok.py" * 20  # a long link name too
        tar.addfile(link)
    return buffer.getvalue()


COMPRESSIONS: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda data: data, "gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=["pax", "gnu"])
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_real_archives_with_long_names_still_unpack(tmp_path: Path, fmt: int, compression: str) -> None:
    archive = io.BytesIO(COMPRESSIONS[compression](real_archive(fmt)))
    assert extract_tree(archive, tmp_path, outward_links="omit") == 4
    assert (tmp_path / "/".join(["d" * 60] * 6) / "module.py").read_bytes() == b"x = 1\n"
    assert (tmp_path / ("l" * 200)).is_symlink()


def figures() -> None:
    """The figures of docs/sandbox.md: `python -m tests.test_tarsafe_headers` (one process per archive)."""
    import resource
    import sys
    import tempfile

    archive = gzipped_with_huge_header(tarfile.XHDTYPE) if sys.argv[1] == "huge" \
        else pax_tar(record(b"comment", b"1" * 60_000))
    started, before = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        outcome = f"unpacked {extract_tree(archive, Path(tempfile.mkdtemp()))} entries"
    except ArchiveRefused as error:
        outcome = f"refused: {error}"
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
    print(f"{sys.argv[1]}: {len(archive.getvalue())} bytes, {time.monotonic() - started:.2f} s, "
          f"peak RSS +{grown} MiB, {outcome}")


if __name__ == "__main__":
    figures()
