"""The cache directory on real files: entries made whole and marked when used, pruned least recently used
first down to the cap, never what was used in the last hour, and never half a tree under a reader."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from app.trees.cachedir import RECENT_SECONDS, cached_entry, format_size, parse_size, prune, use

MB = 1_000_000
HOUR = 3600.0


def age(path: Path, seconds: float) -> Path:
    """PATH last used SECONDS ago."""
    moment = time.time() - seconds
    os.utime(path, (moment, moment))
    return path


def tree(cache: Path, name: str, *, hours_ago: float, size: int = MB) -> Path:
    path = cache / "trees" / name
    (path / "pkg").mkdir(parents=True)
    (path / "pkg" / "data.bin").write_bytes(os.urandom(size))
    return age(path, hours_ago * HOUR)


def matrix(cache: Path, key: str, name: str, *, hours_ago: float, size: int = MB) -> Path:
    path = cache / "matrix" / "repository" / key / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))
    return age(path, hours_ago * HOUR)


def left(cache: Path, section: str = "trees") -> list[str]:
    return sorted(os.listdir(cache / section))


def test_the_least_recently_used_go_first_until_the_cache_is_under_its_cap(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for name, hours in (("e", 1.5), ("a", 5), ("c", 3), ("b", 4), ("d", 2)):
        tree(cache, name, hours_ago=hours)

    report = prune(cache, int(2.5 * MB))

    assert left(cache) == ["d", "e"]  # a, b, c were the least recently used
    assert (report.entries, report.removed, report.leftovers) == (5, 3, 0)
    assert 5 * MB < report.before_bytes < 5.1 * MB
    assert 2 * MB < report.after_bytes <= 2.5 * MB
    assert report.summary().splitlines()[1].startswith("removed 3 entries (least recently used first)")


def test_a_use_makes_an_entry_the_most_recently_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    oldest = tree(cache, "oldest", hours_ago=9)
    tree(cache, "older", hours_ago=8)
    tree(cache, "old", hours_ago=7)

    assert use(oldest)
    assert cached_entry(oldest, lambda partial: pytest.fail("an entry there is not made again")) == oldest
    prune(cache, int(1.5 * MB))

    assert left(cache) == ["oldest"]


def test_entries_used_in_the_last_hour_stay_even_over_the_cap(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tree(cache, "running", hours_ago=0.9)
    tree(cache, "just-used", hours_ago=0.01)
    tree(cache, "idle", hours_ago=1.1)

    report = prune(cache, 0)

    assert left(cache) == ["just-used", "running"]
    assert report.removed == 1 and report.after_bytes > report.max_bytes
    assert report.summary().endswith("still over the cap: what is left was used in the last hour, and is "
                                     "kept")


def test_under_the_cap_nothing_goes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tree(cache, "a", hours_ago=100)
    matrix(cache, "k", "m", hours_ago=100)

    report = prune(cache, 3 * MB)

    assert left(cache) == ["a"] and left(cache, "matrix/repository/k") == ["m.json"]
    assert (report.entries, report.removed) == (2, 0)
    assert report.summary().endswith("under the cap: nothing removed")


def test_captured_matrices_are_entries_among_the_trees(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tree(cache, "t-old", hours_ago=6)
    matrix(cache, "policy1", "m-older", hours_ago=7)
    matrix(cache, "policy1", "m-new", hours_ago=2)
    matrix(cache, "policy2", "m-old", hours_ago=5)
    tree(cache, "t-new", hours_ago=3)

    prune(cache, int(2.5 * MB))

    assert left(cache) == ["t-new"]
    kept = (left(cache, "matrix/repository/policy1"), left(cache, "matrix/repository/policy2"))
    assert kept == (["m-new.json"], [])


def test_what_is_not_the_caches_own_is_left_alone(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "notes").mkdir(parents=True)
    (cache / "notes" / "big").write_bytes(bytes(MB))
    age(cache / "notes" / "big", 100 * HOUR)
    tree(cache, "a", hours_ago=100)

    report = prune(cache, 0)

    assert left(cache) == [] and os.listdir(cache / "notes") == ["big"]
    assert report.entries == 1


def test_leftovers_of_interrupted_runs_go_whatever_the_size(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tree(cache, "kept", hours_ago=50)
    stale = [tree(cache, ".abc.x1.partial", hours_ago=2), tree(cache, ".trash-def-00aa", hours_ago=2),
             matrix(cache, "k", ".tmp-xyz", hours_ago=2)]  # left by processes that died
    unpacking = tree(cache, ".ghi.x2.partial", hours_ago=0)  # a download being unpacked right now

    report = prune(cache, 100 * MB)

    assert left(cache) == [".ghi.x2.partial", "kept"] and left(cache, "matrix/repository/k") == []
    assert not any(path.exists() for path in stale) and unpacking.exists()
    assert (report.removed, report.leftovers) == (0, 3)
    assert "removed 3 leftovers of interrupted runs" in report.summary()


def test_an_entry_is_made_once_whole_and_a_failed_one_leaves_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "trees" / "sha"
    made: list[Path] = []

    def fill(partial: Path) -> None:
        made.append(partial)
        (partial / "a.py").write_text("x = 1\n")

    assert cached_entry(dest, fill) == dest and cached_entry(dest, fill) == dest
    assert len(made) == 1 and (dest / "a.py").read_text() == "x = 1\n"
    assert time.time() - dest.stat().st_mtime < 60 and os.listdir(dest.parent) == ["sha"]

    def broken(partial: Path) -> None:
        (partial / "half").write_text("")
        raise RuntimeError("the download broke off")

    with pytest.raises(RuntimeError):
        cached_entry(tmp_path / "trees" / "other", broken)
    assert os.listdir(dest.parent) == ["sha"]
    assert not use(tmp_path / "trees" / "other") and not use(tmp_path / "nowhere" / "x")


FILES = 30


def fill_tree(partial: Path) -> None:
    for index in range(FILES):
        folder = partial / f"d{index % 5}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{index}.py").write_text(f"value = {index}\n")


def read_tree(tree: Path) -> int:
    """Every file of TREE read; raises if any vanishes underneath."""
    def fail(error: OSError) -> None:
        raise error

    count = 0
    for directory, _, files in os.walk(tree, onerror=fail):
        for name in files:
            index = int(name[1:-3])
            assert (Path(directory) / name).read_text() == f"value = {index}\n"
            count += 1
    return count


def test_a_reader_never_sees_half_a_tree_while_the_cache_is_pruned(tmp_path: Path) -> None:
    """Readers take entries as jobs do (marked used, or made again when gone) while prunes take the unused
    ones away; every tree a reader was handed is whole for as long as it reads it."""
    cache = tmp_path / "cache"
    names = [f"{index:040x}" for index in range(60)]
    for name in names:
        (cache / "trees" / name).mkdir(parents=True)
        fill_tree(cache / "trees" / name)
        age(cache / "trees" / name, 2 * HOUR)
    problems: list[str] = []
    reads, stop = [0], threading.Event()

    def reader(seed: int) -> None:
        chooser = random.Random(seed)
        while not stop.is_set():
            name = chooser.choice(names)
            try:
                found = read_tree(cached_entry(cache / "trees" / name, fill_tree))
            except (OSError, AssertionError) as exc:
                problems.append(f"{name}: {exc!r}")
                continue
            if found != FILES:
                problems.append(f"{name}: {found} of {FILES} files")
            reads[0] += 1

    readers = [threading.Thread(target=reader, args=(seed,)) for seed in range(3)]
    for thread in readers:
        thread.start()
    try:
        removed = sum(prune(cache, 0).removed for _ in range(2))
    finally:
        stop.set()
        for thread in readers:
            thread.join()

    assert problems == []
    assert reads[0] > 0 and removed > 0
    kept = left(cache)
    assert not [name for name in kept if name.startswith(".")]  # no trash, no partial left behind
    assert all(time.time() - (cache / "trees" / name).stat().st_mtime < RECENT_SECONDS for name in kept)


def test_sizes() -> None:
    sizes = ("500MB", "10GB", "10 gb", "2GiB", "1.5TB", "4096", "0", "12kib")
    expected = [500 * MB, 10**10, 10**10, 2 << 30, 1_500_000_000_000, 4096, 0, 12 * 1024]
    assert [parse_size(text) for text in sizes] == expected
    for bad in ("", "ten GB", "10 parsecs", "-1GB", "10GBs"):
        with pytest.raises(ValueError, match="is not a size"):
            parse_size(bad)
    assert [format_size(size) for size in (0, 999, 1500, 2_500_000, 10**10)] == \
        ["0 B", "999 B", "1.5 KB", "2.5 MB", "10.0 GB"]
