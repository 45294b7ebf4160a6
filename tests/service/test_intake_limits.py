"""The intake's boundaries (issues 23 and 27), over real HTTP on loopback: slow headers and slow bodies, the
JSON values budget, the 25 MB cap exactly and one byte over (plain and chunked), the GUID's length, and the
database down."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

import pytest
import uvicorn

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.processes.slow_clients import HeaderDeadlineProtocol
from app.webhooks import intake
from app.webhooks.intake import MAX_BODY_BYTES, MAX_JSON_VALUES

from .conftest import MILES, Service, make_service
from .payloads import delivery_headers, encode, fixture, pull_request_event, sha


class QuickDeadline(HeaderDeadlineProtocol):
    header_seconds = 1.0


@pytest.fixture
def deadline_url(sqlite_service: Service) -> Iterator[str]:
    """The service's app served as `prtriage serve` serves it (HeaderDeadlineProtocol), a 1 s deadline."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(sqlite_service.app, lifespan="off", log_level="warning", http=QuickDeadline)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    server.should_exit = True
    thread.join(30)
    listener.close()


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_connections_whose_headers_do_not_arrive_in_time_are_closed(deadline_url: str) -> None:
    address = urlparse(deadline_url)
    slow = [socket.create_connection((address.hostname, address.port)) for _ in range(50)]
    for sock in slow[:25]:
        sock.sendall(b"POST /webhooks/github HTTP/1.1\r\nHost: x\r\n")  # and never the rest
    started = time.monotonic()
    assert all(closed_by_server(sock, within=5) for sock in slow)  # silent ones too
    assert time.monotonic() - started < 5
    with socket.create_connection((address.hostname, address.port)) as prompt:
        time.sleep(0.5)  # within the deadline
        prompt.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert prompt.recv(1024).startswith(b"HTTP/1.1 ")
    for sock in slow:
        sock.close()


def test_a_body_that_does_not_arrive_in_time_is_408_and_closed(sqlite_service: Service,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake, "BODY_SECONDS", 1.0)
    body = encode(fixture("ping/ping"))
    headers = delivery_headers("ping", body)
    address = urlparse(sqlite_service.live.url)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(f"POST /webhooks/github HTTP/1.1\r\nHost: x\r\n{head}Content-Length: {len(body)}\r\n\r\n"
                     .encode() + body[:10])
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert b"connection: close" in answer.lower()
    assert sqlite_service.deliveries() == []


def padded_ping(total: int, *, commas: int = 0) -> bytes:
    """A ping payload of exactly TOTAL bytes, its `zen` holding COMMAS commas (counted as values)."""
    payload = fixture("ping/ping")
    payload["zen"] = ""
    bare = encode(payload)
    room = total - len(bare)
    assert room >= commas
    payload["zen"] = "," * commas + " " * (room - commas)
    body = encode(payload)
    assert len(body) == total
    return body


def test_the_json_values_budget_is_counted_before_parsing(sqlite_service: Service) -> None:
    base = intake.json_values_bound(padded_ping(10_000))
    within = padded_ping(2_000_000, commas=MAX_JSON_VALUES - base)
    assert sqlite_service.http.post("/webhooks/github", content=within,
                                    headers=delivery_headers("ping", within)).status_code == 200
    over = padded_ping(2_000_000, commas=MAX_JSON_VALUES - base + 1)
    answer = sqlite_service.http.post("/webhooks/github", content=over,
                                      headers=delivery_headers("ping", over))
    assert answer.status_code == 400
    assert answer.json()["message"] == (f"the body holds more than {MAX_JSON_VALUES:,} JSON values: "
                                        "no delivery does")
    empties = b'{"zen": [' + b"{}," * 1_000_000 + b"{}]}"
    assert sqlite_service.http.post("/webhooks/github", content=empties,
                                    headers=delivery_headers("ping", empties)).status_code == 400
    assert len(sqlite_service.deliveries()) == 1  # the one within the budget


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_exactly_25_mb_is_taken_and_one_byte_more_refused(sqlite_service: Service, chunked: bool) -> None:
    for size, expected in ((MAX_BODY_BYTES, 200), (MAX_BODY_BYTES + 1, 413)):
        body = padded_ping(size)

        def pieces(body: bytes = body) -> Iterator[bytes]:
            for start in range(0, len(body), 1024 * 1024):
                yield body[start:start + 1024 * 1024]

        answer = sqlite_service.http.post("/webhooks/github", content=pieces() if chunked else body,
                                          headers=delivery_headers("ping", body))
        assert answer.status_code == expected, (size, answer.text[:200])
    assert [delivery.event for delivery in sqlite_service.deliveries()] == ["ping"]


@pytest.mark.parametrize(("guid", "expected"), [("g" * 64, 200), ("g" * 65, 400), ("", 400), ("g", 200)])
def test_the_delivery_guid_is_1_to_64_characters(sqlite_service: Service, guid: str, expected: int) -> None:
    body = encode(fixture("ping/ping"))
    headers = {**delivery_headers("ping", body), "X-GitHub-Delivery": guid}
    assert sqlite_service.http.post("/webhooks/github", content=body, headers=headers).status_code == expected
    assert [d.guid for d in sqlite_service.deliveries()] == ([guid] if expected == 200 else [])


def test_with_the_database_down_the_answer_is_503_and_the_redelivery_is_taken(
        make_settings: Callable[..., Settings], database_url: str, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(MILES)
    payload = pull_request_event(fake_github, "opened", full_name=MILES, number=4, head_sha=sha("h"),
                                 base_sha=sha("b"))
    guid = str(uuid.uuid4())
    unreachable = "postgresql://prtriage@127.0.0.1:9/nowhere?connect_timeout=2"
    down = make_service(make_settings(database_url=unreachable), services=None)
    try:
        answer = down.post("pull_request", payload, guid=guid)
        assert answer.status_code == 503, answer.text
        assert "redeliver" in answer.json()["message"]
    finally:
        down.close()
    back = make_service(make_settings(database_url=database_url))
    try:  # nothing was lost: GitHub's redelivery is taken like a first delivery
        assert back.post("pull_request", payload, guid=guid).status_code == 202
        assert [(d.guid, d.status) for d in back.deliveries()] == [(guid, "queued")]
        assert json.loads(json.dumps(back.deliveries()[0].payload_summary))["job"] == "triage"
    finally:
        back.close()
