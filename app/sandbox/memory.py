"""A total memory bound per sandbox: a memory cgroup of its own, where the host lets prtriage make one.

`harness.limits.memory_mb` is an address-space limit per process; a sandbox of 256 processes could still
take the host's memory. So each run gets a child memory cgroup, made in the cgroup prtriage runs in (or in
$PRTRIAGE_CGROUP), limited to $PRTRIAGE_SANDBOX_MEMORY_MB (default: a quarter of the machine's memory), no
swap; the runner's child joins it before it execs, so every sandboxed process is inside. cgroup v2 needs
the memory controller delegated (`memory` in the parent's cgroup.subtree_control); cgroup v1 needs a
writable memory hierarchy (root, usually). Without either, only the per-process limits hold (docs/sandbox.md).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MEMORY_ENV = "PRTRIAGE_SANDBOX_MEMORY_MB"
CGROUP_ENV = "PRTRIAGE_CGROUP"
MIB = 1024 * 1024
SHARE_OF_MACHINE = 4  # default bound: MemTotal / 4
REMOVE_TRIES = 50  # x 20 ms: the kernel empties a cgroup a moment after its last process is reaped
_names = itertools.count()
_warned: set[str] = set()


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path
    version: int  # 1 or 2
    limit: int  # bytes

    def join(self) -> None:
        """Move the calling process in (a preexec_fn: runs in the runner's child before it execs)."""
        with open(self.path / "cgroup.procs", "w") as procs:
            procs.write("0")

    def oom_kills(self) -> int:
        """Processes the kernel killed for the cgroup's limit so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            lines = (self.path / name).read_text().splitlines()
        except OSError:
            return 0
        return next((int(line.split()[1]) for line in lines if line.startswith("oom_kill ")), 0)

    def stopped_reason(self) -> str | None:
        if self.oom_kills() == 0:
            return None
        return (f"memory limit of {self.limit // MIB} MiB for the whole sandbox exceeded "
                "(the kernel killed a process of it)")


def total_memory_bytes() -> int:
    raw = os.environ.get(MEMORY_ENV)
    if raw:
        if not raw.isdigit() or int(raw) < 64:
            raise ValueError(f"{MEMORY_ENV}={raw!r}: expected a number of MiB, at least 64")
        return int(raw) * MIB
    return machine_memory() // SHARE_OF_MACHINE


def machine_memory() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemTotal in /proc/meminfo")


@contextmanager
def memory_cgroup() -> Iterator[MemoryCgroup | None]:
    """A fresh memory cgroup bounded by total_memory_bytes(), removed afterwards; None where none can be
    made here."""
    limit = total_memory_bytes()
    cgroup = _make(limit)
    try:
        yield cgroup
    finally:
        if cgroup is not None:
            _remove(cgroup.path)


def _make(limit: int) -> MemoryCgroup | None:
    found = _parent()
    if found is None:
        _warn_once("no memory cgroup can be made here (docs/sandbox.md, \"Total memory\"): a sandbox is "
                   "bounded only by harness.limits.processes x memory_mb")
        return None
    parent, version = found
    path = parent / f"prtriage-{os.getpid()}-{next(_names)}"
    try:
        path.mkdir()
    except OSError as error:
        log.info("no memory cgroup for the sandbox (%s): only per-process limits hold", error)
        return None
    try:
        _set_limits(path, version, limit)
    except OSError:
        _remove(path)
        raise
    return MemoryCgroup(path, version, limit)


def _set_limits(path: Path, version: int, limit: int) -> None:
    if version == 2:
        writes = [("memory.max", limit), ("memory.swap.max", 0), ("memory.oom.group", 1)]
    else:  # memsw (memory + swap) may only be set at or above the memory limit, so after it
        writes = [("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit)]
    for name, value in writes:
        if (path / name).exists():
            (path / name).write_text(str(value))


def _parent() -> tuple[Path, int] | None:
    """Where a child cgroup with a memory limit can be made: ($PRTRIAGE_CGROUP or our own cgroup, version)."""
    configured = os.environ.get(CGROUP_ENV)
    if configured:
        path = Path(configured)
        return (path, 2) if (path / "cgroup.subtree_control").exists() else (path, 1)
    own = _own_cgroups()
    mounts = _cgroup_mounts()
    if "" in own and "cgroup2" in mounts:
        path = Path(mounts["cgroup2"] + own[""])
        try:
            if "memory" in (path / "cgroup.subtree_control").read_text().split():
                return path, 2
        except OSError:
            pass
    if "memory" in own and "memory" in mounts:
        path = Path(mounts["memory"] + own["memory"])
        if os.access(path, os.W_OK):
            return path, 1
    return None


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its cgroup v2 path."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path.rstrip("/")
    return found


def _cgroup_mounts() -> dict[str, str]:
    """Mount points: "cgroup2" for the v2 hierarchy, "memory" for a v1 memory hierarchy."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, point, kind, options, *_ = line.split()
        if kind == "cgroup2":
            found.setdefault("cgroup2", point)
        elif kind == "cgroup" and "memory" in options.split(","):
            found.setdefault("memory", point)
    return found


def _warn_once(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        log.warning("%s", text)


def _remove(path: Path) -> None:
    for _ in range(REMOVE_TRIES):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    log.warning("could not remove the sandbox's cgroup %s", path)
