"""A worker killed mid-job: a real `prtriage worker` process on a Redis queue, `kill -9` while its triage
runs. Redis forgets a job once a worker took it; the run row in the database still says `running`, and no live
worker holds its pull request's lock, so the next worker's sweep queues it again. The result is posted once:
one check run (the dead worker's, completed by the next), one comment."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from twin.variants import ARGUMENTS

from app.config import Settings
from app.demo.localgithub import FakeGitHub

from .conftest import BASE, INCIDENT, MILES, Service, make_service, wait_for
from .payloads import pull_request_event
from .processes import Processes

WORKER = [sys.executable, "-m", "app.cli", "worker"]


def environment(settings: Settings, key: str) -> dict[str, str]:
    assert settings.github_webhook_secret is not None
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
            "GITHUB_APP_ID": str(settings.github_app_id), "GITHUB_PRIVATE_KEY": key,
            "GITHUB_WEBHOOK_SECRET": settings.github_webhook_secret.get_secret_value(),
            "GITHUB_API_URL": settings.github_api_url, "DATABASE_URL": settings.effective_database_url,
            "QUEUE_URL": settings.effective_queue_url, "PRTRIAGE_DATA_DIR": str(settings.data_dir),
            "PRTRIAGE_CACHE_DIR": str(settings.cache_dir), "PRTRIAGE_WORKERS": "1",
            "PRTRIAGE_LOG_LEVEL": "INFO"}


def _parent(pid: int) -> int | None:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state, past the command name


def sandboxes_of(pid: int) -> dict[int, bytes]:
    """Descendants of PID that are bubblewrap sandboxes: {pid: command line}."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ancestor: int | None = int(entry.name)
        while ancestor is not None and ancestor not in (0, 1, pid):
            ancestor = _parent(ancestor)
        if ancestor == pid and b"bwrap" in command.split(b"\0")[0]:
            found[int(entry.name)] = command
    return found


def alive(pids: dict[int, bytes]) -> list[int]:
    """Those of PIDS still running the same command (a pid may have been reused)."""
    running = []
    for pid, command in pids.items():
        try:
            if (Path("/proc") / str(pid) / "cmdline").read_bytes() == command:
                running.append(pid)
        except OSError:
            continue
    return running


@pytest.fixture
def queued_on_redis(make_settings: Callable[..., Settings], database_url: str, redis_queue_url: str,
                    tmp_path: Path) -> Iterator[Service]:
    # a cache of its own: the killed job must still be analysing (cold capture) when it dies
    settings = make_settings(database_url=database_url, queue_url=redis_queue_url,
                             PRTRIAGE_CACHE_DIR=str(tmp_path / "cache"))
    built = make_service(settings)  # the intake alone: the jobs go to the worker processes
    yield built
    built.close()


def test_a_worker_killed_mid_job_leaves_it_to_the_next_and_the_result_is_posted_once(
        queued_on_redis: Service, miles: FakeGitHub, github_app_key: object, tmp_path: Path) -> None:
    service, fake = queued_on_redis, miles
    fake.add_pull(MILES, 3, head_sha=INCIDENT, base_sha=BASE, files=[ARGUMENTS])
    opened = pull_request_event(fake, "opened", full_name=MILES, number=3, head_sha=INCIDENT, base_sha=BASE)
    env = environment(service.settings, github_app_key.private_pem)  # type: ignore[attr-defined]
    workers = Processes(tmp_path)
    try:
        assert service.post("pull_request", opened, guid=str(uuid.uuid4())).status_code == 202
        first = workers.start("worker-0", WORKER, env)
        [check] = wait_for(lambda: fake.check_runs(MILES), timeout=60, what="the first worker's check run")
        sandboxes = wait_for(lambda: sandboxes_of(first.pid), timeout=60, what="the sandboxed analysis")
        first.send_signal(signal.SIGKILL)  # kill -9, while the sandboxed analysis runs
        assert first.wait(10) == -signal.SIGKILL
        assert (check.status, fake.comments_on(MILES, 3)) == ("in_progress", [])
        [run] = service.runs()
        assert run.status == "running"
        wait_for(lambda: not alive(sandboxes), timeout=10, what="the dead worker's sandboxes to go")

        workers.start("worker-1", WORKER, env)
        wait_for(lambda: service.runs()[0].status == "completed", timeout=180,
                 what="the next worker to take the run over")
        [run] = service.runs()
        assert (run.conclusion, run.check_run_id) == ("failure", check.id)
        assert [c.id for c in fake.check_runs(MILES)] == [check.id]  # no second check run
        assert (check.status, check.conclusion) == ("completed", "failure")
        completions = [r for r in fake.calls("PATCH", rf"/repos/{MILES}/check-runs/{check.id}")
                       if r.body.get("status") == "completed"]
        assert len(completions) == 1
        assert len(fake.calls("POST", rf"/repos/{MILES}/issues/3/comments")) == 1
        assert len(fake.comments_on(MILES, 3)) == 1
        assert "sweep: queueing again 1 lost triage run(s)" in workers.output("worker-1")

        assert workers.stop("worker-1", timeout=60) == {"worker-1": 0}, workers.report()  # a clean stop
    finally:
        workers.kill_all()
