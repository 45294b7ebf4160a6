"""`prtriage demo`, as a newcomer runs it: a real process, the local GitHub and `serve` inside it, the
bundled example triaged in the real sandbox."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PRTRIAGE = [sys.executable, "-m", "app.cli"]


def environment(tmp_path: Path) -> dict[str, str]:
    """A user's environment that points elsewhere: the demo must use none of it."""
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"),
            "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "QUEUE_URL": "redis://127.0.0.1:1/0",
            "DASHBOARD_TOKEN": "not-for-the-demo", "GITHUB_API_URL": "http://127.0.0.1:1"}


def test_the_demo_triages_the_example_pull_request_and_reports_it(tmp_path: Path) -> None:
    done = subprocess.run([*PRTRIAGE, "demo", "--once", "--port", "0"], cwd=tmp_path,
                          env=environment(tmp_path), capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "HTTP 202" in output
    assert re.search(r"check run `PR risk triage` on [0-9a-f]{12}: failure: Breaks 1 existing CI suite "
                     r"\(.* 1 annotation", output), output
    assert "**❌ This pull request breaks 1 existing CI suite.**" in output
    assert "`arguments.py:21` (in this diff)" in output
    assert "- `ci/test_e2e.py#2`" in output
    assert "- `ci/test_e2e.py#1`" not in output  # full fine-tuning still passes
    assert "the dashboard: http" not in output  # --once: the service has stopped, no address to visit
    assert re.search(r"main of example/incident at [0-9a-f]{12}: accepts 2 of 2 CI suites", output), output
    # everything it made lived in a temporary directory, gone when it stopped
    data = re.search(r"the App's data lives in (\S+) until", output)
    assert data is not None and not Path(data[1]).exists()


def test_the_demo_keeps_the_dashboard_up_until_interrupted(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    with log.open("w") as sink:
        demo = subprocess.Popen([*PRTRIAGE, "demo", "--port", "0"], cwd=tmp_path,
                                env=environment(tmp_path), stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while "keeps running" not in log.read_text():
            assert demo.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert "the dashboard: http://127.0.0.1:" in log.read_text()
        listening = re.search(r"webhooks http://127\.0\.0\.1:(\d+)/", log.read_text())
        assert listening is not None, log.read_text()
        page = httpx.get(f"http://127.0.0.1:{listening[1]}/runs", timeout=10)
        assert page.status_code == 200
        assert "example/incident" in page.text and "failure" in page.text
        home = httpx.get(f"http://127.0.0.1:{listening[1]}/", timeout=10).text
        assert re.search(r'<a href="/runs/\d+">run #\d+</a>', home), home  # the demo's run, from home
        repository = httpx.get(f"http://127.0.0.1:{listening[1]}/repositories/example/incident", timeout=10)
        shown = repository.text.replace("<wbr>", "")  # paths may break after their separators
        assert "accepts 2 of 2 CI suites" in shown and "ci/test_e2e.py" in shown
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) == 0, log.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()


def test_without_a_sandbox_the_demo_says_why_and_fails(tmp_path: Path) -> None:
    missing = tmp_path / "no-bwrap-here"
    done = subprocess.run([*PRTRIAGE, "demo", "--once", "--port", "0"], cwd=tmp_path,
                          env={**environment(tmp_path), "PRTRIAGE_BWRAP": str(missing)}, capture_output=True,
                          text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "action_required: Triage could not run" in output
    assert "**The triage could not run:** no sandbox" in output


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*PRTRIAGE, "demo", "--once", "--port", str(port)], cwd=tmp_path,
                              env=environment(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    assert f"port {port} on 127.0.0.1" in done.stderr and "--port" in done.stderr
