"""The sticky comment against the fake GitHub: created, edited in place, not re-sent when unchanged, never
confused with someone else's copy of the marker, kept under GitHub's size limit, and never posted twice
when GitHub answers 502 or drops the connection after it created the comment."""

from __future__ import annotations

import pytest

from app.demo.localgithub import FakeGitHub
from app.github import (
    STICKY_MARKER,
    GitHubClient,
    GitHubError,
    RetryPolicy,
    Unconfirmed,
    upsert_sticky_comment,
)
from app.github.comments import COMMENT_LIMIT, fit_comment, sticky_body

HEAD, BASE = "a" * 40, "b" * 40
BOT = "prtriage-test[bot]"
COMMENTS = r"/repos/octo/widgets/issues/(5/comments|comments/\d+)"


@pytest.fixture(autouse=True)
def pull(fake: FakeGitHub) -> None:
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)


def upsert(client: GitHubClient, body: str) -> tuple[str, int]:
    return upsert_sticky_comment(client, "octo", "widgets", 5, body, app_login=BOT)


def test_created_then_updated_in_place_then_left_alone(fake: FakeGitHub, client: GitHubClient):
    created = upsert(client, "**Breaks 2 CI suites**")
    updated = upsert(client, "**Breaks 1 CI suite**")
    fake.clear_log()
    unchanged = upsert(client, "**Breaks 1 CI suite**")

    assert created[0] == "created"
    assert updated == ("updated", created[1]) and unchanged == ("unchanged", created[1])
    [comment] = fake.comments_on("octo/widgets", 5)
    assert comment.author == BOT and comment.id == created[1]
    assert comment.body == f"**Breaks 1 CI suite**\n\n{STICKY_MARKER}"
    assert [request.method for request in fake.calls(route=COMMENTS)] == ["GET"]  # no PATCH, no POST


def test_the_bodies_sent_are_the_descriptions_requests(fake: FakeGitHub, client: GitHubClient):
    upsert(client, "one")
    upsert(client, "two")
    writes = fake.calls("POST", COMMENTS) + fake.calls("PATCH", COMMENTS)
    assert [request.body for request in writes] == [{"body": f"one\n\n{STICKY_MARKER}"},
                                                    {"body": f"two\n\n{STICKY_MARKER}"}]
    assert all(request.schema_errors == [] and request.status in (200, 201) for request in writes)


def test_someone_elses_copy_of_the_marker_is_ignored(fake: FakeGitHub, client: GitHubClient):
    quoted = fake.add_comment("octo/widgets", 5, f"> bot said:\n> {STICKY_MARKER}", author="mallory")
    other_bot = fake.add_comment("octo/widgets", 5, f"mine {STICKY_MARKER}", author="other-app[bot]",
                                 bot=True)

    outcome, comment_id = upsert(client, "verdict")

    assert outcome == "created" and comment_id not in (quoted, other_bot)
    bodies = {comment.id: comment.body for comment in fake.comments_on("octo/widgets", 5)}
    assert bodies[quoted] == f"> bot said:\n> {STICKY_MARKER}"
    assert bodies[other_bot] == f"mine {STICKY_MARKER}"


def test_an_unmarked_comment_of_the_app_is_not_the_sticky_one(fake: FakeGitHub, client: GitHubClient):
    fake.add_comment("octo/widgets", 5, "acknowledged: /triage rerun", author=BOT, bot=True)
    assert upsert(client, "verdict")[0] == "created"


def test_the_sticky_comment_is_found_beyond_the_first_page(fake: FakeGitHub, client: GitHubClient):
    for index in range(120):
        fake.add_comment("octo/widgets", 5, f"discussion {index}", author="alice")
    _, ours = upsert(client, "first verdict")  # the 121st comment: on the second page of 100

    assert upsert(client, "second verdict") == ("updated", ours)
    assert len(fake.calls("GET", r"/repositories/\d+/issues/5/comments")) == 2  # page 2, twice


def test_a_long_body_is_cut_under_the_limit(fake: FakeGitHub, client: GitHubClient):
    body = "**Breaks 300 CI suites**\n\n<details><summary>suites</summary>\n\n" + "".join(
        f"- `suite_{index}`: rejected at arguments.py:{index}\n" for index in range(6000))

    outcome, _ = upsert(client, body)

    [comment] = fake.comments_on("octo/widgets", 5)
    assert outcome == "created" and len(body) > COMMENT_LIMIT
    assert len(comment.body) < COMMENT_LIMIT
    assert comment.body.startswith("**Breaks 300 CI suites**") and comment.body.endswith(STICKY_MARKER)
    assert "more characters did not fit" in comment.body and "</details>" in comment.body


def test_fit_comment_closes_what_the_cut_left_open():
    body = "head\n```\n" + "x = 1\n" * 50
    fitted = fit_comment(body, limit=200)
    assert len(fitted) < 200 and fitted.count("```") == 2
    assert fit_comment("short", limit=200) == "short"


def test_sticky_body_keeps_one_marker_at_the_end():
    assert sticky_body(f"{STICKY_MARKER}\nverdict\n") == f"verdict\n\n{STICKY_MARKER}"


# GitHub sometimes answers 502 (or drops the connection) after it created the comment


CREATE = r"/repos/octo/widgets/issues/5/comments"


@pytest.mark.parametrize("drop", [False, True], ids=["502", "dropped"])
def test_a_creation_github_applied_before_failing_leaves_one_comment(fake: FakeGitHub, client: GitHubClient,
                                                                     sleeps, metrics, drop: bool):
    client.list_issue_comments("octo", "widgets", 5)  # a pooled keep-alive connection for the drop
    fake.clear_log()
    fake.fail_after_applying(drop=drop, method="POST", path=CREATE)

    outcome, comment_id = upsert(client, "**Breaks 2 CI suites**")

    [comment] = fake.comments_on("octo/widgets", 5)
    assert (outcome, comment_id) == ("created", comment.id)
    assert comment.body == f"**Breaks 2 CI suites**\n\n{STICKY_MARKER}" and comment.author == BOT
    # the POST was not repeated: the comments were read again and ours was there
    assert [(request.method, request.status) for request in fake.calls(route=CREATE)] == [
        ("GET", 200), ("POST", 0 if drop else 502), ("GET", 200)]
    assert sleeps == [1.0]
    assert metrics.retries == {"connection_error" if drop else "server_error": 1}
    assert upsert(client, "**Breaks 2 CI suites**") == ("unchanged", comment.id)


@pytest.mark.parametrize("drop", [False, True], ids=["502", "dropped"])
def test_a_creation_github_did_not_apply_is_sent_again_after_a_look(fake: FakeGitHub, client: GitHubClient,
                                                                    sleeps, drop: bool):
    client.list_issue_comments("octo", "widgets", 5)
    fake.clear_log()
    if drop:
        fake.drop_next(method="POST", path=CREATE)
    else:
        fake.fail_next(status=502, method="POST", path=CREATE)

    outcome, comment_id = upsert(client, "verdict")

    [comment] = fake.comments_on("octo/widgets", 5)
    assert (outcome, comment_id) == ("created", comment.id)
    assert comment.body == f"verdict\n\n{STICKY_MARKER}"
    assert [(request.method, request.status) for request in fake.calls(route=CREATE)] == [
        ("GET", 200), ("POST", 0 if drop else 502), ("GET", 200), ("POST", 201)]
    assert sleeps == [1.0]


def test_a_creation_that_keeps_failing_gives_up_after_the_policys_attempts(fake: FakeGitHub,
                                                                          client: GitHubClient, sleeps):
    fake.fail_next(100, status=503, method="POST", path=CREATE)

    with pytest.raises(Unconfirmed) as raised:
        upsert(client, "verdict")

    assert raised.value.status == 503 and isinstance(raised.value, GitHubError)
    assert fake.comments_on("octo/widgets", 5) == []
    assert len(fake.calls("POST", CREATE)) == 5 and len(fake.calls("GET", CREATE)) == 5
    assert sleeps == [1.0, 2.0, 4.0, 8.0]


def test_a_comment_applied_when_even_the_look_failed_is_found_next_time(fake: FakeGitHub,
                                                                        client: GitHubClient,
                                                                        policy: RetryPolicy):
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # the wait before the look: GitHub starts failing then
        if not waits:
            fake.fail_next(5, status=502, method="GET", path=CREATE)
        waits.append(seconds)

    policy.sleep = sleep
    fake.fail_after_applying(method="POST", path=CREATE)  # created, answered 502

    with pytest.raises(GitHubError, match="issues/list-comments: HTTP 502"):
        upsert(client, "verdict")
    [created] = fake.comments_on("octo/widgets", 5)

    assert upsert(client, "new verdict") == ("updated", created.id)  # the next triage edits it
    [comment] = fake.comments_on("octo/widgets", 5)
    assert comment.body == f"new verdict\n\n{STICKY_MARKER}"
    assert len(fake.calls("POST", CREATE)) == 1
