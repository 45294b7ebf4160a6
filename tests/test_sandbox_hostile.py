"""Hostile programs in the real sandbox: each run ends with a reason or a reported error, the caller is
unharmed, and nothing of the sandbox outlives the run."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from needs import working_sandbox

from app.analysis.core.policy import Limits
from app.sandbox.bwrap import LAUNCH_ENV
from app.sandbox.runner import SandboxRun, SandboxSpec, run_harness

PROBE = Path(__file__).resolve().parent / "sandbox_programs" / "probe.py"
SECRET_NAME = "GITHUB_WEBHOOK_SECRET"


@pytest.fixture(autouse=True)
def bwrap() -> None:
    working_sandbox()


@pytest.fixture
def program(tmp_path: Path) -> Iterator[str]:
    """The probe under a name of its own, so that a /proc scan finds this test's processes only."""
    harness = tmp_path / "harness"
    harness.mkdir()
    harness.chmod(0o755)
    name = f"probe_{os.urandom(6).hex()}.py"
    shutil.copy(PROBE, harness / name)
    (harness / name).chmod(0o644)
    yield name
    assert processes_running(name) == [], "the sandbox left processes behind"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    tree.mkdir()
    tree.chmod(0o755)
    return tree


def hostile(repo: Path, program: str, action: str, limits: Limits, **job: Any) -> SandboxRun:
    spec = SandboxSpec(program=program, repo_dir=repo, job={"action": action, **job}, limits=limits,
                       harness_dir=repo.parent / "harness")
    return run_harness(spec)


def processes_running(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line mentions `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if entry.isdigit() and marker.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def messages_of(run: SandboxRun, kind: str) -> list[dict[str, Any]]:
    return [m for m in run.messages if m.get("type") == kind]


def test_network_is_unreachable_and_names_do_not_resolve(repo: Path, program: str) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        run = hostile(repo, program, "network", Limits(total_seconds=20), port=listener.getsockname()[1])
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody came
    [report] = messages_of(run, "network")
    assert report["interfaces"] == ["lo"]
    assert report["connect"] == "ECONNREFUSED"
    assert report["resolve"] == "gaierror"
    assert report["resolv_conf"] is False


def test_init_environ_holds_no_secret(repo: Path, program: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_NAME, "s3cr3t-of-the-caller")
    run = hostile(repo, program, "read_init_environ", Limits(total_seconds=20))
    [report] = messages_of(run, "init")
    assert "s3cr3t-of-the-caller" not in report["environ"] and SECRET_NAME not in report["environ"]
    # bubblewrap's own environment, nothing of the caller's (not even its working directory)
    assert report["environ"].split("\0") == [f"{name}={value}" for name, value in LAUNCH_ENV.items()] + [""]
    assert run.ended is None


def test_fork_bomb_is_bounded_and_leaves_the_machine_usable(repo: Path, program: str) -> None:
    limits = Limits(processes=24, total_seconds=4)
    started = time.monotonic()
    run = hostile(repo, program, "fork_bomb", limits, report_after=1.5)
    assert run.ended == "timed out after 4 s"
    assert time.monotonic() - started < 4 + 8
    [report] = messages_of(run, "processes")
    assert 8 <= report["count"] <= limits.processes
    assert processes_running(program) == []
    assert subprocess.run(["true"], check=False).returncode == 0  # the caller can still fork


def test_memory_bomb_fails_inside(repo: Path, program: str) -> None:
    run = hostile(repo, program, "memory_bomb", Limits(memory_mb=256, total_seconds=20))
    [report] = messages_of(run, "memory")
    assert report["error"] == "MemoryError" and report["allocated_mib"] < 256
    assert run.ended is None


def test_endless_loop_times_out(repo: Path, program: str) -> None:
    started = time.monotonic()
    run = hostile(repo, program, "spin", Limits(total_seconds=3))
    assert run.ended == "timed out after 3 s"
    assert 3 <= time.monotonic() - started < 3 + 6
    assert [m["type"] for m in run.messages] == ["spinning"]


def test_flood_of_output_is_cut_at_the_limit(repo: Path, program: str) -> None:
    started = time.monotonic()
    run = hostile(repo, program, "flood", Limits(output_mb=2, total_seconds=20), mib=100)
    assert run.ended == "output limit of 2 MiB exceeded"
    assert time.monotonic() - started < 10
    assert run.messages == []


def test_killing_parents_and_everyone_leaves_the_caller_alive(repo: Path, program: str) -> None:
    run = hostile(repo, program, "kill_parents", Limits(total_seconds=20))
    [report] = messages_of(run, "killed")
    assert report["parent"] == 1  # the sandbox's own init, not anything of the caller
    assert run.ended is None and messages_of(run, "done")
    os.kill(os.getpid(), 0)  # and the caller is still here


def test_huge_file_is_stopped_at_the_file_size_limit(repo: Path, program: str) -> None:
    run = hostile(repo, program, "big_file", Limits(file_mb=4, tmp_mb=64, total_seconds=20))
    [refused] = messages_of(run, "refused")
    assert (refused["error"], refused["mib"]) == ("EFBIG", 4)
    assert run.ended is None


@pytest.mark.parametrize("hang", [False, True], ids=["program-exits", "program-hangs"])
def test_grandchild_that_ignores_sigterm_does_not_outlive_the_run(repo: Path, program: str,
                                                                  hang: bool) -> None:
    marker = f"orphan-{os.urandom(6).hex()}"
    run = hostile(repo, program, "orphan", Limits(total_seconds=3), marker=marker, hang=hang)
    assert messages_of(run, "orphan")
    assert processes_running(marker) == []
    assert run.ended == ("timed out after 3 s" if hang else None)


CALLER = """
import sys
from pathlib import Path
from app.analysis.core.policy import Limits
from app.sandbox.runner import SandboxSpec, run_harness

repo, program, marker = sys.argv[1:]
job = {"action": "orphan", "marker": marker, "hang": True}
spec = SandboxSpec(program=program, repo_dir=Path(repo), job=job, limits=Limits(total_seconds=60),
                   harness_dir=Path(repo).parent / "harness")
run_harness(spec, on_message=lambda message: print(message["type"], flush=True))
"""


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A TMPDIR for a caller that dies before it can remove its temp dirs (other uids may pass it)."""
    directory = Path(tempfile.mkdtemp(prefix="prtriage-test-"))
    directory.chmod(0o711)
    yield directory
    shutil.rmtree(directory)


def test_sandbox_dies_with_a_caller_that_is_killed(repo: Path, program: str, scratch: Path) -> None:
    marker = f"orphan-{os.urandom(6).hex()}"
    root = Path(__file__).resolve().parents[1]
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(repo), program, marker], cwd=root,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(scratch)})
    assert caller.stdout is not None
    assert caller.stdout.readline() == "orphan\n"  # the sandbox and its grandchild are up
    assert processes_running(marker)
    caller.kill()
    caller.wait()
    caller.stdout.close()
    deadline = time.monotonic() + 5
    while processes_running(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_running(marker) == []


@pytest.mark.parametrize(("job", "reason"), [
    ({"depth": 100_000}, "the sandboxed code wrote a message nested deeper than 64 levels"),
    ({"depth": 500}, "the sandboxed code wrote a message nested deeper than 64 levels"),
    ({"bytes": 5 * 1024 * 1024}, "the sandboxed code wrote a message line longer than 4 MiB"),
], ids=["100000-deep", "500-deep", "5-MiB-line"])
def test_a_malformed_message_line_stops_the_run_with_a_reason(repo: Path, program: str, job: dict[str, Any],
                                                              reason: str) -> None:
    run = hostile(repo, program, "bad_line", Limits(total_seconds=20), **job)
    assert run.ended == reason
    assert [m["type"] for m in run.messages] == ["before"]
