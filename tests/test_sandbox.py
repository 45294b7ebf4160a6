"""The sandbox runner with the real bubblewrap: what the program sees, what it gets back, the fallback."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from needs import working_sandbox

from app.analysis.core.policy import Limits
from app.sandbox.runner import (
    REAPER,
    SandboxRun,
    SandboxSpec,
    SandboxUnavailable,
    run_harness,
    sandbox_problem,
)

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "sandbox_programs"
SECRET_NAME = "GITHUB_WEBHOOK_SECRET"
SANDBOX_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONHASHSEED": "0"}


@pytest.fixture
def bwrap() -> None:
    working_sandbox()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "README.md").write_text("the tree under analysis\n")
    tree.chmod(0o755)
    return tree


def run_probe(repo: Path, action: str, *, limits: Limits | None = None, on_message: Any = None,
              allow_unsandboxed: bool = False, **job: Any) -> SandboxRun:
    spec = SandboxSpec(program="probe.py", repo_dir=repo, job={"action": action, **job},
                       limits=limits or Limits(total_seconds=60), allow_unsandboxed=allow_unsandboxed,
                       harness_dir=PROGRAMS)
    return run_harness(spec, on_message=on_message)


def only(run: SandboxRun, kind: str) -> dict[str, Any]:
    found = [m for m in run.messages if m.get("type") == kind]
    assert len(found) == 1, (run.messages, run.ended, run.stderr_tail)
    return found[0]


@pytest.mark.usefixtures("bwrap")
def test_round_trip_keeps_json_objects_only_and_points_the_job_at_the_tree(repo: Path) -> None:
    job = {"action": "echo", "suites": [{"id": "a", "argv": ["--x"]}]}
    spec = SandboxSpec(program="probe.py", repo_dir=repo, job=job, limits=Limits(total_seconds=60),
                       harness_dir=PROGRAMS)
    run = run_harness(spec)
    assert (run.returncode, run.ended, run.sandboxed) == (0, None, True)
    assert [m["type"] for m in run.messages] == ["echo", "done"]
    echo = run.messages[0]
    assert echo["job"] == {**job, "repo": "/repo"}
    assert echo["cwd"] == "/repo"
    assert echo["argv"] == ["/harness/probe.py", "/job/job.json"]
    assert "repo" not in spec.job  # the caller's job is left alone


@pytest.mark.usefixtures("bwrap")
def test_messages_reach_on_message_as_they_are_printed(repo: Path) -> None:
    arrivals: list[tuple[str, float]] = []
    run = run_probe(repo, "stream", pause=1.0, on_message=lambda m: arrivals.append((m["type"],
                                                                                     time.monotonic())))
    assert [kind for kind, _ in arrivals] == ["first", "second", "done"]
    assert arrivals[1][1] - arrivals[0][1] >= 0.8  # the first came before the program slept
    assert [m["type"] for m in run.messages] == ["first", "second", "done"]


@pytest.mark.usefixtures("bwrap")
def test_program_sees_job_and_read_only_tree_but_nothing_of_the_caller(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "next-to-the-repo.txt"
    outside.write_text("private")
    home = Path.home()
    paths = [str(outside), str(tmp_path), "/etc/shadow", "/etc/resolv.conf", "/etc/hostname",
             str(Path(__file__).resolve()), str(ROOT / "app" / "sandbox" / "runner.py")]
    report = only(run_probe(repo, "inspect", paths=paths, home=str(home)), "inspect")
    assert '"action": "inspect"' in report["job_text"]
    assert report["repo_listing"] == ["README.md"]
    assert report["repo_file"] == "the tree under analysis\n"
    assert report["repo_write"] == "EROFS"
    assert report["root_write"] == "EROFS"
    assert report["dev_write"] == "EROFS"
    assert report["devnull_write"] == "ok"
    assert report["exists"] == dict.fromkeys(paths, False)
    assert report["uid"] == [65534] * 3 and report["gid"] == [65534] * 3
    # the standard library, and nothing of what is installed beside prtriage (its own dependencies, pytest)
    assert report["imports"] == {"json": "ok", "sqlite3": "ok", "ssl": "ok", "jinja2": "ModuleNotFoundError",
                                 "numpy": "ModuleNotFoundError", "pydantic": "ModuleNotFoundError",
                                 "pytest": "ModuleNotFoundError", "yaml": "ModuleNotFoundError"}


@pytest.mark.usefixtures("bwrap")
def test_only_the_way_to_the_interpreter_is_visible_in_the_callers_home(repo: Path) -> None:
    home = Path.home()
    report = only(run_probe(repo, "inspect", paths=[], home=str(home)), "inspect")
    on_the_way = {Path(p).relative_to(home).parts[0] for p in (sys.base_prefix, sys.prefix)
                  if Path(p).is_relative_to(home)}
    assert set(report["home_listing"] or []) == on_the_way
    assert set(os.listdir(home)) - on_the_way  # there is more in the home than what the sandbox shows


@pytest.mark.usefixtures("bwrap")
def test_tmp_is_writable_and_bounded(repo: Path) -> None:
    limits = Limits(tmp_mb=16, file_mb=8, total_seconds=60)
    report = only(run_probe(repo, "fill_tmp", limits=limits, file_mib=4), "filled")
    assert report["outcome"] == "ENOSPC"
    assert 8 * 2**20 < report["written"] <= 16 * 2**20


@pytest.mark.usefixtures("bwrap")
def test_environment_is_cleared_everywhere_a_program_could_look(repo: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-" + os.urandom(8).hex()
    monkeypatch.setenv(SECRET_NAME, secret)
    report = only(run_probe(repo, "inspect", paths=[], home="/nonexistent"), "inspect")
    assert report["environ"] == {**SANDBOX_ENV, "PWD": "/repo"}  # bubblewrap sets PWD after --chdir
    files = report["environ_files"]
    assert {"/proc/1/environ", "/proc/self/environ"} <= set(files)
    assert [path for path, text in files.items() if secret in text or SECRET_NAME in text] == []


@pytest.mark.usefixtures("bwrap")
def test_exit_status_and_stderr_tail_are_reported(repo: Path) -> None:
    run = run_probe(repo, "exit_with", status=3)
    assert (run.returncode, run.ended) == (3, "exited with status 3")
    assert "about to exit" in run.stderr_tail
    crashed = run_probe(repo, "no_such_action")
    assert crashed.ended == "exited with status 1"
    assert "KeyError: 'no_such_action'" in crashed.stderr_tail


def real_uids(marker: str) -> set[int]:
    """Real uids, as the host sees them, of the processes whose command line mentions `marker` (but the
    reaper, the runner's child that carries the whole command line and stays the caller's uid)."""
    uids = set()
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        if entry.isdigit() and marker.encode() in cmdline and str(REAPER).encode() not in cmdline:
            uids.add(int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1]))
    return uids


@pytest.mark.usefixtures("bwrap")
def test_two_runs_at_once_from_two_threads_each_under_its_own_real_uid(repo: Path, tmp_path: Path) -> None:
    harness = tmp_path / "harness"
    harness.mkdir()
    harness.chmod(0o755)
    names = {side: f"probe_{side}_{os.urandom(4).hex()}.py" for side in ("base", "head")}
    for name in names.values():
        shutil.copy(PROGRAMS / "probe.py", harness / name)
    runs: dict[str, SandboxRun] = {}
    uids: dict[str, set[int]] = {}

    def run(side: str) -> None:
        def on_message(message: dict[str, Any]) -> None:
            if message["type"] == "first":  # the program is alive now, sleeping
                uids[side] = real_uids(names[side])

        spec = SandboxSpec(program=names[side], repo_dir=repo, job={"action": "stream", "pause": 1.0},
                           limits=Limits(total_seconds=60), harness_dir=harness)
        runs[side] = run_harness(spec, on_message=on_message)

    threads = [threading.Thread(target=run, args=(side,)) for side in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(runs) == ["base", "head"]
    assert all([m["type"] for m in r.messages] == ["first", "second", "done"] for r in runs.values())
    if os.geteuid() == 0:  # then the kernel enforces the process limit only for a uid that is not 0
        [base_uid], [head_uid] = uids["base"], uids["head"]
        assert 0 not in (base_uid, head_uid) and base_uid != head_uid
    else:
        assert uids == {"base": {os.geteuid()}, "head": {os.geteuid()}}


def test_unknown_program_is_refused(repo: Path) -> None:
    with pytest.raises(ValueError, match="no harness program"):
        run_harness(SandboxSpec(program="../probe.py", repo_dir=repo, job={}, limits=Limits(),
                                harness_dir=PROGRAMS / "missing"))


def test_missing_bubblewrap_refuses_to_run(repo: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRTRIAGE_BWRAP", str(tmp_path / "no-bwrap-here"))
    problem = sandbox_problem()
    assert problem is not None and "not found" in problem and "apt-get install bubblewrap" in problem
    with pytest.raises(SandboxUnavailable, match="no-bwrap-here"):
        run_probe(repo, "echo")


def test_unusable_bubblewrap_is_told_apart_from_a_missing_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRTRIAGE_BWRAP", "false")  # installed, but cannot sandbox anything
    problem = sandbox_problem()
    assert problem is not None and "installed but cannot run a sandbox" in problem


def test_without_bubblewrap_the_fallback_runs_plainly_with_the_same_limits(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRTRIAGE_BWRAP", str(tmp_path / "no-bwrap-here"))
    monkeypatch.setenv(SECRET_NAME, "s3cr3t")
    limits = Limits(memory_mb=1024, processes=64, file_mb=8, total_seconds=30)
    run = run_probe(repo, "limits", limits=limits, allow_unsandboxed=True)
    assert (run.sandboxed, run.ended) == (False, None)
    report = only(run, "limits")
    assert report["job"]["repo"] == str(repo.resolve())
    assert report["cwd"] == str(repo.resolve())
    assert SECRET_NAME not in report["environ"]
    assert report["environ"] == SANDBOX_ENV
    assert report["rlimits"] == {"RLIMIT_AS": 1024 * 2**20, "RLIMIT_NPROC": 64, "RLIMIT_FSIZE": 8 * 2**20,
                                 "RLIMIT_CPU": 40, "RLIMIT_CORE": 0}


@pytest.mark.usefixtures("bwrap")
@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the sandbox under another uid")
def test_as_root_a_tree_the_sandbox_uid_cannot_read_is_refused(repo: Path) -> None:
    repo.chmod(0o700)
    with pytest.raises(PermissionError, match="chmod o\\+rx"):
        run_probe(repo, "echo")


@pytest.mark.usefixtures("bwrap")
@pytest.mark.skipif(os.geteuid() != 0, reason="only root stages the sandbox's sources")
def test_as_root_a_temp_dir_closed_to_the_sandbox_uid_is_refused(repo: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(closed))  # the standard library's own override
    with pytest.raises(PermissionError, match="TMPDIR"):
        run_probe(repo, "echo")
    assert list(closed.iterdir()) == []  # and nothing was left there


def test_an_interpreter_installed_under_tmp_stays_visible_over_the_scratch_tmpfs() -> None:
    """A checkout (and its venv) under /tmp must not be hidden by the sandbox's own /tmp."""
    from app.sandbox.bwrap import sandbox_argv
    from app.sandbox.view import Bind, View

    view = View(symlinks=(), dirs=("/tmp/ci",), binds=(Bind("/tmp/ci/.venv", "/tmp/ci/.venv"),))
    argv = sandbox_argv("bwrap", view, Limits(), info_fd=3, command=["python"])
    tmpfs = argv.index("/tmp", argv.index("--tmpfs"))
    bind = argv.index("/tmp/ci/.venv", argv.index("--ro-bind"))
    assert tmpfs < argv.index("--dir") < bind
