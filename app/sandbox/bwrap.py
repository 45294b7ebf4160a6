"""The bubblewrap command line, and the unprivileged uid the sandbox runs as when prtriage is root."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from app.analysis.core.policy import Limits
from app.sandbox.limits import MIB
from app.sandbox.view import REPO, View

BWRAP_ENV = "PRTRIAGE_BWRAP"
SANDBOX_UID_ENV = "PRTRIAGE_SANDBOX_UID"
# The process limit counts every process of a uid, so no two sandboxes may share one: a root caller's
# sandbox runs as base + pid * SLOTS + slot. The base is far above system and subordinate uid ranges;
# bubblewrap 0.8 writes uid maps as signed ints, so every uid stays below 2**31.
DEFAULT_SANDBOX_UID = 2_000_000_000
SLOTS = 32  # sandboxes one process may run at once
PID_LIMIT = 2**22  # the kernel's largest pid_max
LAUNCH_ENV = {"PATH": "/usr/bin:/bin"}  # bwrap's own environment is /proc/1/environ inside
SANDBOX_ID = 65534  # uid and gid the program sees inside
SANDBOX_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}

_slots_lock = threading.Lock()
_slots_in_use: set[int] = set()


def find_bwrap() -> tuple[str, str | None]:
    """(what was asked for, the executable found or None): $PRTRIAGE_BWRAP, else `bwrap` on PATH."""
    wanted = os.environ.get(BWRAP_ENV) or "bwrap"
    found = shutil.which(wanted)
    return wanted, os.path.realpath(found) if found else None


def caller_is_root() -> bool:
    return os.geteuid() == 0


@contextmanager
def sandbox_uid() -> Iterator[int]:
    """A uid no other sandbox on this machine is using right now (root callers only)."""
    base = _uid_base()
    with _slots_lock:
        free = [slot for slot in range(SLOTS) if slot not in _slots_in_use]
        if not free:
            raise RuntimeError(f"more than {SLOTS} sandboxes at once in one process")
        _slots_in_use.add(free[0])
    try:
        yield base + os.getpid() * SLOTS + free[0]
    finally:
        with _slots_lock:
            _slots_in_use.discard(free[0])


def _uid_base() -> int:
    raw = os.environ.get(SANDBOX_UID_ENV, str(DEFAULT_SANDBOX_UID))
    highest = 2**31 - 1 - PID_LIMIT * SLOTS
    if not raw.isdigit() or not 1000 <= int(raw) <= highest:
        raise ValueError(f"{SANDBOX_UID_ENV}={raw!r}: expected a uid between 1000 and {highest}")
    return int(raw)


def sandbox_argv(bwrap: str, view: View, limits: Limits, *, info_fd: int, command: list[str],
                 seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap that runs `command` (as uid 65534 inside, no network, read-only but /tmp), under the
    seccomp filter read from `seccomp_fd` (app/sandbox/seccomp.py) when one is given."""
    seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    return [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--uid", str(SANDBOX_ID), "--gid", str(SANDBOX_ID),
            *seccomp,
            # scratch mounts first: an interpreter installed under /tmp must stay visible over the tmpfs
            "--info-fd", str(info_fd), *_scratch_args(limits), *_view_args(view),
            "--chdir", REPO, "--clearenv", *_setenv_args(SANDBOX_ENV),
            # last, once every mount point exists: nothing may grow the root tmpfs
            "--remount-ro", "/", "--", *command]


def _view_args(view: View) -> list[str]:
    args: list[str] = []
    for target, link in view.symlinks:
        args += ["--symlink", target, link]
    for directory in view.dirs:
        args += ["--perms", "0755", "--dir", directory]
    for bind in view.binds:
        args += ["--ro-bind", bind.source, bind.dest]
    return args


def _scratch_args(limits: Limits) -> list[str]:
    size = str(limits.tmp_mb * MIB)
    return ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp",
            # bwrap's /dev is an unbounded tmpfs: give shared memory its own bounded one, freeze the rest
            "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]


def _setenv_args(env: dict[str, str]) -> list[str]:
    return [arg for name, value in env.items() for arg in ("--setenv", name, value)]
