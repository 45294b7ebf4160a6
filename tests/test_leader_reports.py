"""The harness leader's result reporting (app/sandbox/harness/leader.py), in this process with real forks and
pipes: what the lines a leader writes become for the runner, what a suite without a result is told, and how
a leader that dies, stalls or fails to import is described (issue 27). Inside the sandbox the same code runs
under the validate harness (tests/test_harness_integrity.py); here each rule is reached on its own."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "app" / "sandbox" / "harness"


@pytest.fixture(scope="module")
def leader() -> Iterator[ModuleType]:
    """The leader as the sandbox imports it: its siblings (common, envprobe …) are top-level modules."""
    sys.path.insert(0, str(HARNESS))
    try:
        yield importlib.import_module("app.sandbox.harness.leader")
    finally:
        sys.path.remove(str(HARNESS))


class Runner:
    """What the main process's Report receives, in order."""

    def __init__(self, leader: ModuleType) -> None:
        self.results: list[dict[str, Any]] = []
        self.failures: list[tuple[str, str]] = []
        self.import_failures: list[str] = []
        self.report = leader.Report(result=self.results.append,
                                    failure=lambda suite, why: self.failures.append((suite["id"], why)),
                                    import_failure=self.import_failures.append)


def suite(suite_id: str, **env: str) -> dict[str, Any]:
    return {"id": suite_id, "env": env}


def result(suite_id: str, outcome: str = "accepted") -> dict[str, Any]:
    return {"suite_id": suite_id, "outcome": {"outcome": outcome}}


def pending_of(*ids: str) -> dict[str, dict[str, Any]]:
    return {suite_id: suite(suite_id) for suite_id in ids}


# --- _take: one line of a leader -----------------------------------------------------------------------

def test_a_suite_line_reports_its_result_and_leaves_pending(leader: ModuleType) -> None:
    runner, ended, pending = Runner(leader), leader._Ended("started", ""), pending_of("a", "b")
    leader._take({"kind": "suite", "result": result("a")}, ended, pending, runner.report)
    assert runner.results == [result("a")]
    assert list(pending) == ["b"] and list(ended.reported) == ["a"]


def test_a_suite_reported_again_or_never_given_is_still_passed_on(leader: ModuleType) -> None:
    runner, ended, pending = Runner(leader), leader._Ended("started", ""), pending_of("a")
    for line in ({"kind": "suite", "result": result("a")},
                 {"kind": "suite", "result": result("a", "rejected")},
                 {"kind": "suite", "result": result("z")}):
        leader._take(line, ended, pending, runner.report)
    assert runner.results == [result("a"), result("a", "rejected"), result("z")]  # the host refuses them
    assert pending == {} and list(ended.reported) == ["a"]


def test_lines_without_a_suite_id_report_nothing(leader: ModuleType) -> None:
    runner, ended, pending = Runner(leader), leader._Ended("started", ""), pending_of("a")
    for line in ({"kind": "suite", "result": {"suite_id": 7}}, {"kind": "suite", "result": "a"},
                 {"kind": "suite"}, {"kind": "failed"}, {"kind": "failed", "suite_id": ["a"]},
                 {"kind": "other", "suite_id": "a"}, {"suite_id": "a"}):
        leader._take(line, ended, pending, runner.report)
    assert (runner.results, runner.failures, list(pending)) == ([], [], ["a"])
    assert ended.phase == "started"


def test_a_failed_line_reports_the_suite_with_its_reason(leader: ModuleType) -> None:
    runner, ended, pending = Runner(leader), leader._Ended("started", ""), pending_of("a", "b")
    leader._take({"kind": "failed", "suite_id": "a", "reason": "killed by signal 9"}, ended, pending,
                 runner.report)
    leader._take({"kind": "failed", "suite_id": "x", "reason": 3}, ended, pending, runner.report)
    assert runner.failures == [("a", "killed by signal 9"), ("x", "3")]
    assert list(pending) == ["b"]


def test_ready_takes_the_warm_ups_imports_and_answers(leader: ModuleType) -> None:
    runner, ended, pending = Runner(leader), leader._Ended("started", ""), pending_of("a", "b", "c")
    leader._take({"kind": "ready", "declined": ["b", 5, "nobody"], "imported": ["numpy", 3, "torch"],
                  "answers": "b64"}, ended, pending, runner.report)
    assert (ended.phase, ended.imported, ended.answers) == ("ready", ["numpy", "torch"], "b64")
    assert ended.declined == [suite("b")] and list(pending) == ["a", "c"]


def test_ready_without_imports_or_answers_of_their_shape(leader: ModuleType) -> None:
    ended = leader._Ended("started", "")
    line = {"kind": "ready", "declined": "a", "imported": "numpy", "answers": 5}
    leader._take(line, ended, pending_of("a"), Runner(leader).report)
    assert (ended.phase, ended.imported, ended.answers, ended.declined) == ("ready", [], "", [])


def test_a_suite_declined_after_its_report_runs_elsewhere(leader: ModuleType) -> None:
    runner, ended, pending = Runner(leader), leader._Ended("ready", ""), pending_of("a", "b")
    leader._take({"kind": "suite", "result": result("a")}, ended, pending, runner.report)
    leader._take({"kind": "declined", "declined": ["a", "b"]}, ended, pending, runner.report)
    assert ended.declined == [suite("a"), suite("b")]
    assert ended.reported == {} and pending == {}


def test_an_import_error_is_kept_as_text(leader: ModuleType) -> None:
    ended = leader._Ended("started", "")
    line = {"kind": "import_error", "reason": "ModuleNotFoundError: torch"}
    leader._take(line, ended, {}, Runner(leader).report)
    assert ended.import_error == "ModuleNotFoundError: torch"
    leader._take({"kind": "import_error"}, ended, {}, Runner(leader).report)
    assert ended.import_error == "None"


# --- _lines: the pipe, line by line --------------------------------------------------------------------

def lines_of(leader: ModuleType, data: bytes, *, seconds: float = 5.0) -> list[dict[str, Any] | None]:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)
    try:
        return list(leader._lines(read_fd, leader._Deadline(seconds)))
    finally:
        os.close(read_fd)


def test_lines_are_json_objects_and_anything_else_is_skipped(leader: ModuleType) -> None:
    data = b'{"kind": "a"}\nnot json\n[1, 2]\n"text"\n\n{"kind": "b"}\n{"kind": "unfinished"'
    assert lines_of(leader, data) == [{"kind": "a"}, {"kind": "b"}]


def test_lines_split_across_reads_are_joined(leader: ModuleType) -> None:
    big = {"kind": "suite", "pad": "x" * 200_000}  # several reads of 64 KB
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        leader._write_line(write_fd, big)
        leader._write_line(write_fd, {"kind": "after"})
        os._exit(0)
    os.close(write_fd)
    try:
        assert list(leader._lines(read_fd, leader._Deadline(10))) == [big, {"kind": "after"}]
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)


def in_two_writes(leader: ModuleType, first: bytes, second: bytes) -> list[dict[str, Any] | None]:
    """The lines of FIRST then, once the reader has read it, SECOND."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, first)

    def later() -> None:
        time.sleep(0.3)
        os.write(write_fd, second)
        os.close(write_fd)

    writer = threading.Thread(target=later)
    writer.start()
    try:
        return list(leader._lines(read_fd, leader._Deadline(10)))
    finally:
        writer.join()
        os.close(read_fd)


def test_a_line_past_the_limit_ends_the_stream(leader: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "MAX_LINE_BYTES", 100)
    start = b'{"pad": "' + b"x" * 89  # 98 bytes of a line: with what follows, 100 and its newline
    assert in_two_writes(leader, start + b'"}', b'\n{"kind": "next"}\n') == [{"pad": "x" * 89},
                                                                             {"kind": "next"}]
    assert in_two_writes(leader, start + b'"}x', b'\n{"kind": "next"}\n') == []  # 101 bytes, no newline yet


def test_a_silent_pipe_past_the_deadline_is_none(leader: ModuleType) -> None:
    read_fd, write_fd = os.pipe()
    try:
        started = time.monotonic()
        assert list(leader._lines(read_fd, leader._Deadline(0.3))) == [None]
        assert time.monotonic() - started >= 0.25
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_a_deadline_already_passed_is_none_at_once(leader: ModuleType) -> None:
    read_fd, write_fd = os.pipe()
    try:
        started = time.monotonic()
        assert list(leader._lines(read_fd, leader._Deadline(-5))) == [None]
        assert time.monotonic() - started < 0.5
    finally:
        os.close(read_fd)
        os.close(write_fd)


# --- _follow: a forked process and its lines ----------------------------------------------------------

def follow(leader: ModuleType, work: Callable[[Callable[[dict[str, Any]], None]], None], *ids: str,
           stall: float = 10.0) -> tuple[Any, Runner, dict[str, dict[str, Any]]]:
    runner, pending = Runner(leader), pending_of(*ids)
    ended = leader._follow(work, pending, runner.report, stall_seconds=stall, busy="timed out importing")
    return ended, runner, pending


def test_follow_relays_a_processs_lines_and_says_how_it_ended(leader: ModuleType) -> None:
    def work(send: Callable[[dict[str, Any]], None]) -> None:
        send({"kind": "ready", "declined": ["c"]})
        send({"kind": "suite", "result": result("a")})
        send({"kind": "failed", "suite_id": "b", "reason": "timed out"})

    ended, runner, pending = follow(leader, work, "a", "b", "c", "d")
    assert (ended.phase, ended.reason) == ("ready", "the group leader exited with status 0")
    assert runner.results == [result("a")] and runner.failures == [("b", "timed out")]
    assert ended.declined == [suite("c")] and list(pending) == ["d"]


def test_a_process_that_raises_ends_with_70_and_its_traceback(leader: ModuleType,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)  # as in the sandbox: sys.stderr writes to fd 2

    def work(send: Callable[[dict[str, Any]], None]) -> None:
        send({"kind": "suite", "result": result("a")})
        raise RuntimeError("repository code broke the leader")

    ended, runner, pending = follow(leader, work, "a", "b")
    assert ended.reason.startswith("the group leader exited with status 70: Traceback")
    assert ended.reason.endswith("RuntimeError: repository code broke the leader")
    assert runner.results == [result("a")] and list(pending) == ["b"]


def test_only_the_tail_of_a_long_stderr_is_kept(leader: ModuleType) -> None:
    written = b"".join(b"line %d\n" % n for n in range(1000)) + "the last words \u00e9".encode() + b"\xff"

    def work(send: Callable[[dict[str, Any]], None]) -> None:
        os.write(2, written)
        os._exit(3)

    ended, _, _ = follow(leader, work, "a")
    tail = written[-leader.STDERR_TAIL_BYTES:].decode("utf-8", "replace").strip()
    assert ended.reason == f"the group leader exited with status 3: {tail}"
    assert tail.endswith("the last words \u00e9\ufffd") and tail.startswith("9\nline 780")


def test_a_short_stderr_is_kept_whole(leader: ModuleType) -> None:
    def work(send: Callable[[dict[str, Any]], None]) -> None:
        os.write(2, b"boom")
        os._exit(3)

    assert follow(leader, work, "a")[0].reason == "the group leader exited with status 3: boom"


def test_without_a_stderr_file_the_reason_is_alone(leader: ModuleType) -> None:
    assert leader._with_tail("the reason", 2**22 + 12345) == "the reason"


def test_a_killed_process_is_described_by_its_signal(leader: ModuleType) -> None:
    def work(send: Callable[[dict[str, Any]], None]) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    ended, _, _ = follow(leader, work, "a")
    assert ended.reason == "the group leader was killed by signal 9 (SIGKILL)"


def test_a_process_silent_before_ready_is_killed_as_busy(leader: ModuleType) -> None:
    def work(send: Callable[[dict[str, Any]], None]) -> None:
        time.sleep(60)

    started = time.monotonic()
    ended, _, pending = follow(leader, work, "a", stall=0.5)
    assert ended.reason == "timed out importing" and ended.phase == "started"
    assert time.monotonic() - started < 30 and list(pending) == ["a"]


def state_of(pid: int) -> str:
    """A process's state letter (Z: a zombie, dead and not yet reaped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_stalled_process_is_killed_not_left_running(leader: ModuleType) -> None:
    def work(send: Callable[[dict[str, Any]], None]) -> None:
        send({"kind": "failed", "suite_id": "pid", "reason": str(os.getpid())})
        time.sleep(60)

    _, runner, _ = follow(leader, work, "pid", stall=0.5)
    pid = int(runner.failures[0][1])
    try:
        deadline = time.monotonic() + 10
        while state_of(pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state_of(pid) == "Z"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_process_silent_after_ready_is_killed_as_stalled(leader: ModuleType) -> None:
    def work(send: Callable[[dict[str, Any]], None]) -> None:
        send({"kind": "ready", "declined": []})
        os.write(2, b"stuck in a suite")
        time.sleep(60)

    ended, _, _ = follow(leader, work, "a", stall=0.5)
    assert ended.reason == "stalled: stuck in a suite"


def test_each_line_starts_the_stall_limit_again(leader: ModuleType) -> None:
    def work(send: Callable[[dict[str, Any]], None]) -> None:
        for suite_id in "abcd":
            time.sleep(0.3)
            send({"kind": "suite", "result": result(suite_id)})

    ended, runner, _ = follow(leader, work, "a", "b", "c", "d", stall=0.8)
    assert [r["suite_id"] for r in runner.results] == ["a", "b", "c", "d"]
    assert ended.reason == "the group leader exited with status 0"


def test_the_forked_process_holds_no_other_channel(leader: ModuleType) -> None:
    other_read, other_write = os.pipe()
    leader.common.hold(other_write)
    try:
        def work(send: Callable[[dict[str, Any]], None]) -> None:
            try:
                os.fstat(other_write)
                send({"kind": "failed", "suite_id": "a", "reason": "still open"})
            except OSError:
                send({"kind": "failed", "suite_id": "a", "reason": "closed"})

        _, runner, _ = follow(leader, work, "a")
        assert runner.failures == [("a", "closed")]
    finally:
        leader.common.let_go(other_write)
        os.close(other_read)
        os.close(other_write)


def test_no_stderr_file_is_left_behind(leader: ModuleType) -> None:
    seen: list[int] = []

    def work(send: Callable[[dict[str, Any]], None]) -> None:
        send({"kind": "failed", "suite_id": "a", "reason": str(os.getpid())})

    _, runner, _ = follow(leader, work, "a")
    seen.append(int(runner.failures[0][1]))
    assert not os.path.exists(leader._stderr_path(seen[0]))


# --- _run_leader and run_all: a revision that does not import ------------------------------------------

def failing_import(leader: ModuleType, reason: str) -> Callable[[dict[str, Any]], Any]:
    def open_revision(first: dict[str, Any]) -> Any:
        raise leader.ImportFailure(reason)

    return open_revision


def test_a_revision_that_does_not_import_fails_every_suite_of_its_environment(leader: ModuleType) -> None:
    runner = Runner(leader)
    suites = [suite("a", MODE="x"), suite("b", MODE="x"), suite("c", MODE="y")]
    opening = failing_import(leader, "ModuleNotFoundError: torch")
    declined = leader._run_leader(suites, opening, 1, 10.0, runner.report)
    assert runner.import_failures == ["ModuleNotFoundError: torch"]
    assert runner.failures == [("a", "ModuleNotFoundError: torch"), ("b", "ModuleNotFoundError: torch")]
    assert declined == [suite("c", MODE="y")]  # another environment may import: a leader of its own


def test_run_all_gives_each_environment_its_own_leader(leader: ModuleType) -> None:
    runner = Runner(leader)
    suites = [suite("a", MODE="x"), suite("b", MODE="y"), suite("c", MODE="x")]
    leader.run_all(suites, failing_import(leader, "no"), workers=1, suite_seconds=10.0, report=runner.report)
    assert runner.import_failures == ["no", "no"]
    assert runner.failures == [("a", "no"), ("c", "no"), ("b", "no")]
    assert runner.results == []


def test_a_leader_that_dies_before_importing_fails_its_suites_with_why(leader: ModuleType) -> None:
    def open_revision(first: dict[str, Any]) -> Any:
        os._exit(9)

    runner = Runner(leader)
    declined = leader._run_leader([suite("a"), suite("b")], open_revision, 1, 10.0, runner.report)
    assert declined == [] and runner.import_failures == []
    assert runner.failures == [("a", "the group leader exited with status 9"),
                               ("b", "the group leader exited with status 9")]


def test_run_leader_gives_the_import_room_beyond_one_suite(leader: ModuleType,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "GRACE_SECONDS", 1.0)

    def open_revision(first: dict[str, Any]) -> Any:
        time.sleep(1.5)  # past suite_seconds + one grace, within suite_seconds + two
        os._exit(0)

    runner = Runner(leader)
    leader._run_leader([suite("a")], open_revision, 1, 0.1, runner.report)
    assert runner.failures == [("a", "the group leader exited with status 0")]
    slow = Runner(leader)

    def slower(first: dict[str, Any]) -> Any:
        time.sleep(2.6)  # past suite_seconds + two graces, within three
        os._exit(0)

    leader._run_leader([suite("a")], slower, 1, 0.1, slow.report)
    assert slow.failures == [("a", "timed out importing the revision")]


def test_the_line_format_is_one_json_object_a_line(leader: ModuleType) -> None:
    read_fd, write_fd = os.pipe()
    leader._write_line(write_fd, {"kind": "x", "path": Path("/p")})
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        assert pipe.read() == (json.dumps({"kind": "x", "path": "/p"}) + "\n").encode()


# --- _run_warm_leader: a warm leader that dies, before or after it is ready -------------------------------

def in_place_of_warm_lead(leader: ModuleType, monkeypatch: pytest.MonkeyPatch,
                          body: Callable[[Any, Callable[[dict[str, Any]], None]], None]) -> None:
    monkeypatch.setattr(leader, "_warm_lead",
                        lambda group, revision, workers, seconds, send: body(group, send))


def warm_leader_runs(leader: ModuleType, monkeypatch: pytest.MonkeyPatch,
                     body: Callable[[Any, Callable[[dict[str, Any]], None]], None],
                     *ids: str) -> tuple[Any, Runner, list[dict[str, Any]]]:
    """_run_warm_leader over suites IDS, each warm leader's process running BODY(group, send) in place of
    the warm-up and the suites (which need a real revision): the forks, pipes and reports are real."""
    in_place_of_warm_lead(leader, monkeypatch, body)
    runner, sent = Runner(leader), []
    ended = leader._run_warm_leader(leader.Group([suite(i) for i in ids]), None, 1, 10.0, runner.report,
                                    sent.append)
    return ended, runner, sent


def test_a_warm_leader_killed_before_ready_is_retried_without_warm_up(
        leader: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def body(group: Any, send: Callable[[dict[str, Any]], None]) -> None:
        if group.warm_up:
            send({"kind": "suite", "result": result("a")})  # repository code may report before ready
            os.kill(os.getpid(), signal.SIGKILL)
        send({"kind": "ready", "declined": []})
        for each in group.suites:
            send({"kind": "suite", "result": result(each["id"], "rejected")})
        os.write(2, ("|".join(s["id"] for s in group.suites)).encode())

    ended, runner, sent = warm_leader_runs(leader, monkeypatch, body, "a", "b", "c")
    assert sent == [{"kind": "alive"}, {"kind": "alive"}]  # each warm leader restarts the stall limit
    assert runner.results == [result("a"), result("b", "rejected"), result("c", "rejected")]
    assert runner.failures == []
    assert ended.reason == "the group leader exited with status 0: b|c"  # only the unreported suites


def test_a_warm_leader_dying_after_ready_fails_what_it_did_not_report(
        leader: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def body(group: Any, send: Callable[[dict[str, Any]], None]) -> None:
        send({"kind": "ready", "declined": ["c"]})
        send({"kind": "suite", "result": result("a")})
        os._exit(5)

    ended, runner, sent = warm_leader_runs(leader, monkeypatch, body, "a", "b", "c")
    assert sent == [{"kind": "alive"}]
    assert runner.results == [result("a")]
    assert runner.failures == [("b", "the group leader exited with status 5")]
    assert ended.declined == [suite("c")]


def test_a_warm_leader_without_warm_up_that_dies_is_not_retried(leader: ModuleType,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def body(group: Any, send: Callable[[dict[str, Any]], None]) -> None:
        os._exit(4)

    runner, sent = Runner(leader), []
    in_place_of_warm_lead(leader, monkeypatch, body)
    ended = leader._run_warm_leader(leader.Group([suite("a")], warm_up=False), None, 1, 10.0, runner.report,
                                    sent.append)
    assert sent == [{"kind": "alive"}]
    assert runner.failures == [("a", "the group leader exited with status 4")]
    assert ended.phase == "started"


def test_a_warm_leader_that_reported_everything_before_dying_is_not_retried(
        leader: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def body(group: Any, send: Callable[[dict[str, Any]], None]) -> None:
        send({"kind": "suite", "result": result("a")})
        os._exit(6)

    ended, runner, sent = warm_leader_runs(leader, monkeypatch, body, "a")
    assert sent == [{"kind": "alive"}] and runner.results == [result("a")] and runner.failures == []
    assert ended.reason == "the group leader exited with status 6"


def test_a_silent_warm_leader_is_timed_out_warming_up(leader: ModuleType,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "GRACE_SECONDS", 0.2)

    def body(group: Any, send: Callable[[dict[str, Any]], None]) -> None:
        if group.warm_up:
            time.sleep(60)
        os._exit(0)

    in_place_of_warm_lead(leader, monkeypatch, body)
    runner, sent = Runner(leader), []
    ended = leader._run_warm_leader(leader.Group([suite("a")]), None, 1, 0.1, runner.report, sent.append)
    assert runner.failures == [("a", "the group leader exited with status 0")]
    assert ended.phase == "started" and len(sent) == 2


def test_a_leader_that_dies_after_importing_fails_only_its_own_environment(
        leader: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def body(suites: list[dict[str, Any]], send: Callable[[dict[str, Any]], None]) -> None:
        send({"kind": "ready", "declined": []})
        os._exit(3)

    monkeypatch.setattr(leader, "_lead", lambda suites, opening, workers, seconds, send: body(suites, send))
    runner = Runner(leader)
    declined = leader._run_leader([suite("a", MODE="x"), suite("b", MODE="y")], None, 1, 10.0, runner.report)
    # it imported: every suite it was given was its own, whatever the environment
    assert declined == [] and runner.import_failures == []
    assert runner.failures == [("a", "the group leader exited with status 3"),
                               ("b", "the group leader exited with status 3")]


def test_a_warm_leader_without_warm_up_that_stalls_is_timed_out_warming_up(
        leader: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader, "GRACE_SECONDS", 0.2)

    def body(group: Any, send: Callable[[dict[str, Any]], None]) -> None:
        time.sleep(60)

    in_place_of_warm_lead(leader, monkeypatch, body)
    runner = Runner(leader)
    leader._run_warm_leader(leader.Group([suite("a")], warm_up=False), None, 1, 0.1, runner.report,
                            lambda message: None)
    assert runner.failures == [("a", "timed out warming up")]
