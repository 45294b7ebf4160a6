"""Leaders: one import per environment the import reads, one warm-up per environment the warm-up reads,
then a forked child per suite.

Runs INSIDE the sandbox: imports nothing of `app`, only the standard library and sibling harness modules.
Processes: main -> leader (imports the revision) -> warm leader (warms it up) -> one child per suite. A
leader and a warm leader each note the environment variables read while building the state they pass on
(envprobe) and decline the suites that set one of them differently from their own suite: a suite declined
by a leader gets another leader (another import); one declined by a warm leader gets another warm leader,
forked from the same import. Each process streams one line per suite to its parent, and only the main
process writes to the runner: a process that dies or stalls costs only the suites it had not reported yet.
Every line about a suite is passed on, even one about a suite reported before or never given to that
process: repository code in a leader can write into its pipe, and the host makes a suite reported twice
an error of the whole run instead of believing the first report (app/engine/suite_validation.py).

What the first warm-up imported from installed packages (not the repository's own modules: their import may
depend on what validation did before it), the leader imports before it forks the next warm leader, watched
like its own import: on Megatron-LM validation's first `torch.use_deterministic_algorithms` imports
torch._inductor, about 1.5 s that each of some ten warm leaders of a leader would pay again. So do the
answers of memoized functions computed without reading the environment (`memo`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import common, envprobe, hugepages, memo, suiterun
else:
    import common
    import envprobe
    import hugepages
    import memo
    import suiterun

GRACE_SECONDS = 5.0  # a process's own bookkeeping between two suite results
STDERR_TAIL_BYTES = 2000
MAX_LINE_BYTES = 16 * 1024 * 1024
HARNESS_DIR = os.path.dirname(os.path.abspath(__file__)) + "/"


class ImportFailure(Exception):
    """The revision cannot be prepared under this environment (the entry module does not import)."""


@dataclass(frozen=True)
class Group:
    """Suites for one warm leader."""

    suites: list[dict[str, Any]]
    warm_up: bool = True


@dataclass
class Report:
    """Where results go: the runner (in the main process) or the parent's pipe (in a leader)."""

    result: Callable[[dict[str, Any]], None]  # a SuiteResult as JSON
    failure: Callable[[dict[str, Any], str], None]  # a suite that has no result, and why
    import_failure: Callable[[str], None]
    found: Callable[[dict[str, Any]], None] = lambda message: None  # a search's line (run_searches)


OpenRevision = Callable[[dict[str, Any]], suiterun.Revision]  # suite whose environment imports -> revision
Send = Callable[[dict[str, Any]], None]
Search = Callable[[suiterun.Revision, list[dict[str, Any]], Send], None]  # in a warm leader (minimize.py)


def run_all(suites: list[dict[str, Any]], open_revision: OpenRevision, *, workers: int, suite_seconds: float,
            report: Report) -> None:
    """In the main process: every suite reaches `report` exactly once."""
    pending = list(suites)
    while pending:
        pending = _run_leader(pending, open_revision, workers, suite_seconds, report)


def run_searches(groups: list[list[dict[str, Any]]], open_revision: OpenRevision, search: Search, *,
                  suite_seconds: float, report: Report) -> None:
    """In the main process: for each group (searched suites of one environment), a leader imports the
    revision under it and a warm leader, warmed up with its first suite, runs `search` on the group; the
    `found` lines it sends reach `report.found`. A group whose leader fails is left without lines."""
    for group in groups:
        def lead(send: Send, group: list[dict[str, Any]] = group) -> None:
            _lead_search(group, open_revision, search, suite_seconds, send)

        ended = _follow(lead, {}, report, stall_seconds=suite_seconds + 2 * GRACE_SECONDS,
                        busy="timed out importing the revision")
        if ended.import_error is not None:
            report.import_failure(ended.import_error)


def _lead_search(group: list[dict[str, Any]], open_revision: OpenRevision, search: Search,
                 suite_seconds: float, send: Send) -> None:
    try:
        revision = open_revision(group[0])
    except ImportFailure as exc:
        send({"kind": "import_error", "reason": str(exc)})
        return
    send({"kind": "ready", "declined": []})
    relay = Report(result=lambda result: None, failure=lambda suite, why: None,
                   import_failure=lambda reason: None, found=send)
    _follow(lambda out: _warm_search(group, revision, search, out), {}, relay,
            stall_seconds=suite_seconds + GRACE_SECONDS, busy="timed out warming up")


def _warm_search(group: list[dict[str, Any]], revision: suiterun.Revision, search: Search,
                 send: Send) -> None:
    suiterun.warm_up(revision, group[0])
    send({"kind": "ready", "declined": []})
    gc.freeze()  # as for suites: the children share the warm leader's heap pages
    search(revision, group, send)


def _run_leader(suites: list[dict[str, Any]], open_revision: OpenRevision, workers: int,
                suite_seconds: float, report: Report) -> list[dict[str, Any]]:
    """A leader importing under `suites[0]`'s environment; returns the suites it declined.

    Its stall limit leaves room for a warm leader's (a hung warm-up is the leader's to handle).
    """
    pending = {suite["id"]: suite for suite in suites}
    ended = _follow(lambda send: _lead(suites, open_revision, workers, suite_seconds, send), pending, report,
                    stall_seconds=suite_seconds + 2 * GRACE_SECONDS, busy="timed out importing the revision")
    if ended.import_error is not None:
        report.import_failure(ended.import_error)
    declined = ended.declined
    if ended.phase == "started":
        # No import: a suite with another environment may still import, and gets a leader of its own.
        own = envprobe.whole_environment(suites[0])
        declined += [pending.pop(i) for i, s in list(pending.items()) if envprobe.whole_environment(s) != own]
    for suite in pending.values():
        report.failure(suite, ended.import_error or ended.reason)
    return declined


def _lead(suites: list[dict[str, Any]], open_revision: OpenRevision, workers: int, suite_seconds: float,
          send: Send) -> None:
    """The leader: import under the first suite's environment, then a warm leader per warm-up environment."""
    watcher = envprobe.EnvironmentWatcher()
    try:
        with watcher.watching():
            revision = open_revision(suites[0])
    except ImportFailure as exc:
        send({"kind": "import_error", "reason": str(exc)})
        return
    mine, declined = watcher.split(suites, suites[0])
    send({"kind": "ready", "declined": [s["id"] for s in declined]})
    relay = Report(result=lambda result: send({"kind": "suite", "result": result}),
                   failure=lambda s, why: send({"kind": "failed", "suite_id": s["id"], "reason": why}),
                   import_failure=lambda reason: None)
    if len(mine) >= hugepages.MIN_FORKS:
        hugepages.collapse()  # the warm leaders inherit it and pass on to their children what they leave
    first = True
    while mine:
        warmed = _run_warm_leader(Group(mine), revision, workers, suite_seconds, relay, send)
        mine = warmed.declined
        if mine and first:
            memo.adopt(warmed.answers)  # computed reading no variable: they hold for any environment
            mine = _preload(warmed.imported, mine, revision, suites[0], send) if warmed.imported else mine
        first = False


def _preload(names: list[str], suites: list[dict[str, Any]], revision: suiterun.Revision,
             own: dict[str, Any], send: Send) -> list[dict[str, Any]]:
    """In a leader: import `names` (installed modules a warm-up imported) under the leader's own suite's
    environment, as the warm-up did, so that the next warm leaders inherit them; returns the suites that
    agree with `own` on every variable these imports read, and declines the others (another leader)."""
    suiterun.set_environment(revision.base_env, own)  # exactly the warm-up's environment
    watcher = envprobe.EnvironmentWatcher()
    with watcher.watching():
        for name in names:
            try:
                importlib.import_module(name)
            except (Exception, SystemExit):
                continue  # found through a path the warm-up set, say: the warm-ups import it themselves
    mine, declined = watcher.split(suites, own)
    if declined:
        send({"kind": "declined", "declined": [s["id"] for s in declined]})
    return mine


def _run_warm_leader(group: Group, revision: suiterun.Revision, workers: int, suite_seconds: float,
                     relay: Report, send: Send) -> _Ended:
    """In a leader: a warm leader for the group; returns how it ended (the suites it declined, the installed
    modules its warm-up imported, its memoized answers)."""
    send({"kind": "alive"})  # the parent's stall limit starts again with each warm leader
    pending = {suite["id"]: suite for suite in group.suites}
    ended = _follow(lambda out: _warm_lead(group, revision, workers, suite_seconds, out), pending, relay,
                    stall_seconds=suite_seconds + GRACE_SECONDS, busy="timed out warming up")
    if pending and group.warm_up and ended.phase == "started":
        # The warm-up suite killed or hung the warm leader: one that skips warm-up isolates it in a child.
        retry = Group([s for s in group.suites if s["id"] in pending], warm_up=False)
        return _run_warm_leader(retry, revision, workers, suite_seconds, relay, send)
    for suite in pending.values():
        relay.failure(suite, ended.reason)
    return ended


def _warm_lead(group: Group, revision: suiterun.Revision, workers: int, suite_seconds: float,
               send: Send) -> None:
    """The warm leader: warm up with the first suite, then fork a child per suite that agrees with it."""
    watcher = envprobe.EnvironmentWatcher()
    before = set(sys.modules)
    with watcher.watching():
        suiterun.warm_up(revision, group.suites[0] if group.warm_up else None)
    mine, declined = watcher.split(group.suites, group.suites[0])
    imported = [n for n, m in list(sys.modules.items()) if n not in before and _installed(m, revision)]
    send({"kind": "ready", "declined": [s["id"] for s in declined], "imported": imported,
          "answers": memo.export()})
    gc.freeze()  # children then share the leader's heap pages instead of copying them on first touch
    if len(mine) >= hugepages.MIN_FORKS:
        hugepages.collapse()
    common.run_forked(mine, lambda suite: suiterun.run_suite(revision, suite), workers=workers,
                      timeout=suite_seconds,
                      on_result=lambda suite, result: send({"kind": "suite", "result": result}),
                      on_failure=lambda suite, why: send({"kind": "failed", "suite_id": suite["id"],
                                                         "reason": why}))


def _installed(module: Any, revision: suiterun.Revision) -> bool:
    """A module of an installed package or the standard library: not the repository's, the harness's, or a
    stub (whose attributes all exist, hence the look into its __dict__)."""
    path = getattr(module, "__dict__", {}).get("__file__")
    return isinstance(path, str) and not path.startswith((revision.repo.rstrip("/") + "/", HARNESS_DIR))


@dataclass
class _Ended:
    phase: str  # "started", or "ready" once the process built its state
    reason: str  # why it ended, for the suites it did not report
    import_error: str | None = None
    declined: list[dict[str, Any]] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)  # installed modules a warm leader's warm-up imported
    answers: str = ""  # the memoized answers a warm leader's warm-up computed (memo.export)
    reported: dict[str, dict[str, Any]] = field(default_factory=dict)  # the suites it reported, by id


def _follow(work: Callable[[Send], None], pending: dict[str, dict[str, Any]], report: Report, *,
            stall_seconds: float, busy: str) -> _Ended:
    """Fork a process running `work(send)` and relay its lines until it ends; reported suites leave
    `pending`, declined ones move to the result. `busy` says why it stalled before it was ready."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        common.keep_only(write_fd)  # before its repository code runs: no channel of another process
        _become(lambda: work(lambda message: _write_line(write_fd, message)))
    os.close(write_fd)
    common.hold(read_fd)
    ended = _Ended("started", "")
    stalled = None
    deadline = _Deadline(stall_seconds)
    with os.fdopen(read_fd, "rb") as lines:
        for message in _lines(lines.fileno(), deadline):
            if message is None:
                stalled = busy if ended.phase == "started" else "stalled"
                _kill(pid)
                break
            deadline.extend(stall_seconds)
            _take(message, ended, pending, report)
    common.let_go(read_fd)
    ended.reason = _with_tail(stalled or f"the group leader {_describe(_reap(pid))}", pid)
    return ended


def _take(message: dict[str, Any], ended: _Ended, pending: dict[str, dict[str, Any]], report: Report) -> None:
    kind, suite_id = message.get("kind"), _suite_id(message)
    if kind == "ready":
        ended.phase = "ready"
        imported, answers = message.get("imported"), message.get("answers")
        ended.imported = [n for n in imported if isinstance(n, str)] if isinstance(imported, list) else []
        ended.answers = answers if isinstance(answers, str) else ""
    if kind in ("ready", "declined"):
        declined = message.get("declined")
        for declined_id in declined if isinstance(declined, list) else ():
            if isinstance(declined_id, str) and declined_id in pending:
                ended.declined.append(pending.pop(declined_id))
            elif isinstance(declined_id, str) and declined_id in ended.reported:
                # Reported, then declined: never so honestly. Its report came from repository code: the
                # suite still runs elsewhere, and the host refuses a suite reported twice.
                ended.declined.append(ended.reported.pop(declined_id))
    elif kind == "import_error":
        ended.import_error = str(message.get("reason"))
    elif kind == "suite" and suite_id is not None:
        if suite_id in pending:
            ended.reported[suite_id] = pending.pop(suite_id)
        report.result(message["result"])  # passed on even when reported before: the host refuses it twice
    elif kind == "failed" and suite_id is not None:
        report.failure(pending.pop(suite_id, {"id": suite_id}), str(message.get("reason")))
    elif kind == "found":
        report.found(message)


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


def _become(work: Callable[[], None]) -> None:
    """The forked leader or warm leader: never returns."""
    code = 0
    try:
        os.setpgid(0, 0)  # so that killing it also kills what repository code started
        _stderr_to_file(os.getpid())
        work()
    except BaseException:  # it must always reach _exit
        traceback.print_exc()
        code = 70
    finally:
        os._exit(code)


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
