"""The intake under attack, over real HTTP on loopback: bodies that never end, signed payloads of the wrong
shape, and a bad delivery inside a batch of good ones."""

from __future__ import annotations

import contextlib
import copy
import select
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from app.demo.localgithub import FakeGitHub
from app.webhooks.intake import MAX_BODY_BYTES, Verified
from app.webhooks.router import Ignored, Job

from .conftest import MILES, Service
from .payloads import delivery_headers, encode, fixture, pull_request_event, sha, signature

CHUNK = 1024 * 1024
SENTINEL = 987_654_321  # replaced by a number JSON can say but Python's int() cannot take
HUGE_ID = {"id": 10**30}  # past every integer column
ENDLESS = 4 * MAX_BODY_BYTES  # what the sender would go on sending if nobody stopped it


def send_chunked(url: str, headers: dict[str, str], total: int) -> tuple[int, bytes]:
    """POST TOTAL bytes of chunked body on a raw socket, reading any answer between chunks: the bytes the
    server took before it answered (or closed), and the answer's first bytes."""
    address = urlparse(url)
    lines = ["POST /webhooks/github HTTP/1.1", f"Host: {address.netloc}", "Transfer-Encoding: chunked",
             *(f"{name}: {value}" for name, value in headers.items()), "", ""]
    chunk = f"{CHUNK:x}\r\n".encode() + b" " * CHUNK + b"\r\n"
    sent, answer = 0, b""
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall("\r\n".join(lines).encode())
        while sent < total and not answer:
            try:
                sock.sendall(chunk)
            except OSError:  # the server closed the connection: it reads no more
                break
            sent += CHUNK
            if select.select([sock], [], [], 0)[0]:
                answer = sock.recv(65536)
        if not answer and sent >= total:
            sock.sendall(b"0\r\n\r\n")
        with contextlib.suppress(OSError):  # a reset after the answer
            answer = answer or sock.recv(65536)
    return sent, answer


@pytest.mark.parametrize("signed", [False, True])
def test_a_chunked_body_is_refused_before_it_is_read_whole(sqlite_service: Service, signed: bool) -> None:
    headers = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": str(uuid.uuid4())}
    if signed:  # a signature header, so the body must be read to check it: up to the cap and no further
        headers["X-Hub-Signature-256"] = signature(b"anything")
    sent, answer = send_chunked(sqlite_service.live.url, headers, ENDLESS)
    # what the loopback socket buffers hold besides, a few MB at most
    assert sent < MAX_BODY_BYTES + 16 * CHUNK, f"{sent} bytes taken"
    expected = b"HTTP/1.1 413" if signed else b"HTTP/1.1 401"
    assert answer == b"" or answer.startswith(expected), answer[:100]
    if not signed:
        assert sent < 16 * CHUNK  # no signature: not a byte of the body is needed
    assert sqlite_service.deliveries() == []


def test_a_signed_chunked_delivery_within_the_cap_is_taken(sqlite_service: Service,
                                                           fake_github: FakeGitHub) -> None:
    fake_github.add_repo(MILES)
    body = encode(pull_request_event(fake_github, "opened", full_name=MILES, number=3, head_sha=sha("h"),
                                     base_sha=sha("b")))

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start:start + 1000]

    answer = sqlite_service.http.post("/webhooks/github", content=pieces(),
                                      headers=delivery_headers("pull_request", body))
    assert answer.status_code == 202, answer.text


def nested(depth: int) -> bytes:
    return b'{"action": "opened", "x": ' + b"[" * depth + b"]" * depth + b"}"


def at(payload: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(payload)
    *parents, last = path.split(".")
    target = changed
    for key in parents:
        target = target[key]
    target[last] = value
    return changed


MALFORMED: list[tuple[str, str, Callable[[], bytes]]] = [
    ("deep nesting", "pull_request", lambda: nested(100_000)),
    ("nesting past 1,000", "ping", lambda: nested(1_500)),
    ("issue a string", "issue_comment",
     lambda: encode(at(fixture("issue_comment/created.on-pull-request"), "issue", "7"))),
    ("comment.user a string", "issue_comment",
     lambda: encode(at(at(fixture("issue_comment/created.on-pull-request"), "comment.body", "/triage rerun"),
                       "comment.user", "octocat"))),
    ("merged_by a string", "pull_request",
     lambda: encode(at(fixture("pull_request/closed.merged"), "pull_request.merged_by", "octocat"))),
    ("check_suite a string", "check_suite",
     lambda: encode(at(fixture("check_suite/rerequested"), "check_suite", "suite"))),
    ("installation.account a string", "installation",
     lambda: encode(at(fixture("installation/created"), "installation.account", "octocat"))),
    ("number 1e400", "pull_request", lambda: encode(at(fixture("pull_request/opened"), "pull_request.number",
                                                       SENTINEL)).replace(str(SENTINEL).encode(), b"1e400")),
    ("installation.id 10**30", "ping", lambda: encode(at(fixture("ping/ping"), "installation", HUGE_ID))),
]


@pytest.mark.parametrize(("event", "make"), [(event, make) for _, event, make in MALFORMED],
                         ids=[name for name, _, _ in MALFORMED])
def test_a_signed_but_malformed_payload_is_400_and_nothing_is_stored(service: Service, event: str,
                                                                     make: Callable[[], bytes]) -> None:
    body = make()
    answer = service.post(event, body=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["result"] == "bad_request"
    assert service.deliveries() == []
    assert service.queue.huey.pending_count() == 0


def test_one_bad_delivery_does_not_fail_its_batch(service: Service, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(MILES)
    good = [encode(pull_request_event(fake_github, "opened", full_name=MILES, number=n, head_sha=sha(str(n)),
                                      base_sha=sha("b"))) for n in range(1, 61)]
    bad = [encode(at(at(fixture("ping/ping"), "installation", HUGE_ID), "hook_id", n)) for n in range(3)]
    bodies = [*good[:20], bad[0], *good[20:40], bad[1], *good[40:], bad[2]]
    statuses: dict[bytes, int] = {}
    start = threading.Barrier(len(bodies))

    def send(body: bytes) -> None:
        headers = delivery_headers("ping" if body in bad else "pull_request", body)
        start.wait()
        statuses[body] = service.http.post("/webhooks/github", content=body, headers=headers).status_code

    threads = [threading.Thread(target=send, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [statuses[body] for body in good] == [202] * 60
    assert [statuses[body] for body in bad] == [400] * 3
    assert len(service.deliveries()) == 60
    assert service.queue.huey.pending_count() == 60


def test_a_group_the_database_refuses_is_stored_one_by_one(service: Service) -> None:
    # A row only the database can refuse (the typed models keep such ids out of the HTTP intake): its
    # neighbours in the same group are stored and queued all the same.
    intake = service.app.state.intake
    ping = Ignored("ping")
    group = [Verified("check_run", str(uuid.uuid4()), "rerequested", 1, Job("triage", 1, {"n": 1})),
             Verified("ping", str(uuid.uuid4()), None, 10**30, ping),
             Verified("check_run", str(uuid.uuid4()), "rerequested", 1, Job("triage", 1, {"n": 2}))]
    assert [answer.status for answer in intake.store(group)] == [202, 400, 202]
    assert [delivery.guid for delivery in service.deliveries()] == [group[0].guid, group[2].guid]
    assert service.queue.huey.pending_count() == 2
