"""What the sandbox sees: system files, the Python installation, the tree, the harness and the job."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.sandbox.interpreter import Interpreter

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
# What the dynamic loader, time zones and uid/gid lookups need; never the rest of /etc.
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/nsswitch.conf", "/etc/passwd", "/etc/group")
REPO, HARNESS, JOB = "/repo", "/harness", "/job"


@dataclass(frozen=True)
class Bind:
    """A read-only bind mount of `source` (a path where bubblewrap runs) at `dest` inside."""

    source: str
    dest: str


@dataclass(frozen=True)
class View:
    symlinks: tuple[tuple[str, str], ...]  # (target, link)
    dirs: tuple[str, ...]                  # created (mode 0755) before any bind, parents first
    binds: tuple[Bind, ...]                # parents before children



def build_view(*, repo_dir: Path, harness_dir: Path, job_dir: Path, empty_dir: Path,
               interpreter: Interpreter) -> View:
    """The sandbox's file system: system dirs, the analysis environment's Python, /repo, /harness, /job (all
    read-only). Nothing of the site-packages prtriage runs with: what is installed beside prtriage must
    change no result."""
    symlinks, system_binds = system_entries()
    python = outermost(interpreter.binds, avoid=[repo_dir, job_dir, Path.home()])
    binds = [*system_binds, *(Bind(path, path) for path in python),
             Bind(str(repo_dir), REPO), Bind(str(harness_dir), HARNESS), Bind(str(job_dir), JOB)]
    # an installation's own site-packages (packages installed there by hand) shown empty
    masks = [Bind(str(empty_dir), hidden) for hidden in interpreter.hidden
             if _inside_any(hidden, python) or _visible_already(hidden)]
    dirs = _parents_to_create([bind.dest for bind in binds])
    return View(symlinks=tuple(symlinks), dirs=tuple(dirs), binds=(*binds, *masks))


def system_entries() -> tuple[list[tuple[str, str]], list[Bind]]:
    """System dirs (symlinks kept as symlinks, as on merged-/usr systems) and the few /etc files."""
    symlinks: list[tuple[str, str]] = []
    binds: list[Bind] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            symlinks.append((os.readlink(path), path))
        elif os.path.isdir(path):
            binds.append(Bind(path, path))
    binds.extend(Bind(path, path) for path in ETC_FILES if os.path.exists(path))
    return symlinks, binds


def outermost(candidates: Iterable[str], *, avoid: Sequence[Path]) -> list[str]:
    """The directories to bind, outermost only, none already visible.

    Never "/" nor a directory holding one of `avoid` (the tree, the job, the caller's home).
    """
    kept: list[str] = []
    for path in sorted(_unique(os.path.abspath(c) for c in candidates if os.path.isdir(c))):
        if _visible_already(path) or _holds_any(path, avoid) or _inside_any(path, kept):
            continue
        kept.append(path)
    return kept


def is_system_path(path: str) -> bool:
    """A path every uid may reach: under a system dir, or one of the /etc files."""
    return path in ETC_FILES or any(_is_within(path, system) for system in SYSTEM_DIRS)


def _visible_already(path: str) -> bool:
    real = os.path.realpath(path)
    return any(_is_within(real, os.path.realpath(system)) for system in SYSTEM_DIRS
               if os.path.isdir(system))


def _holds_any(path: str, avoid: Sequence[Path]) -> bool:
    real = os.path.realpath(path)
    return real == "/" or any(_is_within(os.path.realpath(str(inner)), real) for inner in avoid)


def _inside_any(path: str, roots: Iterable[str]) -> bool:
    return any(_is_within(path, root) for root in roots)


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _parents_to_create(dests: Iterable[str]) -> list[str]:
    # bubblewrap gives the directories it creates on the way to a mount point the mode of the
    # source's parents; under a 0700 home the unprivileged sandbox uid could not pass them.
    parents: set[str] = set()
    for dest in dests:
        parent = os.path.dirname(dest)
        while parent != "/":
            parents.add(parent)
            parent = os.path.dirname(parent)
    return sorted(parents, key=lambda path: (path.count("/"), path))


def _unique(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(paths))
