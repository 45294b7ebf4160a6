"""`/triage` comment commands end to end: the real `issue_comment` payload decided by the comments router,
carried out against the fake GitHub over real HTTP (permission, reactions, replies, check runs) and the
store on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.github import GitHubApp, RetryPolicy, create_check_run, reply_marker
from app.service.services import Services
from app.store.models import Finding, RiskWindow, RunEvent, TriageRun
from app.store.queries import (
    fail_run,
    finish_run,
    mark_running,
    open_window,
    run_with_suites,
    start_run,
    upsert_installation,
    upsert_pull_request,
    upsert_reference,
    upsert_repository,
)
from app.store.session import session_scope
from app.triage.command_parser import HELP
from app.triage.command_runner import PullComment, run_comment
from app.webhooks.comment_events import router
from app.webhooks.router import Ignored, Job

from .payloads import fixture, point_at, sha

REPO = "acme/widgets"
NUMBER = 21
HEAD, BASE = sha("head"), sha("base")
BLOCKING = {"kind": "suite_rejected", "severity": "blocking", "message": "5 LoRA suites are rejected",
            "suites": [], "scripts": []}


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO, installation_id=1)
    fake_github.add_pull(REPO, NUMBER, head_sha=HEAD, base_sha=BASE, author="author")
    fake_github.set_role(REPO, "maintainer", "maintain")
    fake_github.set_role(REPO, "triager", "triage")
    return fake_github


def comment_event(fake: FakeGitHub, body: str, *, author: str = "maintainer", kind: str = "User",
                  on_pull: bool = True) -> dict[str, Any]:
    """The shared issue_comment payload, on REPO#NUMBER, by AUTHOR, saying BODY (a comment the fake has)."""
    repo = fake.repo(REPO)
    assert repo is not None
    payload = point_at(fixture("issue_comment/created.on-pull-request"), fake, REPO, repo.id)
    payload["issue"]["number"] = NUMBER
    if not on_pull:
        del payload["issue"]["pull_request"]
    comment_id = fake.add_comment(REPO, NUMBER, body, author=author, bot=kind == "Bot")
    payload["comment"].update(id=comment_id, body=body)
    payload["comment"]["user"].update(login=author, type=kind)
    payload["installation"] = {"id": 1}
    return payload


def command(services: Services, fake: FakeGitHub, body: str, **who: Any) -> tuple[int, list[int]]:
    """Post the comment through the router and carry out its job: (comment id, runs started)."""
    payload = comment_event(fake, body, **who)
    job = router.decide("issue_comment", payload)
    assert isinstance(job, Job) and job.kind == "command"
    comment = PullComment.from_job(1, job.data)
    return comment.comment_id, run_comment(services, services.client(1), comment)


def stored_pull(services: Services, fake: FakeGitHub) -> int:
    repo = fake.repo(REPO)
    assert repo is not None
    with services.writing() as session:
        upsert_installation(session, installation_id=1, account_login="acme")
        upsert_repository(session, repository_id=repo.id, full_name=REPO, private=False, installation_id=1)
        return upsert_pull_request(session, repository_id=repo.id, number=NUMBER, title="A change",
                                   author="author", url=f"https://github.com/{REPO}/pull/{NUMBER}",
                                   head_sha=HEAD, base_sha=BASE, base_ref="main", state="open").id


def blocked_run(services: Services, fake: FakeGitHub) -> int:
    pr_id = stored_pull(services, fake)
    with services.writing() as session:
        run = start_run(session, pr=pr_id, head_sha=HEAD, base_sha=BASE).run
        finish_run(session, run_id=run.id, conclusion="failure", summary={}, suites=[], findings=[BLOCKING])
        return run.id


def replies(fake: FakeGitHub) -> list[str]:
    """The App's replies, each without the hidden marker that names the comment it answers."""
    texts = []
    for note in fake.comments_on(REPO, NUMBER):
        if note.author == fake.bot_login:
            text, marker = note.body.rsplit("\n\n", 1)
            assert re.fullmatch(r"<!-- prtriage:reply-to:\d+ -->", marker)
            texts.append(text)
    return texts


@pytest.mark.parametrize(("event", "reason"), [
    ({"kind": "Bot", "author": "prtriage-test[bot]"}, "a bot's comment"),
    ({"kind": "Bot", "author": "dependabot[bot]"}, "a bot's comment"),
    ({"on_pull": False}, "a comment on an issue, not on a pull request"),
])
def test_bots_and_issue_comments_are_ignored(fake: FakeGitHub, event: dict[str, Any], reason: str) -> None:
    assert router.decide("issue_comment", comment_event(fake, "/triage rerun", **event)) == Ignored(reason)


def test_the_shared_payload_itself_has_no_command(fake: FakeGitHub) -> None:
    payload = fixture("issue_comment/created.on-pull-request")
    assert router.decide("issue_comment", payload) == Ignored("no /triage command")


def test_help_is_a_reply(services: Services, fake: FakeGitHub) -> None:
    command(services, fake, "/triage help", author="someone")
    assert replies(fake) == [HELP]


def test_a_command_carried_out_again_is_answered_once(services: Services, fake: FakeGitHub) -> None:
    payload = comment_event(fake, "/triage help", author="someone")
    job = router.decide("issue_comment", payload)
    assert isinstance(job, Job)
    comment = PullComment.from_job(1, job.data)
    run_comment(services, services.client(1), comment)
    run_comment(services, services.client(1), comment)  # a retried job, or the delivery redelivered
    assert replies(fake) == [HELP]
    [reply] = [note for note in fake.comments_on(REPO, NUMBER) if note.author == fake.bot_login]
    assert reply.body.endswith(reply_marker(comment.comment_id))
    command(services, fake, "/triage help", author="someone")  # asked again in a new comment: a new reply
    assert replies(fake) == [HELP, HELP]


@pytest.mark.parametrize("drop", [False, True], ids=["502", "dropped"])
def test_a_reply_github_applied_before_failing_is_not_posted_twice(
        make_settings: Callable[..., Settings], database_url: str, fake: FakeGitHub, drop: bool) -> None:
    settings = make_settings(database_url=database_url)
    app = GitHubApp.from_settings(settings, policy=RetryPolicy(sleep=lambda _: None))
    services = Services.from_settings(settings, github_app=app)
    try:
        fake.fail_after_applying(drop=drop, method="POST", path=rf"/repos/{REPO}/issues/{NUMBER}/comments$")
        command(services, fake, "/triage help", author="someone")
        assert replies(fake) == [HELP]
        assert len(fake.calls("POST", rf"/repos/{REPO}/issues/{NUMBER}/comments")) == 1
    finally:
        services.close()


def test_an_invalid_command_gets_a_puzzled_reaction_and_says_why(services: Services,
                                                                   fake: FakeGitHub) -> None:
    comment_id, _ = command(services, fake, "/triage ack", author="someone")
    assert fake.reactions_on(comment_id) == ["confused"]
    assert replies(fake) == ["@someone a reason is required: `/triage ack <reason>`. `/triage help` lists "
                             "the commands."]


def test_ack_by_a_writer_turns_the_check_to_success_saying_who_and_why(services: Services,
                                                                       fake: FakeGitHub) -> None:
    run_id = blocked_run(services, fake)
    comment_id, _ = command(services, fake, "/triage ack the GPU suites never pass --colocate")

    assert fake.reactions_on(comment_id) == ["+1"]
    [check] = fake.check_runs(REPO)
    assert (check.head_sha, check.status, check.conclusion) == (HEAD, "completed", "success")
    assert check.output["title"] == "Blocking findings acknowledged by @maintainer"
    assert "the GPU suites never pass --colocate" in check.output["summary"]
    assert "5 LoRA suites are rejected" in check.output["summary"]
    with session_scope(services.sessions, read_only=True) as session:
        [finding] = session.query(Finding).filter_by(run_id=run_id).all()
        assert (finding.acknowledged_by, finding.ack_reason) == ("maintainer",
                                                                 "the GPU suites never pass --colocate")


@pytest.mark.parametrize("author", ["triager", "author", "stranger"])
def test_ack_without_write_permission_is_politely_refused(services: Services, fake: FakeGitHub,
                                                          author: str) -> None:
    run_id = blocked_run(services, fake)
    command(services, fake, "/triage ack trust me", author=author)
    assert replies(fake) == [f"Sorry @{author}, `/triage ack` needs write permission on {REPO}; please ask a "
                             "maintainer to do it."]
    assert fake.check_runs(REPO) == []
    with session_scope(services.sessions, read_only=True) as session:
        assert session.query(Finding).filter_by(run_id=run_id).one().acknowledged_by is None


def test_ack_with_nothing_blocking_says_so(services: Services, fake: FakeGitHub) -> None:
    stored_pull(services, fake)
    command(services, fake, "/triage ack fine")
    assert replies(fake) == ["@maintainer there is no finished triage to acknowledge yet."]


def test_rerun_by_the_author_starts_a_run(services: Services, fake: FakeGitHub) -> None:
    comment_id, runs = command(services, fake, "/triage rerun", author="author")
    assert fake.reactions_on(comment_id) == ["rocket"]
    with session_scope(services.sessions, read_only=True) as session:
        assert [(run.id, run.head_sha, run.status) for run in session.query(TriageRun)] == [
            (runs[0], HEAD, "queued")]
    command(services, fake, "/triage rerun", author="stranger")
    assert replies(fake) == ["Sorry @stranger, only the PR's author and people with write permission can ask "
                             "for a new triage."]


def test_close_window_by_a_writer_records_who_and_why(services: Services, fake: FakeGitHub) -> None:
    pr_id = stored_pull(services, fake)
    with services.writing() as session:
        awaited = upsert_reference(session, pr_id=pr_id, target_owner="acme", target_repo="widgets",
                                   target_number=2204, kind="followup", sentence="#2204 will add it")
        window_id = open_window(session, pr=pr_id, risk="risk", awaiting=[awaited]).id

    missed, _ = command(services, fake, "/triage close-window #9 wrong number")
    assert replies(fake) == ["@maintainer this PR has no open risk window matching #9 in acme/widgets."]
    closed, _ = command(services, fake, "/triage close-window #2204 superseded by #2223")

    assert fake.reactions_on(closed) == ["+1"] and fake.reactions_on(missed) == []
    with session_scope(services.sessions, read_only=True) as session:
        window = session.get(RiskWindow, window_id)
        assert window is not None
        assert (window.state, window.close_reason) == ("closed", "superseded by #2223")
        assert [(e.actor, e.what) for e in window.events][-1] == ("maintainer", "closed: superseded by #2223")


def test_rerun_cancels_the_check_of_the_run_it_supersedes(services: Services, fake: FakeGitHub) -> None:
    pr_id = stored_pull(services, fake)
    check_run_id = create_check_run(services.client(1), "acme", "widgets", name="PR risk triage",
                                    head_sha=HEAD, external_id="prtriage-run-1")
    with services.writing() as session:
        older = start_run(session, pr=pr_id, head_sha=HEAD, base_sha=BASE).run.id
        mark_running(session, run_id=older, check_run_id=check_run_id)
    _, runs = command(services, fake, "/triage rerun", author="maintainer")
    [check] = fake.check_runs(REPO)
    assert (check.status, check.conclusion) == ("completed", "cancelled")
    with session_scope(services.sessions, read_only=True) as session:
        assert [(run.id, run.status) for run in session.query(TriageRun).order_by(TriageRun.id)] == [
            (older, "superseded"), (runs[0], "queued")]


def unconcluded_run(services: Services, fake: FakeGitHub) -> int:
    """A run whose analysis could not run: failed, its check completed action_required."""
    pr_id = stored_pull(services, fake)
    with services.writing() as session:
        run = start_run(session, pr=pr_id, head_sha=HEAD, base_sha=BASE).run
        fail_run(session, run_id=run.id, error="no sandbox: bubblewrap cannot create a user namespace")
        return run.id


@pytest.mark.parametrize("author", ["maintainer", "writer", "admin"])
def test_ack_of_a_run_that_could_not_conclude_lets_it_through_recorded(services: Services, fake: FakeGitHub,
                                                                       author: str) -> None:
    fake.set_role(REPO, "writer", "write")
    fake.set_role(REPO, "admin", "admin")
    run_id = unconcluded_run(services, fake)
    comment_id, _ = command(services, fake, "/triage ack sandbox host down; reviewed by hand", author=author)

    assert fake.reactions_on(comment_id) == ["+1"]
    [check] = fake.check_runs(REPO)
    assert (check.head_sha, check.status, check.conclusion) == (HEAD, "completed", "success")
    reason = "sandbox host down; reviewed by hand"
    assert check.output["title"] == f"Not analysed; acknowledged by @{author}: {reason}"
    assert "no sandbox: bubblewrap cannot create a user namespace" in check.output["summary"]
    with session_scope(services.sessions, read_only=True) as session:
        detail = run_with_suites(session, run_id=run_id)
        assert detail is not None
        assert (detail["acknowledged_by"], detail["ack_reason"]) == (author, reason)
        assert detail["acknowledged_at"] is not None
        [event] = detail["events"]
        assert (event["actor"], event["what"]) == (
            author, f"acknowledged (could not conclude): {reason}")

    command(services, fake, "/triage ack again", author=author)  # once is enough
    assert replies(fake) == [f"@{author} the latest triage was acknowledged already, by @{author}."]
    assert len(fake.check_runs(REPO)) == 1


@pytest.mark.parametrize("author", ["triager", "author", "stranger"])
def test_ack_of_a_run_that_could_not_conclude_needs_a_maintainer(services: Services, fake: FakeGitHub,
                                                                 author: str) -> None:
    run_id = unconcluded_run(services, fake)
    command(services, fake, "/triage ack let me in", author=author)
    assert replies(fake) == [f"Sorry @{author}, `/triage ack` needs write permission on {REPO}; please ask a "
                             "maintainer to do it."]
    assert fake.check_runs(REPO) == []
    with session_scope(services.sessions, read_only=True) as session:
        run = session.get(TriageRun, run_id)
        assert run is not None and run.acknowledged_by is None
        assert session.query(RunEvent).count() == 0
