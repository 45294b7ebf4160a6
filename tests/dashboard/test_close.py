"""Closing a risk window from the dashboard: the form (login, CSRF token of the session, reason) and the
API; the close is an event, and the window stays listed under state=closed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .conftest import TOKEN, Client
from .html import Node
from .seed import Seed

MakeClient = Callable[..., Client]


@pytest.fixture
def fresh(fresh_sqlite: tuple[str, Seed], make_client: MakeClient) -> tuple[Callable[..., Client], Seed]:
    """Clients of a protected dashboard on this test's own data."""
    url, seeded = fresh_sqlite

    def make(**options: object) -> Client:
        return make_client(url, token=TOKEN, **options)

    return make, seeded


def close_form(client: Client, window_id: int) -> Node:
    return client.page(f"/windows/{window_id}").one("form", id="close-form")


def test_the_form_closes_the_window_and_records_the_event(fresh: tuple[MakeClient, Seed]) -> None:
    make, seeded = fresh
    client, window_id = make(), seeded.windows["oldest"]
    client.log_in()
    form = close_form(client, window_id)
    assert form["method"] == "post" and form["action"] == f"/windows/{window_id}/close"
    csrf = form.one("input", name="csrf")["value"]
    assert len(csrf) > 20
    response = client.post(form["action"], data={"csrf": csrf, "reason": "superseded by #2223"})
    assert response.status_code == 303 and response.headers["location"] == f"/windows/{window_id}"
    page = client.page(f"/windows/{window_id}")
    assert page.one(id="window-state").text == "closed"
    assert page.one(id="close-reason").text == "superseded by #2223"
    last = page.one("ol", id="timeline").find_all("li", cls="event")[-1]
    assert last.one("span", cls="actor").text == "dashboard"
    assert last.one("span", cls="what").text == "closed: superseded by #2223"
    assert page.find_all("form", id="close-form") == []
    def listed(url: str) -> list[str]:
        return [row["data-window-id"] for row in client.page(url).find_all("tr", cls="window")]

    assert str(window_id) in listed("/?state=closed") and str(window_id) not in listed("/")


@pytest.mark.parametrize("csrf", [None, "", "forged-token-of-the-right-length-0123456789"])
def test_the_form_needs_the_sessions_csrf_token(fresh: tuple[MakeClient, Seed], csrf: str | None) -> None:
    make, seeded = fresh
    client = make()
    client.log_in()
    data = {"reason": "done"} | ({"csrf": csrf} if csrf is not None else {})
    response = client.post(f"/windows/{seeded.windows['oldest']}/close", data=data)
    assert response.status_code == 403
    assert client.page(f"/windows/{seeded.windows['oldest']}").one(id="window-state").text == "open"


def test_a_csrf_token_works_only_with_its_own_session(fresh: tuple[MakeClient, Seed]) -> None:
    make, seeded = fresh
    first, second = make(), make()
    first.log_in()
    second.log_in()
    window_id = seeded.windows["oldest"]
    stolen = close_form(first, window_id).one("input", name="csrf")["value"]
    assert second.post(f"/windows/{window_id}/close", data={"csrf": stolen, "reason": "x"}).status_code == 403


def test_closing_needs_a_login(fresh: tuple[MakeClient, Seed]) -> None:
    make, seeded = fresh
    response = make().post(f"/windows/{seeded.windows['oldest']}/close", data={"reason": "done"})
    assert response.status_code == 303 and response.headers["location"].startswith("/login")


def test_a_reason_is_required_and_a_closed_window_stays_closed(fresh: tuple[MakeClient, Seed]) -> None:
    make, seeded = fresh
    client = make()
    client.log_in()
    window_id = seeded.windows["cross"]
    csrf = close_form(client, window_id).one("input", name="csrf")["value"]
    missing = client.post(f"/windows/{window_id}/close", data={"csrf": csrf, "reason": "  "})
    assert missing.status_code == 400
    assert "Say why" in missing.text
    closed = client.post(f"/windows/{window_id}/close", data={"csrf": csrf, "reason": "done"})
    assert closed.status_code == 303
    again = client.post(f"/windows/{window_id}/close", data={"csrf": csrf, "reason": "again"})
    assert again.status_code == 409
    assert client.post("/windows/9999/close", data={"csrf": csrf, "reason": "x"}).status_code == 404
    assert client.post(f"/windows/{window_id}/close", content=b"{}",
                       headers={"content-type": "application/json"}).status_code == 415


def test_a_bearer_client_posts_the_form_without_csrf(fresh: tuple[MakeClient, Seed]) -> None:
    # No ambient credential: a browser never adds an Authorization header by itself.
    make, seeded = fresh
    client = make(headers={"Authorization": f"Bearer {TOKEN}"})
    response = client.post(f"/windows/{seeded.windows['fresh']}/close", data={"reason": "reverted"})
    assert response.status_code == 303


def test_api_close_with_bearer(fresh: tuple[MakeClient, Seed]) -> None:
    make, seeded = fresh
    client, window_id = make(headers={"Authorization": f"Bearer {TOKEN}"}), seeded.windows["private"]
    response = client.post(f"/api/risk-windows/{window_id}/close", json={"reason": "  fixed in #6  "})
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "closed" and body["close_reason"] == "fixed in #6" and body["closed_at"]
    assert body["events"][-1]["actor"] == "dashboard" and body["events"][-1]["what"] == "closed: fixed in #6"
    listed = client.get("/api/risk-windows", params={"state": "closed"}).json()["items"]
    assert window_id in [item["id"] for item in listed]
    assert client.post(f"/api/risk-windows/{window_id}/close", json={"reason": "x"}).status_code == 409
    assert client.post("/api/risk-windows/9999/close", json={"reason": "x"}).status_code == 404
    assert client.post(f"/api/risk-windows/{window_id}/close", json={"reason": " "}).status_code == 422
    assert client.post(f"/api/risk-windows/{window_id}/close", json={}).status_code == 422


def test_api_close_refusals(fresh: tuple[MakeClient, Seed], fresh_sqlite: tuple[str, Seed],
                            make_client: MakeClient) -> None:
    make, seeded = fresh
    path = f"/api/risk-windows/{seeded.windows['oldest']}/close"
    assert make().post(path, json={"reason": "x"}).status_code == 401
    cookie_client = make()
    cookie_client.log_in()
    assert cookie_client.post(path, json={"reason": "x"}).status_code == 403  # cookie, no CSRF header
    csrf = close_form(cookie_client, seeded.windows["oldest"]).one("input", name="csrf")["value"]
    assert cookie_client.post(path, json={"reason": "x"}, headers={"X-CSRF-Token": csrf}).status_code == 200
    unprotected = make_client(fresh_sqlite[0])  # loopback, no token configured: read-only
    refused = unprotected.post(f"/api/risk-windows/{seeded.windows['cross']}/close", json={"reason": "x"})
    assert refused.status_code == 403 and "DASHBOARD_TOKEN" in refused.json()["detail"]
