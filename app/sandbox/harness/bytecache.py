"""Repository modules compiled once per run, not once per process that imports them.

Runs INSIDE the sandbox: the standard library only. The tree is read-only there and the harness runs under
`-B`, so without this every leader (another import per environment the import reads) and every warm leader
(modules the warm-up imports lazily) compiles the repository's modules from source again: on Megatron-LM 482
modules, 2.3 s of a leader's 5.5 s import. Here the first process to compile a module writes its bytecode
to a scratch directory of this run and the later ones read it back, checked against the source's mtime and
size as Python checks any .pyc. Only the processes of this run write or read the directory, so what it holds
was compiled from this tree by this run. Installed packages keep their own .pyc files: only the loader of
the repository's directories is replaced.
"""

from __future__ import annotations

import contextlib
import importlib.machinery as machinery
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc's from Python 3.12 on

_scratch: str | None = None


class RepoSourceLoader(machinery.SourceFileLoader):
    """A source file of the repository: its bytecode read from and written to the run's scratch directory."""

    def get_data(self, path: str) -> bytes:
        return super().get_data(_scratch_path(path))

    def set_data(self, path: str, data: Buffer, *, _mode: int = 0o666) -> None:
        super().set_data(_scratch_path(path), data, _mode=_mode)


def install(repo: str) -> None:
    """Serve the modules under `repo` through RepoSourceLoader; must run before repository code imports."""
    global _scratch
    _scratch = tempfile.mkdtemp(prefix=".prtriage-bytecode-")
    sys.dont_write_bytecode = False  # SourceLoader writes bytecode only then; read-only dirs are skipped
    sys.path_hooks.insert(0, _repo_hook(os.path.abspath(repo).rstrip("/") + "/"))
    sys.path_importer_cache.clear()  # directories looked up before now would keep the default finder


def remove() -> None:
    """At the end of the run (the main process): the scratch directory goes with it."""
    if _scratch is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(_scratch)


def _repo_hook(prefix: str) -> Callable[[str], Any]:
    repo_finder = machinery.FileFinder.path_hook(
        (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
        (RepoSourceLoader, machinery.SOURCE_SUFFIXES),
        (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES))

    def hook(path: str) -> Any:
        if not (os.path.abspath(path or ".") + "/").startswith(prefix):
            raise ImportError("not a directory of the repository")  # the next hook serves it
        return repo_finder(path)

    return hook


def _scratch_path(path: str) -> str:
    """A bytecode path beside the source (`__pycache__/*.pyc`) moved under the scratch directory; the source
    itself (read through get_data too) stays where it is."""
    if _scratch is None or not path.endswith(".pyc"):
        return path
    return _scratch + os.path.abspath(path)
