"""Watching one started sandbox: messages streamed as they arrive, output and wall-clock caps, and no
process of it left behind when the run is over."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.analysis.core.policy import Limits
from app.sandbox.limits import MIB

STDERR_TAIL_BYTES = 4096
READ_BYTES = 1 << 16
# After the program exits, whatever still holds its pipes gets this long before it is killed.
DRAIN_SECONDS = 1.0
# How long teardown waits for the kernel to empty the sandbox's pid namespace.
TEARDOWN_SECONDS = 5.0
# Bounds on one message line: the harness's largest (a script's captured suites) is far below both.
MESSAGE_MAX_BYTES = 4 * MIB
MESSAGE_MAX_DEPTH = 64

# How often a guard (the memory cgroup's kill counter) is looked at while the run goes on.
GUARD_SECONDS = 0.1

OnMessage = Callable[[dict[str, Any]], None]
Guard = Callable[[], str | None]


@dataclass
class Watch:
    messages: list[dict[str, Any]]
    returncode: int | None
    stopped: str | None  # why the runner stopped the run, None if it ended by itself
    stderr_tail: str


@dataclass
class _Messages:
    """The program's stdout split into JSON objects, one a line; other lines are dropped.

    What the sandbox prints is written by the code under analysis, so it is read defensively: a line longer
    than MESSAGE_MAX_BYTES or nested deeper than MESSAGE_MAX_DEPTH stops the run with a reason (the code
    broke the channel), never an exception here nor a message that breaks whoever reads it later.
    """

    on_message: OnMessage | None
    limit: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    partial: bytearray = field(default_factory=bytearray)
    received: int = 0
    broken: str | None = None  # set by the first malformed line: nothing after it is read

    def feed(self, chunk: bytes) -> str | None:
        if self.broken is None:
            self.broken = self._feed(chunk)
        return self.broken

    def _feed(self, chunk: bytes) -> str | None:
        self.received += len(chunk)
        if self.received > self.limit:
            return f"output limit of {self.limit // MIB} MiB exceeded"
        self.partial.extend(chunk)
        if b"\n" not in chunk:  # split only when a line ended: a long line is not scanned again and again
            return _line_too_long(len(self.partial))
        *lines, rest = self.partial.split(b"\n")
        self.partial = bytearray(rest)
        for line in lines:
            if reason := self._parse(line):
                return reason
        return _line_too_long(len(self.partial))

    def finish(self) -> str | None:
        if self.broken is None and self.received <= self.limit:
            self.broken = self._parse(bytes(self.partial))
        self.partial.clear()
        return self.broken

    def _parse(self, line: bytes | bytearray) -> str | None:
        if reason := _line_too_long(len(line)):
            return reason
        try:
            message = json.loads(line)
        except RecursionError:
            return _too_deep()
        except ValueError:
            return None  # not JSON: noise, not a message
        if not isinstance(message, dict):
            return None
        if _depth_exceeds(message, MESSAGE_MAX_DEPTH):
            return _too_deep()
        self.messages.append(message)
        if self.on_message is not None:
            self.on_message(message)
        return None


def _line_too_long(size: int) -> str | None:
    if size <= MESSAGE_MAX_BYTES:
        return None
    return f"the sandboxed code wrote a message line longer than {MESSAGE_MAX_BYTES // MIB} MiB"


def _too_deep() -> str:
    return f"the sandboxed code wrote a message nested deeper than {MESSAGE_MAX_DEPTH} levels"


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` nests lists and dicts more than `limit` deep (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


@dataclass
class _Tail:
    kept: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> None:
        self.kept.extend(chunk)
        del self.kept[:-STDERR_TAIL_BYTES]

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", "replace")


class SandboxInit:
    """pid 1 of the sandbox's pid namespace, as bwrap's --info-fd names it.

    When it dies the kernel kills everything else in the namespace, even processes that left the
    process group (bwrap --new-session, setsid), and its exit completes only once they are gone.
    """

    def __init__(self, info_fd: int) -> None:
        self.info_fd = info_fd
        self.info = bytearray()
        self.pidfd: int | None = None
        self.verified = False

    def feed(self, chunk: bytes) -> None:
        self.info.extend(chunk)
        try:
            info = json.loads(self.info)
        except ValueError:
            return  # not complete yet
        if self.pidfd is None:
            self._open(int(info["child-pid"]), int(info["pid-namespace"]))

    def _open(self, pid: int, namespace: int) -> None:
        try:
            self.pidfd = os.pidfd_open(pid)
            # the pid may already name another process: kill only the namespace's init
            self.verified = os.readlink(f"/proc/{pid}/ns/pid") == f"pid:[{namespace}]"
        except OSError:
            pass

    def kill(self) -> bool:
        """SIGKILL it; False if it is not known (yet) or already gone."""
        if self.pidfd is None or not self.verified:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except OSError:
            return False
        return True

    def wait_gone(self, timeout: float) -> None:
        if self.pidfd is not None:
            with selectors.DefaultSelector() as selector:
                selector.register(self.pidfd, selectors.EVENT_READ)
                selector.select(timeout)

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
        os.close(self.info_fd)


class _Pipes:
    """The sandbox's pipes and exit, watched together so that no pipe fills up and blocks the program."""

    def __init__(self, process: subprocess.Popen[bytes], messages: _Messages, tail: _Tail,
                 init: SandboxInit | None) -> None:
        assert process.stdout is not None and process.stderr is not None
        self.selector = selectors.DefaultSelector()
        self.sinks: dict[int, Callable[[bytes], str | None]] = {
            process.stdout.fileno(): messages.feed, process.stderr.fileno(): _never_stops(tail.feed)}
        if init is not None:
            self.sinks[init.info_fd] = _never_stops(init.feed)
        for fd in self.sinks:
            self.selector.register(fd, selectors.EVENT_READ)
        self.exit_fd = os.pidfd_open(process.pid)  # readable once it exits; it stays unreaped
        self.selector.register(self.exit_fd, selectors.EVENT_READ)
        self.exited = False

    def busy(self) -> bool:
        return not self.exited or any(fd in self.selector.get_map() for fd in self.sinks)

    def step(self, timeout: float) -> str | None:
        """Read what is ready; a reason to stop the run, if a sink has one."""
        reasons = []
        for key, _ in self.selector.select(timeout):
            if key.fd == self.exit_fd:
                self.exited = True
                self.selector.unregister(key.fd)
                continue
            chunk = os.read(key.fd, READ_BYTES)
            if not chunk:
                self.selector.unregister(key.fd)
            elif reason := self.sinks[key.fd](chunk):
                reasons.append(reason)
        return reasons[0] if reasons else None

    def close(self) -> None:
        self.selector.close()
        os.close(self.exit_fd)


def _never_stops(sink: Callable[[bytes], None]) -> Callable[[bytes], str | None]:
    def feed(chunk: bytes) -> None:
        sink(chunk)

    return feed


def supervise(process: subprocess.Popen[bytes], limits: Limits, *, on_message: OnMessage | None,
              init: SandboxInit | None, guard: Guard | None = None) -> Watch:
    """Stream `process`'s messages until it ends or breaks a limit, then make sure all of it is gone.

    `guard`, polled as the run goes and once at its end, names a limit the kernel enforced (None: none)."""
    messages, tail = _Messages(on_message, limits.output_mb * MIB), _Tail()
    pipes = _Pipes(process, messages, tail, init)
    stopped: str | None = "stopped by an error in the runner"
    try:
        stopped = _pump(pipes, limits, guard)
    finally:
        try:
            _stop(process, pipes, init)
        finally:
            _release(process, pipes, init)
    stopped = messages.finish() if stopped is None else stopped
    if guard is not None and stopped is None:
        stopped = guard()  # a kill for memory in the run's last moments, after the last poll
    return Watch(messages.messages, process.returncode, stopped, tail.text())


def _pump(pipes: _Pipes, limits: Limits, guard: Guard | None) -> str | None:
    deadline, draining = time.monotonic() + limits.total_seconds, False
    while pipes.busy():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None if draining else f"timed out after {limits.total_seconds:g} s"
        if reason := pipes.step(remaining if guard is None else min(remaining, GUARD_SECONDS)):
            return reason
        if guard is not None and (reason := guard()):
            return reason
        if pipes.exited and not draining:
            draining, deadline = True, min(deadline, time.monotonic() + DRAIN_SECONDS)
    return None


def _stop(process: subprocess.Popen[bytes], pipes: _Pipes, init: SandboxInit | None) -> None:
    """Kill whatever is left of the run, its sandbox first, then its process group."""
    pipes.step(0)  # the init's pid may still wait in the info pipe
    if init is not None and init.kill():
        # Let bubblewrap reap its init: killed before it, the init would become a zombie of the host's
        # pid 1, which may never reap it, and go on counting against the uid's process limit.
        _drain(pipes, time.monotonic() + TEARDOWN_SECONDS, until=lambda: pipes.exited)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        # not reaped yet, so its pid (the group id) cannot have been reused
        os.killpg(process.pid, signal.SIGKILL)
    # What was written before the kill is still worth reading (stderr above all).
    _drain(pipes, time.monotonic() + DRAIN_SECONDS, until=lambda: not pipes.busy())


def _drain(pipes: _Pipes, deadline: float, *, until: Callable[[], bool]) -> None:
    while not until() and (remaining := deadline - time.monotonic()) > 0:
        pipes.step(remaining)


def _release(process: subprocess.Popen[bytes], pipes: _Pipes, init: SandboxInit | None) -> None:
    pipes.close()
    process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    if init is not None:
        init.wait_gone(TEARDOWN_SECONDS)
        init.close()
