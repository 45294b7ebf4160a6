"""File fakes for harness programs: the virtual CI-host paths served to every file API, repo reads recorded.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
Scripts and validation code look at files that exist on CI hosts only (`/root/models/<m>/config.json`,
checkpoints under `/root/`); `vpaths` decides what stands in for them, and this module serves that answer
through `open`, `os.stat`/`lstat` (and so `exists`, `isfile`, `isdir`, `getsize` and pathlib's), `os.listdir`,
`os.scandir` (and so `glob`, `os.walk`, `Path.iterdir`, `Path.glob`) and `os.access` alike: a path that exists
can be read or listed. Writes there (`makedirs`, `open(..., "w")`) land in an overlay under /tmp and are
read back; removals (`os.remove`, `rmtree`) hide the path. So do new files and directories in a real directory
the sandbox keeps read-only (the tree, `/`: a launch's `../results` or `outputs/`), which CI's writable
checkout would have let the launch create; each process's overlay is its own, in the sandbox's scratch.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import shutil
import stat
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import boundary, vpaths
else:
    import boundary
    import vpaths

_virtual = vpaths.VirtualPaths({})
_removed: set[str] = set()  # virtual paths the process deleted: gone, with everything below them
_installed = False
OVERLAY_ROOT = "/tmp/.prtriage-overlay"  # where writes to virtual paths land (the sandbox's /tmp is scratch)
OVERLAY = OVERLAY_ROOT

_real_open = builtins.open
_real_stat = os.stat
_real_lstat = os.lstat
_real_listdir = os.listdir
_real_scandir = os.scandir
_real_access = os.access
_real_mkdir = os.mkdir
_real_remove = os.remove
_real_rmdir = os.rmdir
_real_rmtree = shutil.rmtree


def install(repo: str, harness_policy: dict[str, Any]) -> None:
    """Serve the virtual paths to every file API. Idempotent."""
    global _virtual, _installed
    _virtual = vpaths.VirtualPaths(harness_policy)
    if _installed:
        return
    _installed = True
    for owner, name, fake in ((builtins, "open", _open), (io, "open", _open), (os, "stat", _stat),
                              (os, "lstat", _lstat), (os, "listdir", _listdir), (os, "scandir", _scandir),
                              (os, "access", _access), (os, "mkdir", _mkdir), (os, "remove", _remove),
                              (os, "unlink", _remove), (os, "rmdir", _rmdir), (shutil, "rmtree", _rmtree)):
        setattr(owner, name, fake)


def fresh_overlay() -> None:
    """Start this process from the CI host's files as the policy describes them: an overlay of its own.

    Each script (and each suite) runs in a forked child; without this, what one wrote under /root/ would
    be there for the next, and a matrix would depend on which scripts ran before.
    """
    global OVERLAY
    OVERLAY = f"{OVERLAY_ROOT}/{os.getpid()}"
    _removed.clear()


def virtual_node(target: Any) -> vpaths.Node | None:
    """What the harness makes of an absent path (None for a real path, a descriptor or no path)."""
    absolute = _absent(target)
    if absolute is None or _exists_really(OVERLAY + absolute) or _is_removed(absolute):
        return None
    return _virtual.node(absolute)


def _absent(target: Any) -> str | None:
    """The normalised absolute path of a path that does not really exist, when fakes are at work."""
    path = _as_path(target)
    if path is None:
        return None
    absolute = vpaths.normalised(path)
    try:
        _real_lstat(absolute)
        return None
    except OSError:
        return absolute


def _exists_really(path: str) -> bool:
    try:
        _real_lstat(path)
    except OSError:
        return False
    return True


def _is_removed(absolute: str) -> bool:
    return any(absolute == gone or absolute.startswith(gone + "/") for gone in _removed)


def _in_overlay(target: Any) -> str | None:
    """Where an absent path lives once written: its overlay copy, when it exists."""
    absolute = _absent(target)
    if absolute is None or not _exists_really(OVERLAY + absolute):
        return None
    return OVERLAY + absolute


def _writable(target: Any) -> str | None:
    """The overlay path a write to `target` goes to: an absent path in a (virtual) directory."""
    absolute = _absent(target)
    if absolute is None:
        return None
    parent = os.path.dirname(absolute)
    parent_node = virtual_node(parent)
    if not (parent_node is not None and parent_node.kind == "dir") and _in_overlay(parent) is None \
            and not _read_only_dir(parent):
        return None
    os.makedirs(OVERLAY + parent, exist_ok=True)
    _removed.difference_update({absolute})
    return OVERLAY + absolute


def _read_only_dir(path: str) -> bool:
    """A real directory the run may not write to (the tree, `/`): what CI's cwd-relative outputs
    (`../results`, `outputs/`) would create there goes to the overlay, as a CI checkout lets them."""
    try:
        return stat.S_ISDIR(_real_stat(path).st_mode) and not _real_access(path, os.W_OK)
    except OSError:
        return False


def _as_path(target: Any) -> str | None:
    """A filesystem path as str, or None for file descriptors and things that are no path."""
    if isinstance(target, int):
        return None
    try:
        return os.fsdecode(os.fspath(target))
    except TypeError:
        return None


def _open(file: Any, mode: str = "r", buffering: int = -1, encoding: str | None = None,
          errors: str | None = None, newline: str | None = None, closefd: bool = True,
          opener: Any = None) -> Any:
    writing = any(c in mode for c in "wax+")
    redirected = _in_overlay(file) or (_writable(file) if writing else None)
    if redirected is not None:
        return _real_open(redirected, mode, buffering, encoding, errors, newline, closefd, opener)
    node = None if writing else virtual_node(file)
    if node is None:
        try:
            return _real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
        except FileNotFoundError:
            path = _as_path(file)
            if not writing and path is not None:
                boundary.missing_file(vpaths.normalised(path))
            raise
    if node.kind == "dir":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), _as_path(file))
    if "b" in mode:
        return io.BytesIO(node.text.encode(encoding or "utf-8"))
    return io.StringIO(node.text, newline=newline)


def _fake_stat(node: vpaths.Node) -> os.stat_result:
    if node.kind == "dir":
        return os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 4096, 0, 0, 0))
    return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, len(node.text.encode()), 0, 0, 0))


def _stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
    return _stat_with(_real_stat, path, *args, **kwargs)


def _lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
    return _stat_with(_real_lstat, path, *args, **kwargs)


def _stat_with(real: Any, path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
    try:
        return real(path, *args, **kwargs)
    except OSError:
        if kwargs.get("dir_fd") is not None:
            raise
        redirected = _in_overlay(path)
        if redirected is not None:
            return real(redirected)
        node = virtual_node(path)
        if node is None:
            raise
        return _fake_stat(node)


def _listed(path: Any) -> vpaths.Node | None:
    """The virtual directory `path` names; NotADirectoryError for a virtual file."""
    node = virtual_node(path)
    if node is not None and node.kind == "file":
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), _as_path(path))
    return node


def _names(path: Any) -> list[str] | None:
    """The names in a virtual directory: its fixtures' and what was written there; None if not virtual."""
    redirected = _in_overlay(path)
    node = _listed(path)
    if redirected is None and node is None:
        return None
    absolute = vpaths.normalised(_as_path(path) or ".")
    written = _real_listdir(redirected) if redirected is not None else []
    shown = [n for n in (node.children if node else ()) if not _is_removed(f"{absolute}/{n}")]
    return list(dict.fromkeys([*shown, *written]))


def _listdir(path: Any = ".") -> list[Any]:
    names = _names(path)
    if names is None:
        return _real_listdir(path)
    return [os.fsencode(n) for n in names] if isinstance(path, bytes) else names


def _scandir(path: Any = ".") -> Any:
    names = _names(path)
    if names is None:
        return _real_scandir(path)
    directory = _as_path(path) or "."
    return _VirtualScandir([_VirtualEntry(directory, name) for name in names])


def _mkdir(path: Any, mode: int = 0o777, *args: Any, **kwargs: Any) -> None:
    if kwargs.get("dir_fd") is None and (virtual_node(path) is not None or _in_overlay(path) is not None):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), _as_path(path))
    redirected = _writable(path) if kwargs.get("dir_fd") is None else None
    _real_mkdir(redirected or path, mode, *args, **kwargs)


def _remove(path: Any, *args: Any, **kwargs: Any) -> None:
    if not _hide(path, "file"):
        _real_remove(path, *args, **kwargs)


def _rmdir(path: Any, *args: Any, **kwargs: Any) -> None:
    if not _hide(path, "dir"):
        _real_rmdir(path, *args, **kwargs)


def _rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
    if not _hide(path, None):
        _real_rmtree(path, *args, **kwargs)


def _hide(target: Any, kind: str | None) -> bool:
    """Remove a virtual path (its overlay copy too): True when it was one, False for a real path."""
    absolute = _absent(target)
    node = virtual_node(target) if absolute is not None else None
    redirected = _in_overlay(target)
    if node is None and redirected is None:
        return False
    if kind is not None and node is not None and node.kind != kind:
        code = errno.EISDIR if kind == "file" else errno.ENOTDIR
        raise OSError(code, os.strerror(code), _as_path(target))
    if redirected is not None:
        if stat.S_ISDIR(_real_lstat(redirected).st_mode):
            _real_rmtree(redirected)
        else:
            _real_remove(redirected)
    _removed.add(str(absolute))
    return True


def _access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
    if _real_access(path, mode, *args, **kwargs):
        return True
    node = virtual_node(path) if not kwargs.get("dir_fd") else None
    return node is not None and not mode & os.W_OK


class _VirtualEntry:
    """An `os.DirEntry` for a name a fixture puts in a virtual directory (always a file)."""

    def __init__(self, directory: str, name: str) -> None:
        self.name = name
        self.path = os.path.join(directory, name)

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return os.path.isdir(self.path)

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return os.path.isfile(self.path)

    def is_symlink(self) -> bool:
        return False

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return _stat(self.path)

    def inode(self) -> int:
        return 0

    def __fspath__(self) -> str:
        return self.path


class _VirtualScandir:
    """What `os.scandir` returns: an iterator that is also a context manager."""

    def __init__(self, entries: list[_VirtualEntry]) -> None:
        self._entries: Iterator[_VirtualEntry] = iter(entries)

    def __iter__(self) -> Iterator[_VirtualEntry]:
        return self._entries

    def __next__(self) -> _VirtualEntry:
        return next(self._entries)

    def __enter__(self) -> _VirtualScandir:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def close(self) -> None:
        return None
