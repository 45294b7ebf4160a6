"""Root callers: show the sandbox's sources where an unprivileged uid can reach them, then become that uid.

As root, bubblewrap would map the sandbox's uid to real uid 0, for which the kernel does not enforce the
process limit, so the sandbox must run as a real unprivileged uid. That uid cannot pass directories such
as /root (mode 0700, where a pyenv Python lives) or a caller's private temp dirs. So the runner's child,
still root, enters a private mount namespace, bind-mounts every source at a mount point in a staging dir
that the uid can pass (the binds exist only in that namespace), and then `setpriv` execs bubblewrap as the
uid. bubblewrap stays the runner's own child: if the runner dies, the kernel kills it (--pdeathsig).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from app.sandbox.view import Bind, View, is_system_path

SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
TOOLS = ("unshare", "mount", "setpriv")  # all from util-linux
# Arguments: the mount binary, SOURCE MOUNT_POINT pairs, "--", then the command to exec once mounted.
# The shell exports PWD of its own: unset, or bubblewrap (PID 1 inside) would carry the caller's directory.
MOUNT_SCRIPT = ('set -eu; mount=$1; shift; '
                'while [ "$1" != -- ]; do "$mount" --rbind "$1" "$2"; shift 2; done; shift; '
                'unset PWD OLDPWD; exec "$@"')


def find_tools() -> dict[str, str]:
    """The staging tools this machine has, by name; a missing one is absent."""
    found = {tool: shutil.which(tool, path=SYSTEM_PATH) for tool in TOOLS}
    return {tool: path for tool, path in found.items() if path is not None}


@contextmanager
def staging_dir() -> Iterator[Path]:
    """A fresh dir the sandbox uid may pass (0711) but not list; its mount points stay empty outside."""
    area = Path(tempfile.mkdtemp(prefix="prtriage-stage-"))
    area.chmod(0o711)
    try:
        _require_passable(area)
        yield area
    finally:
        # Never recursive: were a bind still mounted here, that would delete what it shows.
        for entry in os.scandir(area):
            (os.rmdir if entry.is_dir(follow_symlinks=False) else os.unlink)(entry.path)
        area.rmdir()


def _require_passable(area: Path) -> None:
    for directory in area.parents:
        if directory.stat().st_mode & 0o001 == 0:
            raise PermissionError(f"{directory} is closed to other users, so the sandbox's uid cannot reach "
                                  f"{area}: point TMPDIR at a directory every user may pass, e.g. /tmp")


def stage_view(view: View, area: Path) -> tuple[View, list[tuple[str, str]]]:
    """The view with each non-system source replaced by a mount point in `area`, and the (source, mount
    point) pairs to mount there."""
    points: dict[str, str] = {}
    for bind in view.binds:
        if not is_system_path(bind.source) and bind.source not in points:
            points[bind.source] = _mount_point(area / str(len(points)), bind.source)
    staged = tuple(Bind(points.get(bind.source, bind.source), bind.dest) for bind in view.binds)
    return replace(view, binds=staged), list(points.items())


def _mount_point(path: Path, source: str) -> str:
    if os.path.isdir(source):
        path.mkdir(mode=0o755)
    else:
        path.touch(mode=0o644)
    return str(path)


def launch_prefix(mounts: list[tuple[str, str]], *, tools: dict[str, str], uid: int) -> list[str]:
    """The command prefix that mounts `mounts` in a private mount namespace, then becomes `uid`."""
    pairs = [path for pair in mounts for path in pair]
    return [tools["unshare"], "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", MOUNT_SCRIPT, "prtriage-stage", tools["mount"], *pairs, "--",
            tools["setpriv"], "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
            "--bounding-set", "-all", "--no-new-privs",
            # changing uid clears the parent-death signal: set it again until bwrap's --die-with-parent does
            "--pdeathsig", "SIGKILL", "--"]
