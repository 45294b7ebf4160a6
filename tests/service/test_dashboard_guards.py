"""The dashboard's guards over real HTTP: /metrics behind the dashboard's auth (or loopback only), and a CSRF
token on every state-changing POST, logout included."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest
from fastapi.routing import APIRoute

from app.config import Settings
from app.dashboard import api, login, routes

from .conftest import Service, make_service

TOKEN = "correct horse battery staple"
CSRF_FIELD = re.compile(r'name="csrf" value="([^"]*)"')


@pytest.fixture
def protected(make_settings: Callable[..., Settings], sqlite_url: str) -> Iterator[Service]:
    built = make_service(make_settings(database_url=sqlite_url, DASHBOARD_TOKEN=TOKEN))
    yield built
    built.close()


@contextmanager
def logged_in(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.live.url, timeout=30) as client:
        assert client.post("/login", data={"token": TOKEN, "next": "/"}).status_code == 303
        yield client


def test_metrics_need_the_dashboards_credentials_when_a_token_is_set(protected: Service) -> None:
    anonymous = protected.http.get("/metrics")
    assert anonymous.status_code == 401 and "prtriage_" not in anonymous.text
    bearer = protected.http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200 and "prtriage_queue_depth" in bearer.text
    with logged_in(protected) as client:
        assert client.get("/metrics").status_code == 200


def test_without_a_token_metrics_answer_loopback_only(sqlite_service: Service) -> None:
    assert sqlite_service.http.get("/metrics").status_code == 200
    # a page elsewhere whose name was rebound to 127.0.0.1 asks with its own Host: refused
    rebound = sqlite_service.http.get("/metrics", headers={"Host": "evil.example:8000"})
    assert rebound.status_code == 403 and "prtriage_" not in rebound.text


def test_logout_needs_the_sessions_csrf_token(protected: Service) -> None:
    with logged_in(protected) as client:
        forged = client.post("/logout", data={"next": "/"})  # what a form elsewhere can send
        assert forged.status_code == 403 and "set-cookie" not in forged.headers
        assert client.get("/").status_code == 200  # still logged in
        [csrf] = CSRF_FIELD.findall(client.get("/").text)  # the page's own logout form
        answer = client.post("/logout", data={"csrf": csrf})
        assert answer.status_code == 303 and 'prtriage_session=""' in answer.headers["set-cookie"]
        assert client.get("/").status_code == 303


def test_every_state_changing_post_refuses_a_session_without_its_csrf_token(protected: Service) -> None:
    posts = [route.path.replace("{window_id}", "1") for route in [*login.router.routes, *routes.router.routes,
                                                                   *api.router.routes]
             if isinstance(route, APIRoute) and "POST" in (route.methods or ()) and route.path != "/login"]
    assert len(posts) == 3  # logout and the two ways to close a window
    with logged_in(protected) as client:
        for path in posts:
            answer = client.post(path, data={"reason": "forged"}) if not path.startswith("/api/") else \
                client.post(path, json={"reason": "forged"})
            assert answer.status_code == 403, (path, answer.status_code)
        assert client.get("/").status_code == 200
