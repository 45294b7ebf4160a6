"""Risk windows and comment commands through the running service: signed deliveries over HTTP, the queue's
jobs (pipeline), the periodic resync task, against the fake GitHub; on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest

from app.demo.localgithub import FakeGitHub
from app.github.reference_states import CACHE
from app.processes.task_queue import every
from app.store.models import RiskWindow
from app.store.session import session_scope

from .conftest import BASE as MILES_BASE
from .conftest import MILES, Service
from .payloads import pull_request_event, sha
from .test_comment_commands import comment_event
from .test_windows import BASE, INCIDENT_BODY, REPO, merge

HEAD = sha("head 21")


@pytest.fixture(autouse=True)
def fresh_resolutions() -> Iterator[None]:
    """The process's resolution cache, empty for each test: every test has a fake GitHub of its own."""
    CACHE.clear()
    yield
    CACHE.clear()


def windows_of(service: Service) -> list[tuple[str, str | None, str]]:
    with session_scope(service.services.sessions, read_only=True) as session:
        return [(w.state, w.close_reason, w.pull_request.title)
                for w in session.query(RiskWindow).order_by(RiskWindow.id)]


def post_merge(service: Service, fake: FakeGitHub, number: int) -> None:
    payload = pull_request_event(fake, "closed", variant="merged", full_name=REPO, number=number,
                                 head_sha=sha(f"head {number}"), base_sha=BASE)
    assert service.post("pull_request", payload).status_code == 202
    service.drain()


def test_merges_open_and_close_windows_through_the_service(service: Service, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    fake_github.add_pull(REPO, 2204, head_sha=sha("f"), base_sha=BASE, draft=True)
    merge(fake_github, 2170, title="Drop the assert", body=INCIDENT_BODY)
    post_merge(service, fake_github, 2170)
    assert windows_of(service) == [("open", None, "Drop the assert")]

    merge(fake_github, 2204)
    post_merge(service, fake_github, 2204)
    assert windows_of(service) == [("closed", "follow-up #2204 merged", "Drop the assert")]
    assert [d.status for d in service.deliveries()] == ["processed", "processed"]


def test_a_comment_command_is_carried_out_by_the_queue(service: Service, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    fake_github.add_pull(REPO, 21, head_sha=HEAD, base_sha=BASE, author="author")
    payload = comment_event(fake_github, "/triage help", author="someone")
    payload["issue"]["number"] = 21
    assert service.post("issue_comment", payload).status_code == 202
    service.drain()
    [reply] = [note for note in fake_github.comments_on(REPO, 21) if note.author == fake_github.bot_login]
    assert reply.body.startswith("Commands for this PR")

    quiet = comment_event(fake_github, "thanks!", author="someone")
    answer = service.post("issue_comment", quiet)
    assert (answer.status_code, answer.json()["message"]) == (200, "no /triage command")


def test_the_resync_task_closes_a_window_whose_merge_webhook_was_lost(service: Service,
                                                                     fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    fake_github.add_pull(REPO, 2204, head_sha=sha("f"), base_sha=BASE)
    merge(fake_github, 2170, body=INCIDENT_BODY)
    post_merge(service, fake_github, 2170)
    merge(fake_github, 2204)  # no webhook
    service.queue.resync()
    service.drain()
    assert windows_of(service)[0][:2] == ("closed", f"{REPO}#2204 landed (found by the periodic resync)")


def test_the_resync_runs_every_configured_number_of_minutes() -> None:
    fifteen = every(900)
    due = [minute for minute in range(60) if fifteen(datetime(2026, 3, 1, 12, minute))]
    assert due == [0, 15, 30, 45]
    assert all(every(10)(datetime(2026, 3, 1, 12, minute)) for minute in range(60))


def test_a_triage_reports_an_unmerged_prerequisite_in_the_comment_and_the_check(
        service: Service, miles: FakeGitHub) -> None:
    fake, head = miles, sha("docs with a prerequisite")
    fake.add_pull(MILES, 812, head_sha=sha("prerequisite"), base_sha=MILES_BASE)
    fake.add_pull(MILES, 13, head_sha=head, base_sha=MILES_BASE, files=["README.md"],
                  body="Depends on #812 (the new launcher). A follow-up, #900, will add the docs.")
    payload = pull_request_event(fake, "opened", full_name=MILES, number=13, head_sha=head,
                                 base_sha=MILES_BASE)
    assert service.post("pull_request", payload).status_code == 202
    service.drain()

    [check] = fake.check_runs(MILES)
    assert (check.conclusion, check.output["title"]) == ("failure", "1 blocking finding")
    [comment] = fake.comments_on(MILES, 13)
    assert comment.body.startswith("**❌ This pull request has 1 blocking finding.**")
    assert "Prerequisite \\#812 is open, not merged yet" in comment.body
    assert "Could not check promised follow-up \\#900: not found" in comment.body  # #900 does not exist
    assert fake.calls("GET", rf"/repos/{MILES}/tarball/.*") == []  # still the file-list fast path
