"""What operators rely on: /healthz, /metrics in the Prometheus text format, every setting documented, the
App manifest's least permissions and its events matching the handlers, and secrets kept out of reprs."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import yaml

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.processes.webapp import create_app
from app.service.services import Services
from app.webhooks import ROUTER

from .conftest import BASE, MILES, Service
from .payloads import SECRET, pull_request_event, sha

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def samples(text: str) -> dict[tuple[str, str], float]:
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        match = SAMPLE.match(line)
        assert match, f"not an exposition line: {line!r}"
        found[(match["name"], match["labels"] or "")] = float(match["value"])
    return found


def test_healthz_answers_when_the_database_and_the_queue_do(sqlite_service: Service) -> None:
    answer = sqlite_service.http.get("/healthz")
    assert (answer.status_code, answer.json()) == (200, {"status": "ok", "database": "ok", "queue": "ok"})


def test_metrics_count_deliveries_queue_depth_triage_time_and_github_calls(
        sqlite_service: Service, miles: FakeGitHub) -> None:
    service, fake = sqlite_service, miles
    fake.add_pull(MILES, 31, head_sha=sha("docs for metrics"), base_sha=BASE, files=["README.md"])
    payload = pull_request_event(fake, "opened", full_name=MILES, number=31, head_sha=sha("docs for metrics"),
                                 base_sha=BASE)
    assert service.post("pull_request", payload).status_code == 202
    assert service.post("pull_request", body=b"{}", headers={"X-GitHub-Event": "ping"}).status_code == 401
    before = samples(service.http.get("/metrics").text)
    assert before[("prtriage_queue_depth", "")] == 1
    fake.rate_limit_next("secondary", retry_after="0", path=r"/pulls/31$")  # one wait, then it answers
    service.drain()
    answer = service.http.get("/metrics")
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    after = samples(answer.text)
    assert after[("prtriage_deliveries_total", 'event="pull_request",result="queued"')] == 1
    assert after[("prtriage_deliveries_total", 'event="unverified",result="unauthorized"')] == 1
    assert after[("prtriage_queue_depth", "")] == 0
    assert after[("prtriage_triage_duration_seconds_count", 'conclusion="success"')] == 1
    assert after[("prtriage_jobs_total", 'outcome="done",task="triage"')] == 1
    assert after[("prtriage_github_api_calls_total", 'operation="checks/create"')] >= 1
    assert after[("prtriage_github_rate_limit_waits_total", 'kind="secondary"')] >= 1


def test_every_setting_is_documented() -> None:
    documented = (ROOT / "docs" / "service.md").read_text() + (ROOT / "README.md").read_text()
    names = [field.alias or name for name, field in Settings.model_fields.items()]
    missing = [name for name in names if f"`{name}`" not in documented]
    assert missing == [], f"document these settings in docs/service.md: {missing}"
    interfaces = ["GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "GITHUB_PRIVATE_KEY_PATH", "GITHUB_WEBHOOK_SECRET",
                  "GITHUB_API_URL", "DATABASE_URL", "QUEUE_URL", "PRTRIAGE_CHECK_NAME", "DASHBOARD_TOKEN",
                  "PRTRIAGE_RESYNC_SECONDS", "PRTRIAGE_DATA_DIR", "PRTRIAGE_CACHE_DIR", "PRTRIAGE_LOG_LEVEL"]
    assert set(interfaces) <= set(names)


def test_the_manifest_asks_for_least_permissions_and_the_events_we_handle() -> None:
    manifest = yaml.safe_load((ROOT / "app.yml").read_text())
    assert manifest["default_permissions"] == {"checks": "write", "pull_requests": "write", "issues": "write",
                                               "contents": "read", "metadata": "read"}
    delivered_anyway = {"ping", "installation", "installation_repositories"}
    assert set(manifest["default_events"]) == ROUTER.events - delivered_anyway
    assert manifest["hook_attributes"]["url"].endswith("/webhooks/github")


def test_secrets_stay_out_of_reprs_and_errors(make_settings: Callable[..., Settings],
                                              sqlite_url: str) -> None:
    settings = make_settings(database_url=sqlite_url)
    key = settings.private_key()
    for shown in (repr(settings), str(settings)):
        assert SECRET not in shown and key.splitlines()[1] not in shown
    services = Services.from_settings(settings)
    try:
        app = create_app(settings, services=services)
        for shown in (repr(app.state.intake), repr(services), repr(services.github)):
            assert SECRET not in shown and key.splitlines()[1] not in shown
    finally:
        services.close()


def test_the_docs_name_the_commands_and_the_benchmark() -> None:
    docs = (ROOT / "docs" / "service.md").read_text()
    for command in ("prtriage serve", "prtriage worker", "prtriage db upgrade", "prtriage replay",
                    "benchmarks.bench_intake", "docker compose up"):
        assert command in docs


def test_the_image_runs_as_a_user_with_bubblewrap_and_a_health_check() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim$", dockerfile, re.MULTILINE)
    assert re.search(r"apt-get install .*\bbubblewrap\b.*\bgit\b", dockerfile)
    assert re.search(r"^USER prtriage$", dockerfile, re.MULTILINE)
    assert re.search(r"^HEALTHCHECK .*\n?.*/healthz", dockerfile, re.MULTILINE)
    # the demo runs inside the image: the way to see that its sandbox works there
    assert re.search(r"^COPY examples ", dockerfile, re.MULTILINE)
    assert "systempaths=unconfined" in dockerfile
    # what the image copies is in the build context: none of it left out by .dockerignore
    ignored = set((ROOT / ".dockerignore").read_text().split())
    for sources in re.findall(r"^COPY (.+) \S+$", dockerfile, re.MULTILINE):
        for source in sources.split():
            assert (ROOT / source).exists() and source.split("/")[0] not in ignored, source


def test_compose_runs_postgresql_redis_the_app_and_workers() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "app", "worker"} <= set(services)
    assert services["app"]["command"] == ["prtriage", "serve"]
    assert services["worker"]["command"] == ["prtriage", "worker"]
    assert services["migrate"]["command"] == ["prtriage", "db", "upgrade"]
    for name in ("app", "worker", "migrate"):
        environment = services[name]["environment"]
        assert environment["DATABASE_URL"].startswith("postgresql://")
        assert environment["QUEUE_URL"].startswith("redis://")
        assert "GITHUB_WEBHOOK_SECRET" in environment and "GITHUB_PRIVATE_KEY_PATH" in environment
    assert services["app"]["environment"]["PRTRIAGE_WORKERS"] == "0"
    for name in ("app", "worker"):  # bubblewrap's namespaces and its own /proc, under Docker's profile plus
        assert {"seccomp=./deploy/seccomp.json", "apparmor=unconfined", "systempaths=unconfined",
                "no-new-privileges:true"} == set(services[name]["security_opt"])
        assert (ROOT / "deploy" / "seccomp.json").is_file()
    for name in ("app", "worker", "migrate"):  # uid 10001, no capability needed
        assert services[name]["cap_drop"] == ["ALL"] and "cap_add" not in services[name]
    assert services["migrate"]["security_opt"] == ["no-new-privileges:true"]  # runs no sandbox: no relaxation
    for name in ("postgres", "redis", "caddy"):
        assert services[name]["security_opt"] == ["no-new-privileges:true"]
    assert not any("unconfined" in option and "seccomp" in option
                   for service in services.values() for option in service.get("security_opt", []))
