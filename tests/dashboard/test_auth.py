"""Who gets in: the auth matrix of pages and API, the login form and its cookie, loopback-only mode."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from urllib.parse import parse_qs, urlparse

import pytest
from fastapi.routing import APIRoute
from sqlalchemy import text

from app import dashboard
from app.config import Settings
from app.dashboard import api, login, routes
from app.dashboard.auth import SESSION_SECONDS, Gate, safe_next
from app.store.session import make_engine

from .conftest import ELSEWHERE, TOKEN, Client
from .seed import PRIVATE_TITLE, Seed

MakeClient = Callable[..., Client]


def data_routes(seeded: Seed) -> list[tuple[str, str]]:
    """(method, path) of every dashboard route that shows or changes data, with real ids filled in."""
    ids = {"{window_id}": str(seeded.windows["private"]), "{run_id}": str(seeded.runs["clean"]),
           "{owner}": "acme", "{name}": "vault", "{suite:path}": "lora-e2e"}
    found = []
    for route in [*routes.router.routes, *api.router.routes]:
        assert isinstance(route, APIRoute)
        path = route.path
        for placeholder, value in ids.items():
            path = path.replace(placeholder, value)
        found += [(method, path) for method in sorted(route.methods or ())]
    return found


def test_the_matrix_covers_every_page_and_api_route(seeded: Seed) -> None:
    # The dashboard is these three routers; only the login router's paths answer without credentials.
    assert [r.path for r in login.router.routes if isinstance(r, APIRoute)] == \
        ["/login", "/login", "/logout", "/static/{name}"]
    paths = {path for _, path in data_routes(seeded)}
    assert {"/", "/runs", "/repositories", "/api/risk-windows", "/api/runs", "/api/repositories"} <= paths
    assert len(paths) == 16  # eight pages (one a POST) and eight API paths (one a POST)


@pytest.fixture
def protected(seeded_sqlite: tuple[str, Seed], make_client: MakeClient) -> Callable[..., Client]:
    """A client of a dashboard with DASHBOARD_TOKEN set, at any claimed address."""
    def make(**options: object) -> Client:
        return make_client(seeded_sqlite[0], token=TOKEN, **options)
    return make


def test_without_token_configured_other_clients_get_403(seeded_sqlite: tuple[str, Seed],
                                                       make_client: MakeClient) -> None:
    url, seeded = seeded_sqlite
    outsider = make_client(url, client_host=ELSEWHERE)
    for method, path in data_routes(seeded):
        response = outsider.request(method, path)
        assert response.status_code == 403, (method, path)
        assert PRIVATE_TITLE not in response.text
        assert "only on loopback" in response.json()["detail"]


@pytest.mark.parametrize("client_host", ["127.0.0.1", "127.8.9.10", "::1"])
def test_without_token_configured_loopback_clients_read(seeded_sqlite: tuple[str, Seed],
                                                        make_client: MakeClient, client_host: str) -> None:
    client = make_client(seeded_sqlite[0], client_host=client_host, base_url="http://localhost:8000")
    assert client.get("/").status_code == 200
    assert client.get("/api/risk-windows").status_code == 200


def test_a_rebound_host_name_is_refused_even_from_loopback(seeded_sqlite: tuple[str, Seed],
                                                           make_client: MakeClient) -> None:
    # DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1 reads with Host: evil.example
    client = make_client(seeded_sqlite[0], base_url="http://evil.example:8000")
    assert client.get("/api/risk-windows").status_code == 403
    assert client.get("/").status_code == 403


def test_with_token_no_credentials_means_login_or_401_and_never_data(
        seeded: Seed, protected: Callable[..., Client]) -> None:
    client = protected()
    for method, path in data_routes(seeded):
        response = client.request(method, path)
        assert PRIVATE_TITLE not in response.text, (method, path)
        if path.startswith("/api/"):
            assert response.status_code == 401, (method, path)
            assert response.headers["content-type"] == "application/json"
            assert "authentication required" in response.json()["detail"]
            assert response.headers["www-authenticate"] == "Bearer"
        else:
            assert response.status_code == 303, (method, path)
            location = urlparse(response.headers["location"])
            assert location.path == "/login" and parse_qs(location.query)["next"] == [path]


def test_bearer_token_on_any_request(seeded: Seed, protected: Callable[..., Client]) -> None:
    client = protected(client_host=ELSEWHERE, headers={"Authorization": f"Bearer {TOKEN}"})
    assert PRIVATE_TITLE in client.get("/").text
    assert client.get("/api/risk-windows").status_code == 200
    assert client.get(f"/runs/{seeded.runs['clean']}").status_code == 200


@pytest.mark.parametrize("authorization", [f"Bearer {TOKEN}x", "Bearer ", f"Basic {TOKEN}", TOKEN])
def test_wrong_credentials_are_refused(protected: Callable[..., Client], authorization: str) -> None:
    client = protected(headers={"Authorization": authorization})
    assert client.get("/api/risk-windows").status_code == 401
    assert client.get("/").status_code == 303


def test_login_form_sets_a_strict_http_only_cookie(protected: Callable[..., Client]) -> None:
    client = protected(client_host=ELSEWHERE)
    form = client.page("/login?next=/runs").one("form", cls="login")
    assert form["method"] == "post" and form["action"] == "/login"
    assert form.one("input", name="token")["type"] == "password"
    assert form.one("input", name="next")["value"] == "/runs"
    response = client.post("/login", data={"token": TOKEN, "next": "/runs"})
    assert response.status_code == 303 and response.headers["location"] == "/runs"
    cookie = response.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "max-age", "samesite"} <= attributes
    assert "samesite=strict" in cookie.lower() and f"max-age={SESSION_SECONDS}" in cookie.lower()
    assert "secure" not in attributes  # plain http here; see the https case
    assert PRIVATE_TITLE in client.get("/runs").text
    assert client.get("/api/runs").status_code == 200


def test_the_cookie_is_secure_over_https(protected: Callable[..., Client]) -> None:
    client = protected(base_url="https://127.0.0.1")
    cookie = client.post("/login", data={"token": TOKEN}).headers["set-cookie"]
    assert "secure" in {part.strip().lower() for part in cookie.split(";")}


def test_the_cookie_is_secure_behind_a_proxy_when_the_public_address_is_https(
        seeded_sqlite: tuple[str, Seed], make_client: MakeClient) -> None:
    # compose's Caddy speaks http to the app: the public address decides (PRTRIAGE_PUBLIC_URL)
    client = make_client(seeded_sqlite[0], token=TOKEN, public_url="https://triage.example.com")
    cookie = client.post("/login", data={"token": TOKEN}).headers["set-cookie"]
    assert "secure" in {part.strip().lower() for part in cookie.split(";")}
    sent = {"Cookie": cookie.split(";")[0]}  # as the browser sends it to the proxy over https
    csrf = client.get("/", headers=sent).text.split('name="csrf" value="')[1].split('"')[0]
    ended = client.post("/logout", data={"csrf": csrf}, headers=sent).headers["set-cookie"]
    assert "secure" in {part.strip().lower() for part in ended.split(";")}


def test_a_wrong_token_at_login_is_refused(protected: Callable[..., Client]) -> None:
    client = protected()
    response = client.post("/login", data={"token": "guess", "next": "/"})
    assert response.status_code == 401 and "set-cookie" not in response.headers
    assert "not the right one" in response.text
    assert client.get("/").status_code == 303


def test_a_forged_or_foreign_cookie_is_refused(protected: Callable[..., Client]) -> None:
    client = protected()
    client.log_in()
    value = client.http.cookies["prtriage_session"]
    issued, session_id, signature = value.split(".")
    for forged in (f"{issued}.{session_id}x.{signature}", f"{int(issued) + 1}.{session_id}.{signature}",
                   Gate("another token").issue(), "", "a.b"):
        client.http.cookies.set("prtriage_session", forged)
        assert client.get("/api/risk-windows").status_code == 401, forged


def test_sessions_expire() -> None:
    gate = Gate(TOKEN)
    cookie = gate.issue(now=1_000_000)
    assert gate.session_id(cookie, now=1_000_000 + SESSION_SECONDS - 1)
    assert gate.session_id(cookie, now=1_000_000 + SESSION_SECONDS + 1) is None
    assert gate.session_id(cookie, now=1_000_000 - 3600) is None  # issued in the future


def test_logout_forgets_the_session_cookie(protected: Callable[..., Client]) -> None:
    client = protected()
    client.log_in()
    csrf = client.page("/").one("form", cls="logout").one("input", name="csrf")["value"]
    response = client.post("/logout", data={"csrf": csrf})
    assert response.status_code == 303 and 'prtriage_session=""' in response.headers["set-cookie"]
    assert client.get("/").status_code == 303


def test_a_copy_of_the_cookie_is_refused_after_logout(seeded_any: tuple[str, Seed],
                                                     make_client: MakeClient) -> None:
    client = make_client(seeded_any[0], token=TOKEN)
    client.log_in()
    copied = client.http.cookies["prtriage_session"]
    other = make_client(seeded_any[0], token=TOKEN)  # another process of the service, the same database
    other.http.cookies.set("prtriage_session", copied)
    assert other.get("/api/runs").status_code == 200
    csrf = client.page("/").one("form", cls="logout").one("input", name="csrf")["value"]
    assert client.post("/logout", data={"csrf": csrf}).status_code == 303

    for replay in (client, other):
        replay.http.cookies.set("prtriage_session", copied)
        assert replay.get("/api/runs").status_code == 401
        assert replay.get("/").status_code == 303
        assert replay.get("/").headers["location"] == "/login?next=/"


def test_a_new_token_ends_every_session(seeded_sqlite: tuple[str, Seed], make_client: MakeClient) -> None:
    first, second = make_client(seeded_sqlite[0], token=TOKEN), make_client(seeded_sqlite[0], token=TOKEN)
    first.log_in()
    second.log_in()
    rotated = make_client(seeded_sqlite[0], token="a new token after a leak")
    for client in (first, second):
        rotated.http.cookies.set("prtriage_session", client.http.cookies["prtriage_session"])
        assert rotated.get("/api/runs").status_code == 401


def test_a_login_kept_on_the_server_holds_no_credential(fresh_sqlite: tuple[str, Seed],
                                                        make_client: MakeClient) -> None:
    client = make_client(fresh_sqlite[0], token=TOKEN)
    client.log_in()
    session_id = client.http.cookies["prtriage_session"].split(".")[1]
    engine = make_engine(fresh_sqlite[0])
    with engine.connect() as connection:
        [row] = connection.execute(text("SELECT id, revoked_at FROM dashboard_sessions")).all()
    engine.dispose()
    assert row == (hashlib.sha256(session_id.encode()).hexdigest(), None)


@pytest.mark.parametrize(("target", "expected"), [
    ("/runs?repo=a/b", "/runs?repo=a/b"), ("//evil.example/", "/"), ("https://evil.example/", "/"),
    ("/\\evil.example", "/"), ("", "/"), (None, "/")])
def test_login_returns_only_to_local_paths(target: str | None, expected: str) -> None:
    assert safe_next(target) == expected


def test_login_without_a_token_configured_says_there_is_nothing_to_log_in_with(reader: Client) -> None:
    assert "No DASHBOARD_TOKEN is configured" in reader.page("/login").one(id="problem").text
    assert reader.post("/login", data={"token": "anything"}).status_code == 400


def test_the_start_up_notice_says_whether_the_dashboard_is_protected() -> None:
    url = "http://127.0.0.1:8000/"
    protected = dashboard.startup_notice(Settings(DASHBOARD_TOKEN=TOKEN), url)
    assert "protected by DASHBOARD_TOKEN" in protected and TOKEN not in protected
    open_notice = dashboard.startup_notice(Settings(DASHBOARD_TOKEN=None, PRTRIAGE_HOST="127.0.0.1"), url)
    assert "loopback clients only" in open_notice and "403" not in open_notice
    exposed = dashboard.startup_notice(Settings(DASHBOARD_TOKEN=None, PRTRIAGE_HOST="0.0.0.0"), url)
    assert "other clients get 403" in exposed
