"""What both harness programs share: the job file, the message channel and a fork pool with time limits.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
"""

from __future__ import annotations

import contextlib
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

_channel: int | None = None


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
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def send(message: dict[str, Any]) -> None:
    """Write one JSON line to the runner."""
    data = (json.dumps(message, default=str) + "\n").encode()
    fd = _channel if _channel is not None else 1
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


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


def _child(task: Any, work: Callable[[Any], dict[str, Any]], write_fd: int) -> None:
    """Runs in the forked child: never returns."""
    code = 0
    try:
        os.setpgid(0, 0)  # so a timeout kills whatever the child started, too
        err = os.open(_stderr_path(os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        os.close(err)
        if _channel is not None:
            os.close(_channel)  # children answer through their pipe only
        result = work(task)
        payload = json.dumps(result, default=str).encode()
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
    except BaseException:  # the child must always reach _exit
        traceback.print_exc()
        code = 70
    finally:
        os._exit(code)


class _Running:
    __slots__ = ("buffer", "deadline", "fd", "pid", "task")

    def __init__(self, task: Any, pid: int, fd: int, deadline: float) -> None:
        self.task, self.pid, self.fd, self.deadline = task, pid, fd, deadline
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
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _child(task, work, write_fd)
            os.close(write_fd)
            running[read_fd] = _Running(task, pid, read_fd, time.monotonic() + timeout)
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
    if reason is not None:
        _kill_group(entry.pid)
    status = _reap(entry.pid)
    if reason is None and status != 0:
        reason = _describe_status(status)
    if reason is None:
        try:
            on_result(entry.task, json.loads(entry.buffer.decode()))
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


def repo_frame(tb: Any, repo: str) -> tuple[str | None, int | None]:
    """(repo-relative path, line) of the innermost traceback frame inside the repository."""
    found: tuple[str | None, int | None] = (None, None)
    prefix = repo.rstrip("/") + "/"
    for frame, line in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if filename.startswith(prefix):
            found = (filename[len(prefix):], line)
    return found
