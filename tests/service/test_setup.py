"""Registering the App in one click (GitHub's manifest flow): `prtriage serve` with no App starts in setup
mode, `/setup` posts app.yml's manifest to the local GitHub, its redirect comes back with a code, the code is
exchanged, the App is stored in PRTRIAGE_DATA_DIR (owner-only files), and the same process then serves the
App for real: signed webhooks accepted, check runs made with the new key. A restart reads it again."""

from __future__ import annotations

import html
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import yaml
from dashboard.browser import browser  # noqa: F401 (fixture)
from dashboard.conftest import Client

from app.config import ConfigError, Settings
from app.demo.localgithub import FakeGitHub
from app.github.manifest import registration_url, web_url
from app.processes.registration import APP_FILE, KEY_FILE, MANIFEST, save, with_registration
from app.processes.setupmode import STATE_COOKIE, create_setup_app

from .conftest import wait_for
from .payloads import delivery_headers, encode, pull_request_event, sha
from .test_commands import Served

ROOT = Path(__file__).resolve().parents[2]
REPO = "octo/site"
MakeClient = Callable[..., tuple[Client, list[Settings]]]


@pytest.fixture
def setup_env(tmp_path: Path, fake_github: FakeGitHub, prtriage_cache: Path) -> dict[str, str]:
    """The service's environment with no App at all: only where GitHub is and where data lives."""
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_API_URL": fake_github.url,
            "PRTRIAGE_DATA_DIR": str(tmp_path / "data"), "PRTRIAGE_CACHE_DIR": str(prtriage_cache)}


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    """`prtriage serve` processes, killed at the end if still running."""
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


def setup_form(page: str) -> tuple[str, dict[str, Any]]:
    """The action and the manifest of the setup page's one form to GitHub."""
    action = html.unescape(re.search(r'<form class="setup" method="post" action="([^"]+)"', page)[1])  # type: ignore[index]
    manifest = html.unescape(re.search(r'name="manifest" value="([^"]*)"', page)[1])  # type: ignore[index]
    return action, json.loads(manifest)


def register(person: httpx.Client, base: str) -> httpx.Response:
    """What the person does: open /setup, press the button, GitHub creates the App and sends them back."""
    page = person.get(f"{base}/setup")
    assert page.status_code == 200, page.text
    action, manifest = setup_form(page.text)
    github = person.post(action, data={"manifest": json.dumps(manifest)}, follow_redirects=False)
    assert github.status_code == 302, github.text
    return person.get(github.headers["location"])


def test_serve_without_an_app_registers_one_and_serves_it_without_a_restart(
        setup_env: dict[str, str], fake_github: FakeGitHub, serve: type[Served]) -> None:
    data = Path(setup_env["PRTRIAGE_DATA_DIR"])
    served = serve(setup_env)
    wait_for(served.healthy, timeout=60, what="serve to answer /healthz")
    assert httpx.get(f"{served.url}/healthz").json()["status"] == "setup"
    assert httpx.get(f"{served.url}/").headers["location"] == "/setup"
    assert httpx.post(f"{served.url}/webhooks/github", content=b"{}").status_code == 503

    with httpx.Client() as person:
        page = person.get(f"{served.url}/setup")
        action, manifest = setup_form(page.text)
        assert action.startswith(f"{fake_github.url}/settings/apps/new?state=")
        assert f"form-action 'self' {fake_github.url}" in page.headers["content-security-policy"]
        assert manifest["hook_attributes"]["url"] == f"{served.url}/webhooks/github"
        assert manifest["redirect_url"] == f"{served.url}/setup/callback"
        app_yml = yaml.safe_load((ROOT / "app.yml").read_text())
        assert (manifest["default_permissions"], manifest["default_events"]) == (
            app_yml["default_permissions"], app_yml["default_events"])
        done = register(person, served.url)
    assert done.status_code == 200, done.text
    assert "The App is registered" in done.text
    assert f"apps/{fake_github.app_slug}/installations/new" in done.text
    assert fake_github.registered_manifests == [manifest]

    stored = json.loads((data / APP_FILE).read_text())
    assert stored["id"] == fake_github.app_id != 4242  # the new App, not the fake's first one
    assert (data / KEY_FILE).read_text() == fake_github.key.private_pem
    for name in (APP_FILE, KEY_FILE):
        assert stat.S_IMODE((data / name).stat().st_mode) == 0o600, name
    assert httpx.get(f"{served.url}/healthz").json()["status"] == "ok"
    assert httpx.get(f"{served.url}/setup").status_code == 404  # the flow is gone once the App exists

    secret = stored["webhook_secret"]
    fake_github.add_repo(REPO, installation_id=1)
    fake_github.add_pull(REPO, 3, head_sha=sha("head"), base_sha=sha("base"), files=["README.md"])
    body = encode(pull_request_event(fake_github, "opened", full_name=REPO, number=3, head_sha=sha("head"),
                                     base_sha=sha("base")))
    forged = httpx.post(f"{served.url}/webhooks/github", content=body,
                        headers=delivery_headers("pull_request", body))  # the tests' usual secret
    assert forged.status_code == 401
    answer = httpx.post(f"{served.url}/webhooks/github", content=body,
                        headers=delivery_headers("pull_request", body, secret=secret))
    assert answer.status_code == 202, answer.text
    [check] = wait_for(lambda: [run for run in fake_github.check_runs(REPO) if run.status == "completed"],
                       what="the check run, made with the registered App's key")
    assert check.conclusion == "success"
    assert served.stop() == 0
    assert "setup mode" in served.output and "the GitHub App is registered" in served.output
    assert secret not in served.output and "PRIVATE KEY" not in served.output

    again = serve(setup_env)  # the data directory alone configures it now
    wait_for(again.healthy, timeout=60, what="serve to answer /healthz")
    assert httpx.get(f"{again.url}/healthz").json()["status"] == "ok"
    assert again.stop() == 0
    assert "setup mode" not in again.output


def test_a_worker_without_an_app_says_how_to_get_one(setup_env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "app.cli", "worker"], cwd=ROOT, env=setup_env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "register one with `prtriage serve` (setup mode)" in done.stderr


# --- the flow's guards, in process ------------------------------------------------------------------------

@pytest.fixture
def setup_client() -> Iterator[MakeClient]:
    """`make(settings, client_host=...)`: an in-process client of the setup app, and the settings the
    service was started with (none until a registration went through)."""
    clients: list[Client] = []

    def make(settings: Settings, **options: Any) -> tuple[Client, list[Settings]]:
        started: list[Settings] = []

        async def on_registered(registered: Settings) -> None:
            started.append(registered)

        clients.append(Client(create_setup_app(settings, on_registered), base_url="http://127.0.0.1:8000",
                              **options))
        return clients[-1], started

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def setup_app(tmp_path: Path, fake_github: FakeGitHub,
              setup_client: MakeClient) -> tuple[Client, list[Settings]]:
    return setup_client(Settings(GITHUB_API_URL=fake_github.url, PRTRIAGE_DATA_DIR=tmp_path / "data"))


def github_redirect(client: Client) -> str:
    """The callback URL GitHub sends the browser back to, once it registered the App of /setup's form."""
    action, manifest = setup_form(client.get("/setup").text)
    answer = httpx.post(action, data={"manifest": json.dumps(manifest)})
    assert answer.status_code == 302
    return answer.headers["location"]


def test_a_callback_with_another_state_or_without_the_cookie_is_refused(
        setup_app: tuple[Client, list[Settings]], fake_github: FakeGitHub, tmp_path: Path) -> None:
    client, started = setup_app
    callback = github_redirect(client)
    query = parse_qs(urlsplit(callback).query)
    forged = f"/setup/callback?code={query['code'][0]}&state=someone-elses"
    assert client.get(forged).status_code == 403
    cookie = client.http.cookies.get(STATE_COOKIE)
    client.http.cookies.clear()
    assert client.get(callback).status_code == 403  # a state issued to another browser
    assert fake_github.calls("POST", r"/app-manifests/.*") == [] and started == []
    client.http.cookies.set(STATE_COOKIE, cookie or "", domain="127.0.0.1", path="/setup")
    done = client.get(callback)
    assert done.status_code == 200, done.text
    assert [s.github_app_id for s in started] == [fake_github.app_id]
    assert client.get(callback).status_code == 403  # a state is good once


def test_a_code_github_does_not_know_is_a_clear_error_and_stores_nothing(
        setup_app: tuple[Client, list[Settings]], tmp_path: Path) -> None:
    client, started = setup_app
    callback = github_redirect(client)
    code = parse_qs(urlsplit(callback).query)["code"][0]
    answer = client.get(callback.replace(code, "0" * len(code)))
    assert answer.status_code == 502
    assert "GitHub did not hand over the new App" in answer.text
    assert not (tmp_path / "data" / APP_FILE).exists() and started == []


def test_only_a_dashboard_viewer_may_register(fake_github: FakeGitHub, tmp_path: Path,
                                              setup_client: MakeClient) -> None:
    settings = Settings(GITHUB_API_URL=fake_github.url, PRTRIAGE_DATA_DIR=tmp_path)
    remote, _ = setup_client(settings, client_host="203.0.113.9")
    assert remote.get("/setup").status_code == 403
    assert remote.get("/setup/callback?code=x&state=y").status_code == 403
    gated = Settings(GITHUB_API_URL=fake_github.url, PRTRIAGE_DATA_DIR=tmp_path, DASHBOARD_TOKEN="t0ken")
    client, _ = setup_client(gated, client_host="203.0.113.9")
    assert client.get("/setup").headers["location"] == "/login?next=/setup"
    assert client.get("/setup", headers={"Authorization": "Bearer t0ken"}).status_code == 200


def test_the_organization_and_the_public_address_can_be_chosen(
        setup_app: tuple[Client, list[Settings]], fake_github: FakeGitHub) -> None:
    client, _ = setup_app
    page = client.get("/setup", params={"url": "https://triage.example.org/", "org": "octo-org"}).text
    action, manifest = setup_form(page)
    assert action.startswith(f"{fake_github.url}/organizations/octo-org/settings/apps/new?state=")
    assert manifest["hook_attributes"]["url"] == "https://triage.example.org/webhooks/github"
    bad = client.get("/setup", params={"url": "javascript:alert(1)", "org": "../x"}).text
    action, manifest = setup_form(bad)
    assert "not an organization name" in bad and "/organizations/" not in action
    assert manifest["hook_attributes"]["url"] == "http://127.0.0.1:8000/webhooks/github"


def test_github_enterprise_registers_on_its_own_host(
        fake_github_factory: Any, tmp_path: Path, setup_client: MakeClient) -> None:
    enterprise: FakeGitHub = fake_github_factory(prefix="/api/v3")
    host = enterprise.url.removesuffix("/api/v3")
    assert (web_url(enterprise.url), registration_url(enterprise.url)) == (host, f"{host}/settings/apps/new")
    assert web_url("https://api.github.com") == "https://github.com"
    assert registration_url("https://ghe.example/api/v3/", "acme") == \
        "https://ghe.example/organizations/acme/settings/apps/new"
    settings = Settings(GITHUB_API_URL=enterprise.url, PRTRIAGE_DATA_DIR=tmp_path / "data")
    client, started = setup_client(settings)
    assert client.get(github_redirect(client)).status_code == 200
    [conversion] = enterprise.calls("POST", r"/app-manifests/\w+/conversions")
    assert conversion.path.startswith("/api/v3/app-manifests/")
    assert started and started[0].private_key() == enterprise.key.private_pem


def test_the_environment_wins_over_the_stored_app_and_a_damaged_store_is_named(tmp_path: Path) -> None:
    (tmp_path / APP_FILE).write_text(json.dumps({"id": 7, "slug": "s", "name": "n", "html_url": "h",
                                                 "webhook_secret": "w"}))
    (tmp_path / KEY_FILE).write_text("pem")
    stored = with_registration(Settings(PRTRIAGE_DATA_DIR=tmp_path))
    assert (stored.github_app_id, stored.github_private_key_path) == (7, tmp_path / KEY_FILE)
    assert stored.github_webhook_secret is not None and stored.github_webhook_secret.get_secret_value() == "w"
    from_env = Settings(PRTRIAGE_DATA_DIR=tmp_path, GITHUB_APP_ID=9)
    assert with_registration(from_env) is from_env
    (tmp_path / APP_FILE).write_text("{")
    with pytest.raises(ConfigError, match=APP_FILE):
        with_registration(Settings(PRTRIAGE_DATA_DIR=tmp_path))


def test_a_conversion_without_slug_or_webhook_secret_is_stored_and_the_secret_taken_from_the_environment(
        tmp_path: Path) -> None:
    # GitHub's description: `slug` optional, `webhook_secret` nullable in the manifest conversion's answer
    save(tmp_path, {"id": 7, "name": "n", "html_url": "https://github.com/apps/n", "pem": "pem",
                    "webhook_secret": None})
    assert json.loads((tmp_path / APP_FILE).read_text())["webhook_secret"] is None
    without = with_registration(Settings(PRTRIAGE_DATA_DIR=tmp_path))
    assert (without.github_app_id, without.github_webhook_secret) == (7, None)
    with pytest.raises(ConfigError, match="GITHUB_WEBHOOK_SECRET"):
        without.require_app()
    given = with_registration(Settings(PRTRIAGE_DATA_DIR=tmp_path, GITHUB_WEBHOOK_SECRET="set on its page"))
    assert given.github_app_id == 7 and given.github_webhook_secret is not None
    assert given.github_webhook_secret.get_secret_value() == "set on its page"


def test_the_packaged_manifest_is_app_yml() -> None:
    assert MANIFEST.read_bytes() == (ROOT / "app.yml").read_bytes()


def test_one_click_in_a_real_browser_then_the_dashboard(
        setup_env: dict[str, str], fake_github: FakeGitHub, serve: type[Served],
        browser: Any) -> None:  # noqa: F811
    served = serve(setup_env)
    wait_for(served.healthy, timeout=60, what="serve to answer /healthz")
    for width in (390, 1360):
        context = browser.new_context(viewport={"width": width, "height": 844})
        page = context.new_page()
        page.goto(served.url + "/")  # sent to /setup
        assert page.url == served.url + "/setup"
        assert page.evaluate("document.scrollingElement.scrollWidth") <= width
        context.close()
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(served.url + "/setup")
    page.click("#register")  # the one click: GitHub registers the App and sends the browser back
    page.wait_for_url(f"{served.url}/setup/callback?**")
    assert "The App is registered" in page.inner_text("h1")
    assert page.get_attribute("#install", "href") == \
        f"https://github.com/apps/{fake_github.app_slug}/installations/new"
    page.goto(served.url + "/")
    assert page.inner_text("h1") == "Risk windows"
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    context.close()
    assert served.stop() == 0
