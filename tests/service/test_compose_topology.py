"""compose.yaml run natively, as real processes: the `migrate`, `app` and `worker` services' commands with the
environment compose and the image give them (this machine's PostgreSQL and Redis in place of the `postgres`
and `redis` services, the test's directories in place of the volumes and the secret), the image's HEALTHCHECK
run as Docker runs it, and a signed delivery for the miles twin's incident PR, triaged by the workers."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from secrets import token_hex
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import yaml
from store.databases import PostgresDatabases
from twin.variants import ARGUMENTS

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.demo.localgithub.keys import AppKey

from .conftest import BASE, INCIDENT, MILES, wait_for
from .payloads import SECRET, delivery_headers, encode, pull_request_event
from .processes import ROOT, Processes
from .test_operations import samples

PRTRIAGE_SERVICES = ("migrate", "app", "worker")
SECRETS = PurePosixPath("/run/secrets")  # where compose mounts a service's secrets
VARIABLE = re.compile(r"\$(?:\$|\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|(?P<bare>\w+))")
STOP_SECONDS = 30  # idle, serve and the workers stop in a second or two


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """TEXT with compose's substitution of VARIABLES (the operator's shell): $$, $VAR, ${VAR}, ${VAR-default},
    ${VAR:-default}, ${VAR?error}, ${VAR:?error}; an error fails the test, as it makes `up` refuse."""
    def substitute(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        name, op, arg = match["name"] or match["bare"], match["op"] or "", match["arg"] or ""
        value = variables.get(name)
        if value is not None and not (op.startswith(":") and value == ""):
            return value
        if op.endswith("?"):
            raise AssertionError(f"compose.yaml refuses to start: {name}: {arg}")
        return arg
    return VARIABLE.sub(substitute, text)


def rehost(url: str, target: str) -> str:
    """URL, which names a compose service's host, pointed at TARGET's server, credentials, database and
    options instead; the scheme stays compose's, so the app must accept it."""
    local = urlsplit(target)
    return urlunsplit(urlsplit(url)._replace(netloc=local.netloc, path=local.path, query=local.query))


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """The Dockerfile's (INSTRUCTION, arguments), comment lines dropped and continued lines joined."""
    lines = [line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")]
    logical = re.sub(r"\\[ \t]*\n", " ", "\n".join(lines)).splitlines()
    split = (line.strip().partition(" ") for line in logical)
    return [(keyword.upper(), rest.strip()) for keyword, _, rest in split if keyword]


def image_environment(dockerfile: list[tuple[str, str]]) -> dict[str, str]:
    """The variables the image's ENV instructions set."""
    words = [word for keyword, rest in dockerfile if keyword == "ENV" for word in shlex.split(rest)]
    pairs = [word.partition("=") for word in words]
    assert all(equals for _, equals, _ in pairs), "an ENV in the legacy `ENV NAME VALUE` form"
    return {name: value for name, _, value in pairs}


def healthcheck(dockerfile: list[tuple[str, str]]) -> tuple[list[str], float]:
    """The HEALTHCHECK's exec-form command, and its --timeout in seconds (Docker's default: 30)."""
    [arguments] = [rest for keyword, rest in dockerfile if keyword == "HEALTHCHECK"]
    options, found, command = arguments.partition("CMD ")
    assert found and command.lstrip().startswith("["), f"HEALTHCHECK not in the exec form: {arguments}"
    timeout = re.search(r"--timeout=(\d+)s\b", options)
    return json.loads(command), float(timeout[1]) if timeout else 30.0


def read_compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())  # `<<` merges resolved
    return compose


def read_dockerfile() -> list[tuple[str, str]]:
    return instructions((ROOT / "Dockerfile").read_text())


@dataclass
class Deployment:
    """compose.yaml's prtriage services on this machine: the environment and the command of each."""

    compose: dict[str, Any] = field(repr=False)
    image: dict[str, str] = field(repr=False)  # the Dockerfile's ENV, which compose's environment completes
    variables: dict[str, str] = field(repr=False)  # what compose interpolates: the operator's shell, secrets
    servers: dict[str, str]  # a compose service's host name: the URL of this machine's server instead
    mounts: dict[PurePosixPath, Path]  # a directory inside the container: the test's directory instead
    processes: Processes

    def command(self, service: str) -> list[str]:
        command: list[str] = self.compose["services"][service]["command"]
        return command

    def environment(self, service: str, **overrides: str) -> dict[str, str]:
        declared = self.compose["services"][service]["environment"]
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # prtriage, python
               "HOME": os.environ.get("HOME", "/tmp")}
        for name, value in {**self.image, **declared}.items():
            env[name] = self.localize(interpolate(str(value), self.variables))
        return {**env, **overrides}

    def localize(self, value: str) -> str:
        """VALUE with a compose service's host name, or a path inside the container, made this machine's."""
        host = urlsplit(value).hostname if "://" in value else None
        if host is not None and host in self.servers:
            return rehost(value, self.servers[host])
        for inside, outside in self.mounts.items():
            if PurePosixPath(value).is_relative_to(inside):
                return str(outside / PurePosixPath(value).relative_to(inside))
        return value


def key_secret(compose: dict[str, Any]) -> str:
    """The secret every prtriage service reads the App's key from, checked to be declared and mounted."""
    services = compose["services"]
    [path] = {services[name]["environment"]["GITHUB_PRIVATE_KEY_PATH"] for name in PRTRIAGE_SERVICES}
    secret = str(PurePosixPath(path).relative_to(SECRETS))
    assert secret in compose["secrets"], f"{path}: no secret {secret!r} in compose.yaml"
    for name in PRTRIAGE_SERVICES:
        assert secret in services[name]["secrets"], f"{name} does not mount the secret {secret}"
    return secret


@pytest.fixture
def deployment(miles: FakeGitHub, github_app_key: AppKey, postgres: PostgresDatabases, redis_queue_url: str,
               prtriage_cache: Path, tmp_path: Path) -> Iterator[Deployment]:
    """compose.yaml for the test: a fresh PostgreSQL database (not migrated), a Redis queue of its own, the
    fake GitHub's App; every process it starts is killed at the end."""
    compose = read_compose()
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    key = secrets / key_secret(compose)
    key.write_text(github_app_key.private_pem)
    key.chmod(0o600)
    variables = {"GITHUB_APP_ID": str(miles.app_id), "GITHUB_WEBHOOK_SECRET": SECRET,
                 "GITHUB_API_URL": miles.url, "DASHBOARD_TOKEN": token_hex(16),
                 "PRTRIAGE_DOMAIN": "triage.example.com"}
    mounts = {PurePosixPath("/data"): tmp_path / "data", PurePosixPath("/cache"): prtriage_cache,
              SECRETS: secrets}
    processes = Processes(tmp_path)
    yield Deployment(compose, image_environment(read_dockerfile()), variables,
                     {"postgres": postgres.create(), "redis": redis_queue_url}, mounts, processes)
    processes.kill_all()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_every_variable_compose_and_the_image_set_is_read_by_the_service() -> None:
    read = {setting.alias for setting in Settings.model_fields.values()}
    compose = read_compose()
    for name in PRTRIAGE_SERVICES:
        assert set(compose["services"][name]["environment"]) <= read, name
    image = image_environment(read_dockerfile())
    assert {name for name in image if not name.startswith(("PYTHON", "PIP_"))} <= read
    # the port compose publishes is the one the image's serve listens on (and its health check asks)
    [published] = compose["services"]["app"]["ports"]
    assert interpolate(published, {}).rsplit(":", 1)[1] == image["PRTRIAGE_PORT"]


def serve(deployment: Deployment, http: httpx.Client, port: int) -> dict[str, str]:
    """The app service listening on loopback PORT, once it answers /healthz; its environment."""
    env = deployment.environment("app", PRTRIAGE_HOST="127.0.0.1", PRTRIAGE_PORT=str(port))
    app = deployment.processes.start("app", deployment.command("app"), env)
    report = deployment.processes.report

    def healthy() -> bool:
        assert app.poll() is None, f"serve exited{report()}"
        try:
            return http.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    wait_for(healthy, timeout=60, what="serve to answer /healthz", explain=report)
    assert "0 worker thread(s)" in deployment.processes.output("app"), report()
    return env


def check_health(processes: Processes, app_env: dict[str, str]) -> None:
    """The image's health check as Docker runs it in the app's container: it passes, and it fails when
    nothing listens on PRTRIAGE_PORT."""
    command, seconds = healthcheck(read_dockerfile())
    assert processes.run("healthcheck", command, app_env, timeout=seconds) == 0, processes.report()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        down = {**app_env, "PRTRIAGE_PORT": str(closed.getsockname()[1])}
        status = processes.run("healthcheck-closed", command, down, timeout=seconds)
    assert status not in (0, None), processes.report()
    assert "Connection refused" in processes.output("healthcheck-closed"), processes.report()


def start_workers(deployment: Deployment, count: int) -> list[str]:
    """COUNT worker services (`--scale worker=COUNT`), once each is taking jobs; their names."""
    names = [f"worker-{n}" for n in range(count)]
    for name in names:
        deployment.processes.start(name, deployment.command("worker"), deployment.environment("worker"))
    output = deployment.processes.output
    wait_for(lambda: all("prtriage: worker on queue" in output(name) for name in names), timeout=60,
             what="the workers to start", explain=deployment.processes.report)
    return names


def test_the_compose_services_run_natively_and_the_workers_triage_a_pull_request(
        deployment: Deployment, miles: FakeGitHub) -> None:
    fake, processes, report = miles, deployment.processes, deployment.processes.report
    migrate = processes.run("migrate", deployment.command("migrate"), deployment.environment("migrate"),
                            timeout=120)
    assert migrate == 0, report()
    port = free_port()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        check_health(processes, serve(deployment, http, port))
        workers = start_workers(deployment, 2)

        fake.add_pull(MILES, 1, head_sha=INCIDENT, base_sha=BASE, files=[ARGUMENTS])
        body = encode(pull_request_event(fake, "opened", full_name=MILES, number=1, head_sha=INCIDENT,
                                         base_sha=BASE))
        answer = http.post("/webhooks/github", content=body, headers=delivery_headers("pull_request", body))
        assert answer.status_code == 202, answer.text
        # compose's DASHBOARD_TOKEN is read: from loopback too, the dashboard wants it
        assert http.get("/api/runs").status_code == 401
        bearer = {"Authorization": f"Bearer {deployment.variables['DASHBOARD_TOKEN']}"}

        def triaged() -> list[dict[str, Any]] | None:
            runs: list[dict[str, Any]] = http.get("/api/runs", headers=bearer).json()["items"]
            return runs if runs and all(run["status"] == "completed" for run in runs) else None

        wait_for(lambda: any(c.status == "completed" for c in fake.check_runs(MILES)), timeout=240,
                 what="a worker to complete the check run", explain=report)
        [run] = wait_for(triaged, timeout=30, what="the run stored, as serve's dashboard shows it",
                         explain=report)
        counted = samples(http.get("/metrics", headers=bearer).text)

    [check] = fake.check_runs(MILES)
    assert (run["conclusion"], run["head_sha"], run["check_run_id"]) == ("failure", INCIDENT, check.id)
    assert (check.name, check.status, check.conclusion) == ("PR risk triage", "completed", "failure")
    [comment] = fake.comments_on(MILES, 1)
    assert len(fake.calls("POST", rf"/repos/{MILES}/issues/1/comments")) == 1
    assert comment.body.splitlines()[0] == "**❌ This pull request breaks 5 existing CI suites.**"
    # serve took the delivery and ran no job: the workers did, and called GitHub
    assert counted[("prtriage_deliveries_total", 'event="pull_request",result="queued"')] == 1
    assert not {name for name, _ in counted} & {"prtriage_jobs_total", "prtriage_github_api_calls_total"}

    stopped = processes.stop("app", *workers, timeout=STOP_SECONDS)
    assert stopped == dict.fromkeys(["app", *workers], 0), report()
