"""POST /webhooks/github, through the HTTP entry point: signature before parsing, headers, JSON, dedupe by
GUID (also under concurrency), the queue inside the delivery's transaction, and the answers GitHub sees."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.store.models import Installation, Repository
from app.store.session import session_scope

from .conftest import MILES, Service, make_service
from .payloads import SECRET, delivery_headers, encode, fixture, pull_request_event, sha, signature


def opened(fake: FakeGitHub, number: int = 7) -> dict[str, object]:
    fake.add_repo(MILES) if fake.repo(MILES) is None else None
    return pull_request_event(fake, "opened", full_name=MILES, number=number, head_sha=sha("head"),
                              base_sha=sha("base"))


def test_ping_answers_200_and_queues_nothing(service: Service) -> None:
    answer = service.post("ping", fixture("ping/ping"))
    assert answer.status_code == 200
    assert answer.json()["result"] == "ignored"
    [delivery] = service.deliveries()
    assert (delivery.event, delivery.status) == ("ping", "ignored")
    assert service.queue.huey.pending_count() == 0


@pytest.mark.parametrize("signed_with", [None, "not the secret", "sha1-style"])
def test_a_missing_or_wrong_signature_is_401_and_nothing_is_stored(service: Service, fake_github: FakeGitHub,
                                                                   signed_with: str | None) -> None:
    body = encode(opened(fake_github))
    headers = delivery_headers("pull_request", body)
    if signed_with is None:
        del headers["X-Hub-Signature-256"]
    elif signed_with == "sha1-style":
        headers["X-Hub-Signature-256"] = signature(body).replace("sha256=", "sha1=")
    else:
        headers["X-Hub-Signature-256"] = signature(body, signed_with)
    answer = service.post("pull_request", body=body, headers=headers)
    assert answer.status_code == 401
    assert SECRET not in answer.text
    assert service.deliveries() == []
    assert service.queue.huey.pending_count() == 0


def test_the_signature_is_checked_before_the_body_is_parsed(sqlite_service: Service) -> None:
    body = b"{this is not json"
    headers = delivery_headers("pull_request", body)
    headers["X-Hub-Signature-256"] = signature(body, "forged")
    assert sqlite_service.post("pull_request", body=body, headers=headers).status_code == 401
    headers["X-Hub-Signature-256"] = signature(body)
    assert sqlite_service.post("pull_request", body=body, headers=headers).status_code == 400


@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
def test_a_missing_event_or_delivery_header_is_400(sqlite_service: Service, fake_github: FakeGitHub,
                                                   missing: str) -> None:
    body = encode(opened(fake_github))
    headers = delivery_headers("pull_request", body)
    del headers[missing]
    answer = sqlite_service.post("pull_request", body=body, headers=headers)
    assert answer.status_code == 400
    assert sqlite_service.deliveries() == []


@pytest.mark.parametrize("body", [b"{\"action\": ", b"[1, 2]", b"\xff\xfe", b""])
def test_a_body_that_is_no_json_object_is_400(sqlite_service: Service, body: bytes) -> None:
    answer = sqlite_service.post("pull_request", body=body)
    assert answer.status_code == 400
    assert sqlite_service.deliveries() == []


def test_a_payload_without_what_its_event_carries_is_400(sqlite_service: Service) -> None:
    answer = sqlite_service.post("pull_request", {"action": "opened", "repository": {"id": 1}})
    assert answer.status_code == 400
    assert "payload lacks" in answer.json()["message"]
    assert sqlite_service.deliveries() == []


def test_an_oversized_body_is_refused_unread(sqlite_service: Service) -> None:
    body = b" " * (25 * 1024 * 1024 + 1)
    answer = sqlite_service.http.post("/webhooks/github", content=body,
                                      headers=delivery_headers("ping", body))
    assert answer.status_code == 413
    assert sqlite_service.deliveries() == []


def test_a_pull_request_is_queued_202_and_a_redelivery_is_200_with_nothing_queued(
        service: Service, fake_github: FakeGitHub) -> None:
    payload, guid = opened(fake_github), str(uuid.uuid4())
    first = service.post("pull_request", payload, guid=guid)
    assert first.status_code == 202
    assert first.json() == {"result": "queued", "message": "triage", "delivery": guid}
    again = service.post("pull_request", payload, guid=guid)
    assert again.status_code == 200
    assert again.json()["result"] == "duplicate"
    [delivery] = service.deliveries()
    assert (delivery.guid, delivery.status, delivery.action) == (guid, "queued", "opened")
    assert delivery.payload_summary["job"] == "triage"
    assert delivery.payload_summary["numbers"] == [7]
    assert service.queue.huey.pending_count() == 1


def test_concurrent_duplicates_store_one_row_and_queue_one_job(service: Service,
                                                               fake_github: FakeGitHub) -> None:
    body, guid, senders = encode(opened(fake_github)), str(uuid.uuid4()), 12
    start = threading.Barrier(senders)

    def send(_: int) -> int:
        headers = delivery_headers("pull_request", body, guid=guid)
        start.wait()
        return service.http.post("/webhooks/github", content=body, headers=headers).status_code

    with ThreadPoolExecutor(senders) as pool:
        statuses = sorted(pool.map(send, range(senders)))
    assert statuses == [200] * (senders - 1) + [202]
    assert len(service.deliveries()) == 1
    assert service.queue.huey.pending_count() == 1


def test_when_the_queue_is_down_the_answer_is_503_and_no_row_is_left(
        make_settings: Callable[..., Settings], database_url: str, fake_github: FakeGitHub) -> None:
    down = make_service(make_settings(database_url=database_url, QUEUE_URL="redis://127.0.0.1:9/0"))
    payload, guid = opened(fake_github), str(uuid.uuid4())
    try:
        answer = down.post("pull_request", payload, guid=guid)
        assert answer.status_code == 503
        assert "redeliver" in answer.json()["message"]
        assert down.deliveries() == []
    finally:
        down.close()
    # GitHub's redelivery, once the queue is back, is taken like a first delivery
    back = make_service(make_settings(database_url=database_url))
    try:
        assert back.post("pull_request", payload, guid=guid).status_code == 202
        assert [d.status for d in back.deliveries()] == ["queued"]
        assert back.queue.huey.pending_count() == 1
    finally:
        back.close()


@pytest.mark.parametrize(("event", "payload"), [
    ("star", {"action": "created", "starred_at": None}),
    ("pull_request", fixture("pull_request/labeled")),
    ("issue_comment", fixture("issue_comment/created.on-pull-request")),
])
def test_events_without_a_handler_are_200_ignored_and_recorded(sqlite_service: Service, event: str,
                                                               payload: dict[str, object]) -> None:
    answer = sqlite_service.post(event, payload)
    assert answer.status_code == 200
    assert answer.json()["result"] == "ignored"
    [delivery] = sqlite_service.deliveries()
    assert delivery.status == "ignored"
    assert sqlite_service.queue.huey.pending_count() == 0


def test_an_edit_is_triaged_only_when_the_body_or_the_base_changed(sqlite_service: Service) -> None:
    edited = fixture("pull_request/edited")  # a repository webhook's delivery: `changes.body`
    assert sqlite_service.post("pull_request", edited).status_code == 202
    edited["changes"] = {"title": {"from": "An older title"}}
    answer = sqlite_service.post("pull_request", edited)
    assert answer.status_code == 200
    assert answer.json()["message"] == "edited title: cannot change the verdict"
    assert sqlite_service.queue.huey.pending_count() == 1


@pytest.mark.parametrize(("event", "name"), [
    ("pull_request", "pull_request/opened"), ("pull_request", "pull_request/reopened"),
    ("pull_request", "pull_request/synchronize"), ("pull_request", "pull_request/closed.merged"),
    ("pull_request", "pull_request/reopened.from-fork"), ("check_run", "check_run/rerequested"),
    ("check_suite", "check_suite/rerequested"), ("installation", "installation/created"),
    ("installation", "installation/deleted"),
    ("installation_repositories", "installation_repositories/added"),
])
def test_every_handled_real_payload_is_queued(sqlite_service: Service, event: str, name: str) -> None:
    assert sqlite_service.post(event, fixture(name)).status_code == 202


def test_a_requested_action_that_is_not_ours_is_ignored(sqlite_service: Service) -> None:
    answer = sqlite_service.post("check_run", fixture("check_run/requested_action"))
    assert answer.status_code == 200
    assert "not an action of ours" in answer.json()["message"]


def test_installation_events_record_the_installation_and_its_repositories(service: Service) -> None:
    assert service.post("installation", fixture("installation/created")).status_code == 202
    added = fixture("installation_repositories/added")
    assert service.post("installation_repositories", added).status_code == 202
    assert service.drain() == 2
    assert [d.status for d in service.deliveries()] == ["processed", "processed"]
    with session_scope(service.services.sessions, read_only=True) as session:
        installation = session.get(Installation, 957387)
        assert installation is not None
        assert (installation.account_login, installation.state) == ("Codertocat", "active")
        names = sorted(r.full_name for r in session.query(Repository).filter_by(installation_id=957387))
    assert names == ["Codertocat/Hello-World", "Codertocat/Space"]
    deleted = fixture("installation/deleted")
    deleted["installation"]["id"] = 957387  # the same installation, uninstalled
    assert service.post("installation", deleted).status_code == 202
    service.drain()
    with session_scope(service.services.sessions, read_only=True) as session:
        gone = session.get(Installation, 957387)
        assert gone is not None and gone.state == "deleted"
