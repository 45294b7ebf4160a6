"""`prtriage serve`, `worker`, `db upgrade` and `replay` as real processes: start-up errors are clear (exit 2
or 3) and never show a secret; serve runs on embedded defaults, says where its dashboard is and whether it
is protected, and stops on SIGTERM after the job in hand, its check run completed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from twin.variants import ARGUMENTS

from app.demo.localgithub import FakeGitHub

from .conftest import BASE, INCIDENT, MILES, Service, wait_for
from .payloads import SECRET, delivery_headers, encode, fixture, pull_request_event

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def env(tmp_path: Path, fake_github: FakeGitHub, github_app_key: Any, prtriage_cache: Path) -> dict[str, str]:
    """A complete environment for the service, pointing at the fake GitHub, every default embedded."""
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_APP_ID": str(fake_github.app_id),
            "GITHUB_PRIVATE_KEY": github_app_key.private_pem, "GITHUB_WEBHOOK_SECRET": SECRET,
            "GITHUB_API_URL": fake_github.url, "PRTRIAGE_DATA_DIR": str(tmp_path / "data"),
            "PRTRIAGE_CACHE_DIR": str(prtriage_cache)}


def prtriage(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


class Served:
    """`prtriage serve` in a subprocess on a free port; its output collected when it ends."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(self.port),
                                         *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self.output = ""

    def healthy(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"serve exited: {self.process.communicate()[0]}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 120) -> int:
        self.process.send_signal(signum)
        self.output, _ = self.process.communicate(timeout=timeout)
        return self.process.returncode


@pytest.fixture
def serve(env: dict[str, str]) -> Iterator[type[Served]]:
    started: list[Served] = []

    class Tracked(Served):
        def __init__(self, environment: dict[str, str], *args: str) -> None:
            super().__init__(environment, *args)
            started.append(self)

    yield Tracked
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.communicate()


@pytest.mark.parametrize("missing", ["GITHUB_APP_ID", "GITHUB_WEBHOOK_SECRET", "GITHUB_PRIVATE_KEY"])
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_missing_setting_is_a_clear_start_up_error(env: dict[str, str], missing: str, command: str) -> None:
    del env[missing]
    done = prtriage(command, env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("prtriage: error: ")
    assert missing in done.stderr
    assert "Traceback" not in done.stderr
    assert SECRET not in done.stderr + done.stdout


def test_a_bad_key_or_value_is_named_never_shown(env: dict[str, str]) -> None:
    env["GITHUB_PRIVATE_KEY"] = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----"
    done = prtriage("serve", env=env)
    assert (done.returncode, done.stderr.strip()) == (
        2, "prtriage: error: GITHUB_PRIVATE_KEY: not an RSA private key in PEM form")
    env.pop("GITHUB_PRIVATE_KEY")
    env["PRTRIAGE_PORT"] = "not-a-port-s3cr3t"
    done = prtriage("serve", env=env)
    assert done.returncode == 2 and "PRTRIAGE_PORT" in done.stderr and "s3cr3t" not in done.stderr


def test_serve_starts_on_embedded_defaults_and_stops_cleanly_on_sigterm(env: dict[str, str],
                                                                       serve: type[Served]) -> None:
    served = serve(env)
    wait_for(served.healthy, timeout=60, what="serve to answer /healthz")
    assert httpx.get(f"{served.url}/metrics").text.count("prtriage_queue_depth 0") == 1
    assert served.stop() == 0
    assert f"prtriage: dashboard {served.url}/ (no DASHBOARD_TOKEN" in served.output
    assert (Path(env["PRTRIAGE_DATA_DIR"]) / "prtriage.db").is_file()  # migrated by serve itself
    assert (Path(env["PRTRIAGE_DATA_DIR"]) / "queue.db").is_file()
    protected = serve({**env, "DASHBOARD_TOKEN": "dashboard-token-value"})
    wait_for(protected.healthy, timeout=60, what="serve to answer /healthz")
    assert protected.stop(signal.SIGINT) == 0
    assert f"prtriage: dashboard {protected.url}/ (protected by DASHBOARD_TOKEN" in protected.output
    assert "dashboard-token-value" not in protected.output


def test_sigterm_lets_the_job_in_hand_finish_and_no_secret_reaches_the_log(
        env: dict[str, str], serve: type[Served], miles: FakeGitHub) -> None:
    fake = miles
    fake.add_pull(MILES, 21, head_sha=INCIDENT, base_sha=BASE, files=[ARGUMENTS])
    served = serve({**env, "PRTRIAGE_LOG_LEVEL": "DEBUG"})
    wait_for(served.healthy, timeout=60, what="serve to answer /healthz")
    body = encode(pull_request_event(fake, "opened", full_name=MILES, number=21, head_sha=INCIDENT,
                                     base_sha=BASE))
    answer = httpx.post(f"{served.url}/webhooks/github", content=body,
                        headers=delivery_headers("pull_request", body))
    assert answer.status_code == 202
    [check] = wait_for(lambda: fake.check_runs(MILES), what="the check run of the job in hand")
    assert served.stop() == 0  # SIGTERM while the job runs
    assert (check.status, check.conclusion) == ("completed", "failure"), served.output
    assert len(fake.comments_on(MILES, 21)) == 1
    secrets = [SECRET, env["GITHUB_PRIVATE_KEY"].splitlines()[1], *fake.tokens]
    assert fake.tokens, "the job used an installation token"
    leaked = [secret for secret in secrets if secret in served.output]
    assert leaked == []


def test_db_upgrade_migrates_a_server_database_which_serve_requires(
        env: dict[str, str], postgres: Any) -> None:
    url = postgres.create()
    env["DATABASE_URL"] = url
    refused = prtriage("serve", env=env)
    assert refused.returncode == 2
    assert "run `prtriage db upgrade`" in refused.stderr
    upgraded = prtriage("db", "upgrade", env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "is at revision" in upgraded.stdout
    env["DATABASE_URL"] = "postgresql://postgres:pw-s3cr3t@127.0.0.1:1/nowhere"
    unreachable = prtriage("db", "upgrade", env=env)
    assert unreachable.returncode == 3
    assert unreachable.stderr.startswith("prtriage: cannot start: database postgresql://postgres:***@")
    assert "pw-s3cr3t" not in unreachable.stderr


def saved_delivery(path: Path) -> Path:
    """The shared captured delivery (headers + body), as support would save one."""
    source = fixture("deliveries/issue_comment.created.on-pull-request")
    path.write_text(json.dumps(source))
    return path


def test_replay_feeds_a_saved_delivery_through_the_intake(env: dict[str, str], tmp_path: Path,
                                                         sqlite_service: Service) -> None:
    saved = saved_delivery(tmp_path / "delivery.json")
    done = prtriage("replay", str(saved), env=env)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["status"], answer["result"]) == (200, "ignored")  # issue_comment: no handler yet
    again = prtriage("replay", str(saved), env=env)
    assert json.loads(again.stdout)["result"] == "duplicate"
    fresh = prtriage("replay", str(saved), "--new-delivery-id", "--url",
                     f"{sqlite_service.live.url}/webhooks/github", env=env)
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout)["status"] == 200
    assert [d.event for d in sqlite_service.deliveries()] == ["issue_comment"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"body": {}}))
    assert prtriage("replay", str(broken), env=env).returncode == 2
    del env["GITHUB_WEBHOOK_SECRET"]
    assert prtriage("replay", str(saved), env=env).returncode == 2

