"""What the intake answers for each kind of delivery, what it stores and what it counts (issue 27): the exact
answer GitHub shows, the delivery's row, the `prtriage_deliveries_total` sample and the log line, at each
limit's boundary; over real HTTP on loopback where the answer depends on how the body arrives, through
`Intake` itself (as `prtriage replay` uses it) where it does not."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import pytest
from starlette.requests import Request

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.webhooks import intake
from app.webhooks.intake import (
    MAX_BODY_BYTES,
    PARSE_IN_LOOP_BYTES,
    REDELIVER,
    Answer,
    Intake,
    TooLarge,
    Verified,
    read_capped,
    too_large,
    too_slow,
)
from app.webhooks.router import Ignored, Job

from .conftest import MILES, Service, make_service
from .payloads import SECRET, delivery_headers, encode, fixture, pull_request_event, sha, signature


def opened(fake: FakeGitHub, number: int = 7) -> dict[str, Any]:
    fake.add_repo(MILES) if fake.repo(MILES) is None else None
    return pull_request_event(fake, "opened", full_name=MILES, number=number, head_sha=sha("head"),
                              base_sha=sha("base"))


def the_intake(service: Service) -> Intake:
    found: Intake = service.app.state.intake
    return found


def counted(service: Service, event: str, result: str) -> float:
    return the_intake(service).metrics.deliveries.value(event=event, result=result)


def lower(headers: dict[str, str]) -> dict[str, str]:
    """Header names as `Intake.verify` takes them from anything but Starlette: lower case."""
    return {name.lower(): value for name, value in headers.items()}


def ping_of(size: int) -> bytes:
    """A signed-able ping payload of exactly SIZE bytes."""
    payload = fixture("ping/ping")
    payload["zen"] = ""
    payload["zen"] = " " * (size - len(encode(payload)))
    body = encode(payload)
    assert len(body) == size
    return body


# --- the body's cap and the refusals' answers, first (no service needed) ----------------------------------

def asgi_request(chunks: list[bytes], content_length: str | None) -> tuple[Request, list[bytes]]:
    """A Starlette request whose body arrives as CHUNKS on the ASGI channel, and the chunks read so far."""
    headers = [] if content_length is None else [(b"content-length", content_length.encode())]
    scope = {"type": "http", "method": "POST", "path": "/webhooks/github", "headers": headers}
    read: list[bytes] = []

    async def receive() -> dict[str, Any]:
        chunk = chunks[len(read)]
        read.append(chunk)
        return {"type": "http.request", "body": chunk, "more_body": len(read) < len(chunks)}

    return Request(scope, receive), read


def capped(chunks: list[bytes], content_length: str | None = None, cap: int = 10) -> bytes:
    request, _ = asgi_request(chunks, content_length)
    return asyncio.run(read_capped(request, cap))


def test_a_body_of_exactly_the_cap_is_read_whole() -> None:
    assert capped([b"12345", b"67890"]) == b"1234567890"
    assert capped([b"1234567890"], content_length="10") == b"1234567890"
    assert capped([b"", b"1"]) == b"1"


def test_one_byte_over_the_cap_is_refused_and_the_rest_left_unread() -> None:
    request, read = asgi_request([b"12345", b"678901", b"never read"], None)
    with pytest.raises(TooLarge):
        asyncio.run(read_capped(request, 10))
    assert read == [b"12345", b"678901"]


@pytest.mark.parametrize("declared", ["11", "1e3", "-1", "\u0661\u0660"])  # the last: Arabic-Indic "10"
def test_a_declared_length_over_the_cap_or_not_a_number_is_refused_unread(declared: str) -> None:
    request, read = asgi_request([b"x"], declared)
    with pytest.raises(TooLarge):
        asyncio.run(read_capped(request, 10))
    assert read == []


def test_the_default_cap_is_25_mb_as_github_sends() -> None:
    assert MAX_BODY_BYTES == 25 * 1024 * 1024
    for declared, refused in ((str(25 * 1024 * 1024), False), (str(25 * 1024 * 1024 + 1), True)):
        request, _ = asgi_request([b"{}"], declared)
        if refused:
            with pytest.raises(TooLarge):
                asyncio.run(read_capped(request))
        else:
            assert asyncio.run(read_capped(request)) == b"{}"


def test_the_refusals_close_the_connection() -> None:
    for response, status, body in (
            (too_large(), 413, b'{"result":"too_large","message":"payloads are at most 25 MB"}'),
            (too_slow(), 408, b'{"result":"too_slow","message":"the body took over 10 s"}')):
        assert (response.status_code, response.body) == (status, body)
        assert response.headers["connection"] == "close"


# --- each answer, exactly, and its count --------------------------------------------------------------

def test_a_queued_delivery_is_answered_stored_and_counted(service: Service, fake_github: FakeGitHub) -> None:
    guid = str(uuid.uuid4())
    answer = service.post("pull_request", opened(fake_github), guid=guid)
    assert (answer.status_code, answer.json()) == (202, {"result": "queued", "message": "triage",
                                                         "delivery": guid})
    assert counted(service, "pull_request", "queued") == 1
    [row] = service.deliveries()
    assert (row.guid, row.event, row.action, row.installation_id) == (guid, "pull_request", "opened", 1)
    assert (row.status, row.error, row.processed_at) == ("queued", None, None)
    assert row.received_at is not None
    assert row.payload_summary["job"] == "triage" and row.payload_summary["numbers"] == [7]
    assert service.queue.huey.pending_count() == 1


def test_an_ignored_delivery_is_answered_stored_done_and_counted(service: Service) -> None:
    guid = str(uuid.uuid4())
    answer = service.post("ping", fixture("ping/ping"), guid=guid)
    [row] = service.deliveries()
    reason = row.error
    assert reason  # why it is ignored, in the answer as in the row
    assert (answer.status_code, answer.json()) == (200, {"result": "ignored", "message": reason,
                                                         "delivery": guid})
    assert counted(service, "ping", "ignored") == 1
    assert (row.guid, row.event, row.action) == (guid, "ping", None)
    assert row.status == "ignored" and row.payload_summary == {"ignored": reason}
    assert row.processed_at is not None and row.processed_at == row.received_at
    assert service.queue.huey.pending_count() == 0


def test_a_redelivery_is_answered_as_a_duplicate_and_counted(sqlite_service: Service,
                                                             fake_github: FakeGitHub) -> None:
    payload, guid = opened(fake_github), str(uuid.uuid4())
    assert sqlite_service.post("pull_request", payload, guid=guid).status_code == 202
    again = sqlite_service.post("pull_request", payload, guid=guid)
    assert (again.status_code, again.json()) == (200, {"result": "duplicate", "message": "already received",
                                                       "delivery": guid})
    assert counted(sqlite_service, "pull_request", "duplicate") == 1
    assert counted(sqlite_service, "pull_request", "queued") == 1


def test_an_unsigned_delivery_is_answered_401_and_counted_unverified(sqlite_service: Service) -> None:
    body = encode(fixture("ping/ping"))
    for signed in (None, signature(body, "another secret")):
        headers = delivery_headers("ping", body)
        del headers["X-Hub-Signature-256"]
        if signed is not None:
            headers["X-Hub-Signature-256"] = signed
        answer = sqlite_service.http.post("/webhooks/github", content=body, headers=headers)
        assert (answer.status_code, answer.json()) == (401, {
            "result": "unauthorized", "message": "missing or wrong X-Hub-Signature-256"})
    assert counted(sqlite_service, "unverified", "unauthorized") == 2
    assert sqlite_service.deliveries() == []


def test_missing_headers_are_answered_400_and_counted_unverified(sqlite_service: Service) -> None:
    body = encode(fixture("ping/ping"))
    headers = delivery_headers("ping", body)
    del headers["X-GitHub-Event"]
    answer = sqlite_service.http.post("/webhooks/github", content=body, headers=headers)
    assert (answer.status_code, answer.json()) == (400, {
        "result": "bad_request",
        "message": "X-GitHub-Event and X-GitHub-Delivery (at most 64 characters) are required"})
    assert counted(sqlite_service, "unverified", "bad_request") == 1


def test_a_body_that_is_no_json_object_is_counted_under_its_event(sqlite_service: Service) -> None:
    for body in (b"[1]", b'{"zen": NaN}', b'{"zen": Infinity}'):
        answer = sqlite_service.post("ping", body=body)
        assert (answer.status_code, answer.json()) == (400, {"result": "bad_request",
                                                             "message": "the body is not a JSON object"})
    assert counted(sqlite_service, "ping", "bad_request") == 3
    assert sqlite_service.deliveries() == []


def test_a_payload_its_event_refuses_is_400_with_the_reason(sqlite_service: Service) -> None:
    answer = sqlite_service.post("pull_request", {"action": "opened", "repository": {"id": 1}})
    assert answer.status_code == 400
    assert answer.json()["result"] == "bad_request" and "payload lacks" in answer.json()["message"]
    assert counted(sqlite_service, "pull_request", "bad_request") == 1


def test_a_long_event_name_is_cut_to_its_column(sqlite_service: Service) -> None:
    event, guid = "e" * 100, str(uuid.uuid4())
    answer = sqlite_service.post(event, fixture("ping/ping"), guid=guid)
    assert answer.status_code == 200 and answer.json()["result"] == "ignored"
    assert [row.event for row in sqlite_service.deliveries()] == ["e" * 64]
    assert counted(sqlite_service, "e" * 64, "ignored") == 1


# --- the JSON values budget, exactly --------------------------------------------------------------------

def test_five_hundred_thousand_json_values_pass_and_one_more_does_not(sqlite_service: Service) -> None:
    service = the_intake(sqlite_service)
    at_bound = b'{"zen": "' + b"," * 499_999 + b'"}'  # 499,999 commas and one brace: 500,000 counted
    over = b'{"zen": "' + b"," * 500_000 + b'"}'
    assert intake.json_values_bound(at_bound) == 500_000
    taken = service.verify(lower(delivery_headers("ping", at_bound)), at_bound)
    assert isinstance(taken, Verified) and taken.event == "ping"
    refused = service.verify(lower(delivery_headers("ping", over)), over)
    assert refused == Answer(400, {
        "result": "bad_request", "message": "the body holds more than 500,000 JSON values: no delivery does"})


def test_the_values_bound_counts_commas_and_openings() -> None:
    assert intake.json_values_bound(b'{"a": [1, 2, {"b": 3}], "c": ","}') == 2 + 2 + 3


# --- Intake itself, as `prtriage replay` feeds it -------------------------------------------------------

def test_receive_verifies_then_stores(sqlite_service: Service, fake_github: FakeGitHub) -> None:
    service, body = the_intake(sqlite_service), encode(opened(fake_github))
    headers = lower(delivery_headers("pull_request", body))
    answer = service.receive(headers, body)
    assert answer == Answer(202, {"result": "queued", "message": "triage",
                                  "delivery": headers["x-github-delivery"]})
    forged = {**headers, "x-hub-signature-256": signature(body, "forged")}
    assert service.receive(forged, body).status == 401
    assert [row.guid for row in sqlite_service.deliveries()] == [headers["x-github-delivery"]]


def test_a_signature_outside_latin_1_is_wrong_not_an_error(sqlite_service: Service) -> None:
    body = encode(fixture("ping/ping"))
    headers = {**lower(delivery_headers("ping", body)), "x-hub-signature-256": "sha256=\u2713" + "0" * 63}
    assert the_intake(sqlite_service).receive(headers, body).status == 401
    assert not intake.signature_matches(SECRET.encode(), body, "")
    assert intake.signature_matches(SECRET.encode(), body, " " + signature(body) + " ")


def test_the_secret_is_not_in_the_intakes_repr(sqlite_service: Service) -> None:
    assert SECRET not in repr(the_intake(sqlite_service))


def test_one_guid_twice_in_one_group_is_new_once(service: Service) -> None:
    guid = str(uuid.uuid4())
    first = Verified("check_run", guid, "rerequested", 1, Job("triage", 1, {"n": 1}))
    second = Verified("check_run", guid, "rerequested", 1, Job("triage", 1, {"n": 2}))
    ignored = Verified("ping", str(uuid.uuid4()), None, 1, Ignored("ping"))
    answers = the_intake(service).store([first, second, ignored])
    assert [(a.status, a.body["result"]) for a in answers] == [(202, "queued"), (200, "duplicate"),
                                                               (200, "ignored")]
    assert [(row.guid, row.payload_summary.get("n")) for row in service.deliveries()] == [
        (guid, 1), (ignored.guid, None)]
    assert service.queue.huey.pending_count() == 1


def test_a_row_the_database_refuses_is_400_and_logged(service: Service, caplog: pytest.LogCaptureFixture,
                                                      ) -> None:
    refused = Verified("ping", str(uuid.uuid4()), None, 10**30, Ignored("ping"))
    with caplog.at_level(logging.WARNING, logger="app.webhooks.intake"):
        answers = the_intake(service).store([refused])
    assert answers == [Answer(400, {"result": "bad_request",
                                    "message": "the database refused this delivery"})]
    assert counted(service, "ping", "bad_request") == 1
    [logged] = [r.getMessage() for r in caplog.records if r.name == "app.webhooks.intake"]
    assert re.fullmatch(r"the database refused a delivery: \w+Error", logged), logged
    assert service.deliveries() == []


def test_with_the_queue_down_the_answer_is_503_counted_and_logged_with_its_cause(
        make_settings: Callable[..., Settings], database_url: str, fake_github: FakeGitHub,
        caplog: pytest.LogCaptureFixture) -> None:
    down = make_service(make_settings(database_url=database_url, QUEUE_URL="redis://127.0.0.1:9/0"))
    try:
        with caplog.at_level(logging.ERROR, logger="app.webhooks.intake"):
            answer = down.post("pull_request", opened(fake_github))
        assert (answer.status_code, answer.json()) == (503, {"result": "unavailable", "message": REDELIVER})
        assert counted(down, "pull_request", "unavailable") == 1
        # the queue's own error, not the wrapper that carried it out of the transaction
        assert "1 deliveries not queued: ConnectionError" in caplog.text
        assert down.deliveries() == []
    finally:
        down.close()


# --- the body: its cap, its time, and large bodies a few at a time ----------------------------------------

def raw_post(service: Service, head: dict[str, str], body: bytes = b"") -> bytes:
    """The answer's first bytes to a POST of HEAD's headers and BODY, sent as they are."""
    address = urlparse(service.live.url)
    lines = "".join(f"{name}: {value}\r\n" for name, value in head.items())
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(f"POST /webhooks/github HTTP/1.1\r\nHost: x\r\n{lines}\r\n".encode() + body)
        return sock.recv(65536)


def test_a_declared_length_past_25_mb_is_413_before_a_byte_is_read(sqlite_service: Service) -> None:
    head = {**delivery_headers("ping", b"{}"), "Content-Length": str(MAX_BODY_BYTES + 1)}
    answer = raw_post(sqlite_service, head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
    assert b"connection: close" in answer.lower() and b'"too_large"' in answer
    assert counted(sqlite_service, "unverified", "too_large") == 1
    assert sqlite_service.deliveries() == []


def test_a_body_too_slow_is_408_and_counted(sqlite_service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake, "BODY_SECONDS", 0.5)
    body = encode(fixture("ping/ping"))
    answer = raw_post(sqlite_service, {**delivery_headers("ping", body), "Content-Length": str(len(body))},
                      body[:10])
    assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
    assert counted(sqlite_service, "unverified", "too_slow") == 1


def test_three_large_bodies_at_once(sqlite_service: Service) -> None:
    slots = the_intake(sqlite_service).large_bodies  # a new service's: none taken yet

    async def take() -> list[bool]:
        taken = []
        for _ in range(4):
            taken.append(not slots.locked())
            if taken[-1]:
                await slots.acquire()
        return taken

    assert asyncio.run(take()) == [True, True, True, False]


def test_a_body_up_to_256_kb_needs_no_large_slot(sqlite_service: Service,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake, "BODY_SECONDS", 0.5)
    the_intake(sqlite_service).large_bodies = asyncio.Semaphore(0)  # every large slot taken
    assert PARSE_IN_LOOP_BYTES == 256 * 1024
    small = ping_of(256 * 1024)
    assert sqlite_service.post("ping", body=small).status_code == 200
    large = ping_of(256 * 1024 + 1)
    answer = sqlite_service.post("ping", body=large)
    assert (answer.status_code, answer.json()) == (503, {
        "result": "unavailable", "message": f"too many large deliveries at once; {REDELIVER}"})
    assert counted(sqlite_service, "unverified", "busy") == 1
    assert counted(sqlite_service, "unverified", "unavailable") == 1
    assert len(sqlite_service.deliveries()) == 1


def test_a_large_delivery_gives_its_slot_back(sqlite_service: Service,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake, "BODY_SECONDS", 1.0)
    for _ in range(intake.LARGE_BODIES + 2):  # one after the other: each finds a slot free
        assert sqlite_service.post("ping", body=ping_of(PARSE_IN_LOOP_BYTES + 1)).status_code == 200
    assert len(sqlite_service.deliveries()) == intake.LARGE_BODIES + 2
