"""The cache directory (PRTRIAGE_CACHE_DIR): entries made whole under a temporary name and renamed into
place, marked when used, and pruned least recently used first when the cache grows over its cap.

Entries are `trees/<sha>/` (unpacked source trees), `matrix/<repository>/<capture key>/<tree hash>.json`
(captured matrices), `validation/<job key>.json` (a base's validation results) and `envs/<key>/` (analysis
environments, app/engine/environments.py); an entry's last use is
its modification time. A reader marks an entry used (`use`, or `cached_entry`) before reading it, and an
entry used within RECENT_SECONDS is never removed: a job still reading it keeps it whole. Names starting
with a dot are temporaries (`.<sha>.….partial`, `.tmp-….json`, `.trash-…`); older than RECENT_SECONDS
they are leftovers of a process that died, and go too.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

log = logging.getLogger(__name__)

SECTIONS = {"trees": 1, "matrix": 3, "validation": 1, "envs": 1}  # a section -> its entries' depth
RECENT_SECONDS = 3600.0  # an entry used this recently may be in a running job's hands
DEFAULT_MAX_SIZE = "10GB"
UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from `500MB`, `10GB`, `2GiB`, `1.5TB` or a plain number of bytes (KB, MB… are powers of 1000)."""
    match = SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a size (write e.g. 500MB, 10GB or 2GiB)")
    number, unit = match.groups()
    return int(Decimal(number) * UNITS[(unit or "b").lower()])


def format_size(size: int) -> str:
    for unit in ("TB", "GB", "MB", "KB"):
        if size >= UNITS[unit.lower()]:
            return f"{size / UNITS[unit.lower()]:.1f} {unit}"
    return f"{size} B"


# Using entries


def cached_entry(dest: Path, fill: Callable[[Path], None]) -> Path:
    """DEST marked used, made first by FILL (which writes into an empty temporary directory beside it) when
    it is not there. DEST is complete whenever it exists: the temporary is renamed into place whole, and
    when another process placed DEST first, that copy is kept and this one discarded."""
    if use(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent))
    try:
        fill(partial)
        partial.chmod(0o755)  # the sandbox reads the tree as an unprivileged uid
        try:
            partial.rename(dest)
        except OSError:
            if not dest.is_dir():
                raise
            shutil.rmtree(partial)  # another process placed the same entry first
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    use(dest)
    return dest


def use(entry: Path) -> bool:
    """Mark ENTRY used now; False when it is not there (make it again). Under the shared lock of its
    directory: a prune deciding about the entry at the same moment either sees this use or has already
    taken the entry away, so a reader never holds a path that is being deleted."""
    try:
        with _locked(entry.parent, shared=True):
            os.utime(entry)
    except FileNotFoundError:
        return False
    except OSError:  # a cache this process may read but not mark: the entry is used as it is
        return entry.exists()
    return True


@contextmanager
def _locked(directory: Path, *, shared: bool) -> Iterator[None]:
    """flock on the directory itself: no lock file appears among the entries."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


# Pruning


@dataclass(frozen=True)
class _Entry:
    path: Path
    last_used: float
    size: int
    temporary: bool


@dataclass(frozen=True)
class PruneReport:
    directory: Path
    max_bytes: int
    entries: int
    before_bytes: int
    removed: int
    freed_bytes: int
    leftovers: int  # temporaries of processes that died, removed

    @property
    def after_bytes(self) -> int:
        return self.before_bytes - self.freed_bytes

    def summary(self) -> str:
        lines = [f"{self.directory}: {format_size(self.before_bytes)} in {_count(self.entries, 'entry')} "
                 f"(cap {format_size(self.max_bytes)})"]
        if self.removed or self.leftovers:
            what = [f"{_count(self.removed, 'entry')} (least recently used first)"] if self.removed else []
            what += [f"{_count(self.leftovers, 'leftover')} of interrupted runs"] if self.leftovers else []
            lines.append(f"removed {' and '.join(what)} ({format_size(self.freed_bytes)}); "
                         f"{format_size(self.after_bytes)} left")
        if self.after_bytes > self.max_bytes:
            lines.append("still over the cap: what is left was used in the last hour, and is kept")
        elif not (self.removed or self.leftovers):
            lines.append("under the cap: nothing removed")
        return "\n".join(lines)


def _count(number: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{number} {noun if number == 1 else plural}"


def prune(cache_dir: Path, max_bytes: int, *, recent_seconds: float = RECENT_SECONDS) -> PruneReport:
    """Remove the least recently used entries until the cache holds at most MAX_BYTES, never one used in
    the last RECENT_SECONDS; leftover temporaries go whatever the size. Each is renamed to a trash name
    first and deleted there, so that its own path names the whole entry or nothing."""
    cutoff = time.time() - recent_seconds
    found = [entry for section, depth in SECTIONS.items() for entry in _entries(cache_dir / section, depth)]
    before = sum(entry.size for entry in found)
    freed = removed = leftovers = 0
    for entry in found:
        if entry.temporary and entry.last_used < cutoff and _discard(entry.path, cutoff):
            freed, leftovers = freed + entry.size, leftovers + 1
    for entry in sorted((e for e in found if not e.temporary), key=lambda e: (e.last_used, e.path)):
        if before - freed <= max_bytes or entry.last_used >= cutoff:
            break
        if _discard(entry.path, cutoff):
            freed, removed = freed + entry.size, removed + 1
    entries = sum(not entry.temporary for entry in found)
    return PruneReport(cache_dir, max_bytes, entries, before, removed, freed, leftovers)


def _entries(directory: Path, depth: int) -> Iterator[_Entry]:
    try:
        children = sorted(os.scandir(directory), key=lambda child: child.name)
    except OSError:  # no such section yet, or unreadable: nothing of it to prune
        return
    for child in children:
        temporary = child.name.startswith(".")
        if depth > 1 and not temporary:
            if child.is_dir(follow_symlinks=False):
                yield from _entries(Path(child.path), depth - 1)
            continue
        try:
            last_used, size = child.stat(follow_symlinks=False).st_mtime, disk_usage(child.path)
        except OSError:  # taken away meanwhile (another prune, a failed unpacking cleaning up)
            continue
        yield _Entry(Path(child.path), last_used, size, temporary)


def disk_usage(path: str) -> int:
    """Bytes on disk, as `du` counts them (a hard-linked file once); symlinks are not followed."""
    info = os.lstat(path)
    total = info.st_blocks * 512
    seen: set[int] = set()
    pending = [path] if stat.S_ISDIR(info.st_mode) else []
    while pending:
        with os.scandir(pending.pop()) as children:
            for child in children:
                info = child.stat(follow_symlinks=False)
                if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                    if info.st_ino in seen:
                        continue
                    seen.add(info.st_ino)
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    pending.append(child.path)
    return total


def _discard(path: Path, cutoff: float) -> bool:
    """Remove PATH unless it was used since CUTOFF. The look and the rename happen under the exclusive lock
    of its directory, so a concurrent `use` comes either before (the entry stays) or after (it is gone)."""
    trash = path.with_name(f".trash-{path.name}-{secrets.token_hex(4)}")
    try:
        with _locked(path.parent, shared=False):
            if path.lstat().st_mtime >= cutoff:
                return False
            path.rename(trash)
    except FileNotFoundError:  # another prune took it first
        return False
    except OSError as exc:
        log.warning("cache: could not remove %s: %s", path, exc)
        return False
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink(missing_ok=True)
    if os.path.lexists(trash):
        log.warning("cache: could not delete all of %s; the next prune tries again", trash)
    return True
