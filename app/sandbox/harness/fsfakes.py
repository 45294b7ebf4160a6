"""File fakes for harness programs: policy fixtures served, CI-host paths made to exist, repo reads recorded.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
Scripts and validation code look at files that exist on CI hosts only (`/root/models/<m>/config.json`,
checkpoints under `/root/`); the policy says what stands in for them. Every repository file the process
reads is recorded so that a cached result can be reused exactly while those files are unchanged.
"""

from __future__ import annotations

import builtins
import fnmatch
import genericpath
import io
import os
import pathlib
import posixpath
import sys
from typing import Any

_repo_prefix = ""
_fixtures: list[tuple[str, str]] = []  # (absolute path pattern, served text)
_existing_prefixes: tuple[str, ...] = ()
_reads: set[str] = set()
_installed = False

_real_open = builtins.open
_real_exists = genericpath.exists
_real_isfile = genericpath.isfile
_real_isdir = genericpath.isdir
_real_path_open = pathlib.Path.open
_real_path_exists = pathlib.Path.exists
_real_path_is_file = pathlib.Path.is_file
_real_path_is_dir = pathlib.Path.is_dir


def install(repo: str, harness_policy: dict[str, Any]) -> None:
    """Serve fixtures, make CI-host prefixes exist and start recording repository reads. Idempotent."""
    global _repo_prefix, _fixtures, _existing_prefixes, _installed
    _repo_prefix = os.path.abspath(repo).rstrip("/") + "/"
    _fixtures = [(f["path"], _fixture_text(f.get("content"))) for f in harness_policy.get("fixtures") or []]
    _existing_prefixes = tuple(harness_policy.get("existing_path_prefixes") or ())
    if _installed:
        return
    _installed = True
    sys.addaudithook(_on_audit)
    fakes: list[tuple[Any, str, Any]] = [(builtins, "open", _open), (io, "open", _open)]
    for module in (genericpath, posixpath):
        fakes += [(module, "exists", _exists), (module, "isfile", _isfile), (module, "isdir", _isdir)]
    for owner, name, fake in fakes:
        setattr(owner, name, fake)
    for name, method in (("open", _path_open), ("exists", _path_exists), ("is_file", _path_is_file),
                         ("is_dir", _path_is_dir)):
        setattr(pathlib.Path, name, method)


def reads() -> set[str]:
    """Repo-relative files this process opened for reading or imported, since install."""
    found = set(_reads)
    for module in list(sys.modules.values()):
        relative = _repo_relative(getattr(module, "__file__", None))
        if relative is not None:
            found.add(relative)
    return found


def record_read(path: str) -> None:
    """Count a file read by other means (e.g. a shell `source`) as read, when it is in the repository."""
    relative = _repo_relative(path)
    if relative is not None:
        _reads.add(relative)


def fixture_text(path: str) -> str | None:
    """The content served for `path`, when a fixture matches it and the real file is absent."""
    if not _fixtures:
        return None
    absolute = os.path.abspath(path)
    for pattern, text in _fixtures:
        if fnmatch.fnmatchcase(absolute, pattern):
            return None if _real_exists(absolute) else text
    return None


def counts_as_existing(path: str) -> bool:
    """Under one of the policy's CI-host prefixes (the prefix directory itself included)."""
    if not _existing_prefixes:
        return False
    absolute = os.path.abspath(path)
    return any(absolute.startswith(p) or absolute == p.rstrip("/") for p in _existing_prefixes)


def _fixture_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    import json  # only for non-string fixtures, i.e. rarely

    return json.dumps(content)


def _as_path(target: Any) -> str | None:
    """A filesystem path as str, or None for file descriptors and things that are no path."""
    if isinstance(target, int):
        return None
    try:
        return os.fsdecode(os.fspath(target))
    except TypeError:
        return None


def _repo_relative(path: Any) -> str | None:
    text = _as_path(path) if path is not None else None
    if not text or not _repo_prefix:
        return None
    absolute = os.path.normpath(os.path.join(os.getcwd(), text)) if not text.startswith("/") else text
    absolute = os.path.normpath(absolute)
    if not absolute.startswith(_repo_prefix):
        return None
    relative = absolute[len(_repo_prefix):]
    if "__pycache__" in relative.split("/"):
        return None  # the bytecode of a module: the module itself is counted through sys.modules
    return relative


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _repo_prefix:
        return
    try:
        path, mode, flags = args
        if not _opens_for_reading(mode, flags):
            return
        relative = _repo_relative(path)
        if relative is not None and not _real_isdir(_repo_prefix + relative):
            _reads.add(relative)
    except Exception:  # an audit hook that raises would break the open it watches
        return


def _opens_for_reading(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    if isinstance(flags, int):
        return flags & os.O_ACCMODE != os.O_WRONLY
    return True


def _serve(target: Any, mode: str, encoding: str | None, newline: str | None) -> io.IOBase | None:
    path = _as_path(target)
    if path is None or any(c in mode for c in "wax+"):
        return None
    text = fixture_text(path)
    if text is None:
        return None
    if "b" in mode:
        return io.BytesIO(text.encode(encoding or "utf-8"))
    return io.StringIO(text, newline=newline)


def _open(file: Any, mode: str = "r", buffering: int = -1, encoding: str | None = None,
          errors: str | None = None, newline: str | None = None, closefd: bool = True,
          opener: Any = None) -> Any:
    served = _serve(file, mode, encoding, newline)
    if served is not None:
        return served
    return _real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)


def _exists(path: Any) -> bool:
    return _real_exists(path) or _fake_file(path) or _fake_prefix(path)


def _isfile(path: Any) -> bool:
    return _real_isfile(path) or _fake_file(path) or _fake_prefix(path)


def _isdir(path: Any) -> bool:
    return _real_isdir(path) or _fake_prefix(path)


def _fake_file(path: Any) -> bool:
    text = _as_path(path)
    return text is not None and fixture_text(text) is not None


def _fake_prefix(path: Any) -> bool:
    text = _as_path(path)
    return text is not None and counts_as_existing(text)


def _path_open(self: pathlib.Path, mode: str = "r", buffering: int = -1, encoding: str | None = None,
               errors: str | None = None, newline: str | None = None) -> Any:
    served = _serve(self, mode, encoding, newline)
    if served is not None:
        return served
    return _real_path_open(self, mode, buffering, encoding, errors, newline)


def _path_exists(self: pathlib.Path, **kwargs: Any) -> bool:
    return _real_path_exists(self, **kwargs) or _fake_file(self) or _fake_prefix(self)


def _path_is_file(self: pathlib.Path) -> bool:
    return _real_path_is_file(self) or _fake_file(self) or _fake_prefix(self)


def _path_is_dir(self: pathlib.Path) -> bool:
    return _real_path_is_dir(self) or _fake_prefix(self)
