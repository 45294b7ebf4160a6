"""What both harness programs share: the job file, the message channel and a fork pool with time limits.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.

Every process that runs repository code is forked by the harness, and the first thing it does is close every
message channel of its ancestors but its own (`keep_only`): what repository code finds among its descriptors
is the pipe to its own parent, never the runner's channel or a pipe of another process. The main process,
which runs no repository code, is not dumpable, so that no process of the sandbox can reopen its
descriptors through /proc or trace it. A forked child's result ends with a seal its parent drew before the
fork (`_child`): a result that repository code writes into the pipe before it exits is not believed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

MAX_RESULT_BYTES = 8 * 1024 * 1024
STDERR_TAIL_BYTES = 2000

PR_SET_DUMPABLE = 4
SEAL_BYTES = 16

_channel: int | None = None
_held: set[int] = set()  # the message channels this process holds; a process forked from it closes them


def load_job() -> dict[str, Any]:
    """The job is the JSON file named by the first argument."""
    with open(sys.argv[1], encoding="utf-8") as handle:
        job: dict[str, Any] = json.load(handle)
    return job


def open_channel() -> None:
    """Keep a private copy of stdout for messages; what repository code prints goes to /dev/null.

    Repository code printing to stdout must not corrupt the message stream the runner parses.
    """
    global _channel
    sys.stdout.flush()
    _channel = os.dup(1)
    _held.add(_channel)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    _undumpable()


def _undumpable() -> None:
    """No process of the sandbox (they all share its uid) may open this one's descriptors through
    /proc/<pid>/fd, read its memory or trace it; the processes forked from it inherit this."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def hold(fd: int) -> None:
    """`fd` is a message channel of this process: the processes it forks must close it."""
    _held.add(fd)


def let_go(fd: int) -> None:
    _held.discard(fd)


def keep_only(fd: int) -> None:
    """In a process just forked, before any repository code runs in it: close every message channel it
    inherited but `fd`, its own channel to its parent."""
    global _channel
    for other in _held - {fd}:
        with contextlib.suppress(OSError):
            os.close(other)
    _held.clear()
    _held.add(fd)
    _channel = None  # the runner's channel is the main process's alone


def send(message: dict[str, Any]) -> None:
    """Write one JSON line to the runner."""
    _write_all(_channel if _channel is not None else 1, (json.dumps(message, default=str) + "\n").encode())


def progress(done: int, total: int, what: str) -> None:
    send({"type": "progress", "done": done, "total": total, "what": what})


def fatal(reason: str) -> None:
    send({"type": "fatal", "reason": reason})


def _stderr_path(pid: int) -> str:
    return f"/tmp/.prtriage-child-{pid}.err"


def _stderr_tail(pid: int) -> str:
    path = _stderr_path(pid)
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - STDERR_TAIL_BYTES))
            tail = handle.read().decode("utf-8", "replace")
        os.unlink(path)
    except OSError:
        return ""
    return tail.strip()


def _child(task: Any, work: Callable[[Any], dict[str, Any]], write_fd: int, seal: bytes) -> None:
    """Runs in the forked child: never returns.

    It writes the result, then the seal its parent drew for it before the fork: the parent believes only
    exactly that. Repository code that writes a result of its own into the pipe and leaves does not know
    the seal (it would have to look for it in the harness's memory: docs/security.md, "Trust model").
    """
    code = 0
    try:
        keep_only(write_fd)  # children answer through their pipe only
        os.setpgid(0, 0)  # so a timeout kills whatever the child started, too
        err = os.open(_stderr_path(os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        os.close(err)
        result = work(task)
        _write_all(write_fd, json.dumps(result, default=str).encode() + b"\n" + seal)
    except BaseException:  # the child must always reach _exit
        traceback.print_exc()
        code = 70
    finally:
        os._exit(code)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _unsealed(buffer: bytes, seal: bytes) -> bytes | None:
    """The result before the child's seal; None when the seal does not end the pipe's bytes."""
    result, _, trailer = buffer.rpartition(b"\n")
    return result if trailer == seal else None


class _Running:
    __slots__ = ("buffer", "deadline", "fd", "pid", "seal", "task")

    def __init__(self, task: Any, pid: int, fd: int, deadline: float, seal: bytes) -> None:
        self.task, self.pid, self.fd, self.deadline, self.seal = task, pid, fd, deadline, seal
        self.buffer = bytearray()


def run_forked(tasks: Sequence[T], work: Callable[[T], dict[str, Any]], *, workers: int, timeout: float,
               on_result: Callable[[T, dict[str, Any]], None],
               on_failure: Callable[[T, str], None]) -> None:
    """Run `work(task)` in a forked child per task, at most `workers` at once, each within `timeout` s.

    The child's JSON-able return value reaches `on_result`; a child that crashes, is killed, exceeds its
    time or sends too much reaches `on_failure` with a reason (and its stderr tail), never `on_result`.
    """
    pending = list(tasks)
    pending.reverse()
    running: dict[int, _Running] = {}
    while pending or running:
        while pending and len(running) < max(1, workers):
            task = pending.pop()
            read_fd, write_fd = os.pipe()
            seal = os.urandom(SEAL_BYTES).hex().encode()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _child(task, work, write_fd, seal)
            os.close(write_fd)
            hold(read_fd)  # a sibling forked later must not read this child's result
            running[read_fd] = _Running(task, pid, read_fd, time.monotonic() + timeout, seal)
        _pump(running, on_result, on_failure)


def _pump(running: dict[int, _Running], on_result: Callable[[Any, dict[str, Any]], None],
          on_failure: Callable[[Any, str], None]) -> None:
    now = time.monotonic()
    wait = max(0.0, min(r.deadline for r in running.values()) - now)
    ready, _, _ = select.select(list(running), [], [], min(wait, 1.0))
    for fd in ready:
        entry = running[fd]
        chunk = os.read(fd, 1 << 16)
        if chunk and len(entry.buffer) + len(chunk) <= MAX_RESULT_BYTES:
            entry.buffer.extend(chunk)
            continue
        reason = None if not chunk else f"sent more than {MAX_RESULT_BYTES} bytes of result"
        _finish(running.pop(fd), reason, on_result, on_failure)
    now = time.monotonic()
    for fd in [fd for fd, r in running.items() if r.deadline <= now]:
        _finish(running.pop(fd), "timed out", on_result, on_failure)


def _finish(entry: _Running, reason: str | None, on_result: Callable[[Any, dict[str, Any]], None],
            on_failure: Callable[[Any, str], None]) -> None:
    os.close(entry.fd)
    let_go(entry.fd)
    if reason is not None:
        _kill_group(entry.pid)
    status = _reap(entry.pid)
    if reason is None and status != 0:
        reason = _describe_status(status)
    if reason is None:
        result = _unsealed(bytes(entry.buffer), entry.seal)
        if result is None:
            reason = "its result pipe held something other than the harness's sealed result"
        else:
            try:
                on_result(entry.task, json.loads(result.decode()))
                _stderr_tail(entry.pid)
                return
            except ValueError:
                reason = "sent a result that is not JSON"
    tail = _stderr_tail(entry.pid)
    on_failure(entry.task, f"{reason}: {tail}" if tail else reason)


def _kill_group(pid: int) -> None:
    for target in (-pid, pid):
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)


def _reap(pid: int) -> int:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return 0
    _kill_group(pid)  # grandchildren left behind in the child's group
    return status


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by signal {sig} ({signal.Signals(sig).name})"
    return f"exited with status {os.WEXITSTATUS(status)}"


def import_roots(repo: str) -> list[str]:
    """Where CI imports the repository's own packages from: its root, `src/` when the project has the src
    layout, and the `src/` (or the directory) of each path dependency its pyproject.toml names under
    `[tool.uv.sources]` (a uv workspace's members), all of which CI's `pip install -e .` or `uv sync` makes
    importable. Without them `import prime_rl.configs` would be stubbed as an absent package."""
    roots = [repo]
    for relative in ["", *_uv_path_sources(repo)]:
        base = os.path.normpath(os.path.join(repo, relative))
        if not (base + "/").startswith(repo.rstrip("/") + "/"):
            continue  # a path outside the tree is the CI host's
        source = os.path.join(base, "src")
        candidate = source if _holds_python(source) else base if relative and _holds_python(base) else None
        if candidate and candidate not in roots:
            roots.append(candidate)
    return roots


MAX_PYPROJECT_BYTES = 1 << 20


def _uv_path_sources(repo: str) -> list[str]:
    try:
        import tomllib
        with open(os.path.join(repo, "pyproject.toml"), "rb") as handle:
            text = handle.read(MAX_PYPROJECT_BYTES + 1)
        if len(text) > MAX_PYPROJECT_BYTES:
            return []
        sources = ((tomllib.loads(text.decode("utf-8", "replace")).get("tool") or {}).get("uv") or {}) \
            .get("sources") or {}
    except (ImportError, OSError, ValueError, AttributeError):  # tomllib: Python 3.11+
        return []
    found = [entry.get("path") for entry in sources.values() if isinstance(entry, dict)] \
        if isinstance(sources, dict) else []
    return [path for path in found if isinstance(path, str)][:64]


def _holds_python(directory: str) -> bool:
    """A directory holding a package (regular or namespace): a subdirectory with Python files."""
    try:
        names = sorted(os.listdir(directory))[:1000]
    except OSError:
        return False
    for name in names:
        path = os.path.join(directory, name)
        try:
            if os.path.isdir(path) and any(entry.endswith(".py") or os.path.isdir(os.path.join(path, entry))
                                           for entry in sorted(os.listdir(path))[:1000]):
                return True
        except OSError:
            continue
    return False


def repo_frame(tb: Any, repo: str) -> tuple[str | None, int | None]:
    """(repo-relative path, line) of the innermost traceback frame inside the repository."""
    found: tuple[str | None, int | None] = (None, None)
    prefix = repo.rstrip("/") + "/"
    for frame, line in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if filename.startswith(prefix):
            found = (filename[len(prefix):], line)
    return found
