"""Group leaders: one import and warm-up per environment group, then a forked child per suite.

Runs INSIDE the sandbox: imports nothing of `app`, only the standard library and sibling harness modules.
The leader streams one line per suite back to the main process, which alone writes to the runner; a leader
that dies or stalls therefore costs only the suites it had not reported yet.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import common, suiterun
else:
    import common
    import suiterun

GRACE_SECONDS = 5.0  # a leader's own bookkeeping between two suite results
STDERR_TAIL_BYTES = 2000
MAX_LINE_BYTES = 16 * 1024 * 1024


class ImportFailure(Exception):
    """The revision cannot be prepared under this environment (the entry module does not import)."""


@dataclass(frozen=True)
class Group:
    """Suites that import the revision under the same environment."""

    suites: list[dict[str, Any]]
    warm_up: bool = True


@dataclass
class Report:
    """Where a group's results go, in the main process."""

    result: Callable[[dict[str, Any]], None]  # a SuiteResult as JSON
    failure: Callable[[dict[str, Any], str], None]  # a suite that has no result, and why
    import_failure: Callable[[str], None]


OpenRevision = Callable[[dict[str, Any]], suiterun.Revision]  # suite whose environment imports -> revision


def run_group(group: Group, open_revision: OpenRevision, *, workers: int, suite_seconds: float,
              report: Report) -> None:
    """Run the group's suites under a forked leader; every suite reaches `report` exactly once."""
    pending = {suite["id"]: suite for suite in group.suites}
    phase, reason, import_error = _follow_leader(group, open_revision, workers, suite_seconds, report,
                                                 pending)
    if import_error is not None:
        report.import_failure(import_error)
        reason = import_error
    elif pending and group.warm_up and phase == "imported":
        # The warm-up suite killed or hung the leader: a leader that skips warm-up isolates it in a child.
        retry = Group([s for s in group.suites if s["id"] in pending], warm_up=False)
        run_group(retry, open_revision, workers=workers, suite_seconds=suite_seconds, report=report)
        return
    for suite in pending.values():
        report.failure(suite, reason or "the group leader ended without reporting it")


def _follow_leader(group: Group, open_revision: OpenRevision, workers: int, suite_seconds: float,
                   report: Report, pending: dict[str, dict[str, Any]]) -> tuple[str, str, str | None]:
    """Fork the leader and relay its lines until it ends: (phase reached, why it ended, import error).

    Phases: "started", "imported" (the entry imported), "warm" (warm-up done, suites running).
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _lead(group, open_revision, workers, suite_seconds, write_fd)
    os.close(write_fd)
    phase, import_error, stalled = "started", None, None
    deadline = _Deadline(suite_seconds + GRACE_SECONDS)
    with os.fdopen(read_fd, "rb") as lines:
        for message in _lines(lines.fileno(), deadline):
            if message is None:
                stalled = {"started": "timed out importing the revision",
                           "imported": "timed out warming up"}.get(phase, "stalled")
                _kill(pid)
                break
            deadline.extend(suite_seconds + GRACE_SECONDS)
            kind, suite_id = message.get("kind"), _suite_id(message)
            if kind in ("imported", "warm"):
                phase = kind
            elif kind == "import_error":
                import_error = str(message.get("reason"))
            elif kind == "suite" and suite_id in pending:
                del pending[suite_id]
                report.result(message["result"])
            elif kind == "failed" and suite_id in pending:
                report.failure(pending.pop(suite_id), str(message.get("reason")))
    status = _reap(pid)
    reason = stalled or f"the group leader {_describe(status)}"
    return phase, _with_tail(reason, pid), import_error


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.extend(seconds)

    def extend(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds


def _suite_id(message: dict[str, Any]) -> str | None:
    """The suite a leader's line is about; None for a line of another kind or shape."""
    about = message.get("result") if message.get("kind") == "suite" else message
    suite_id = about.get("suite_id") if isinstance(about, dict) else None
    return suite_id if isinstance(suite_id, str) else None


def _lines(fd: int, deadline: _Deadline) -> Iterator[dict[str, Any] | None]:
    """JSON objects read line by line; None once the deadline passes with nothing to read.

    The leader runs repository code, which could write anything to the pipe: a line that is no JSON
    object is skipped, a line beyond MAX_LINE_BYTES ends the stream.
    """
    buffer = bytearray()
    while len(buffer) <= MAX_LINE_BYTES:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline.at - time.monotonic()))
        if not ready:
            yield None
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        buffer.extend(chunk)
        while b"\n" in buffer:
            line, _, rest = buffer.partition(b"\n")
            buffer = bytearray(rest)
            message = _parse(bytes(line))
            if message is not None:
                yield message


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _lead(group: Group, open_revision: OpenRevision, workers: int, suite_seconds: float, out: int) -> None:
    """The leader process: never returns."""
    code = 0
    try:
        os.setpgid(0, 0)  # so that killing the leader also kills what repository code started
        _stderr_to_file(os.getpid())
        _serve_group(group, open_revision, workers, suite_seconds, lambda m: _write_line(out, m))
    except BaseException:  # the leader must always reach _exit
        traceback.print_exc()
        code = 70
    finally:
        os._exit(code)


def _serve_group(group: Group, open_revision: OpenRevision, workers: int, suite_seconds: float,
                 send: Callable[[dict[str, Any]], None]) -> None:
    try:
        revision = open_revision(group.suites[0])
    except ImportFailure as exc:
        send({"kind": "import_error", "reason": str(exc)})
        return
    send({"kind": "imported"})
    if group.warm_up:
        suiterun.run_suite(revision, group.suites[0])  # lazy imports and caches, done once for the group
    send({"kind": "warm"})
    gc.freeze()  # children then share the leader's heap pages instead of copying them on first touch
    common.run_forked(group.suites, lambda suite: suiterun.run_suite(revision, suite), workers=workers,
                      timeout=suite_seconds,
                      on_result=lambda suite, result: send({"kind": "suite", "result": result}),
                      on_failure=lambda suite, why: send({"kind": "failed", "suite_id": suite["id"],
                                                         "reason": why}))


def _write_line(fd: int, message: dict[str, Any]) -> None:
    view = memoryview((json.dumps(message, default=str) + "\n").encode())
    while view:
        view = view[os.write(fd, view):]


def _stderr_path(pid: int) -> str:
    return f"/tmp/.prtriage-leader-{pid}.err"


def _stderr_to_file(pid: int) -> None:
    err = os.open(_stderr_path(pid), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(err, 2)
    os.close(err)


def _with_tail(reason: str, pid: int) -> str:
    try:
        with open(_stderr_path(pid), "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - STDERR_TAIL_BYTES))
            tail = handle.read().decode("utf-8", "replace").strip()
        os.unlink(_stderr_path(pid))
    except OSError:
        return reason
    return f"{reason}: {tail}" if tail else reason


def _kill(pid: int) -> None:
    for target in (-pid, pid):
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)


def _reap(pid: int) -> int:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"was killed by signal {number} ({signal.Signals(number).name})"
    return f"exited with status {os.WEXITSTATUS(status)}"
