"""GitHub faults over real HTTP: server errors and dropped connections retried with backoff, primary and
secondary rate limits waited out (the waits are recorded, not slept), everything counted."""

from __future__ import annotations

import time

import pytest

from app.demo.localgithub import FakeGitHub
from app.github import (
    GitHubApp,
    GitHubClient,
    GitHubError,
    GitHubMetrics,
    RateLimited,
    RetryPolicy,
    Unconfirmed,
)
from app.github.retry import AttemptFailed, Wait, rate_limit_wait

HEAD, BASE = "a" * 40, "b" * 40
PULL = r"/repos/octo/widgets/pulls/5"


@pytest.fixture
def pull(fake: FakeGitHub) -> None:
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)


@pytest.mark.usefixtures("pull")
def test_a_502_is_retried_after_a_backoff(fake: FakeGitHub, client: GitHubClient, sleeps, metrics):
    fake.fail_next(1, status=502, path=PULL)

    assert client.get_pull("octo", "widgets", 5).number == 5

    assert [request.status for request in fake.calls("GET", PULL)] == [502, 200]
    assert sleeps == [1.0]
    assert metrics.retries == {"server_error": 1}
    assert metrics.api_calls["pulls/get"] == 2


@pytest.mark.usefixtures("pull")
def test_a_dropped_connection_is_retried(fake: FakeGitHub, client: GitHubClient, sleeps, metrics):
    client.get_pull("octo", "widgets", 5)  # a pooled keep-alive connection, then GitHub drops it
    fake.drop_next(2, path=PULL)

    assert client.get_pull("octo", "widgets", 5).number == 5

    assert sleeps == [1.0, 2.0]
    assert metrics.retries == {"connection_error": 2}


@pytest.mark.usefixtures("pull")
def test_server_errors_are_retried_a_bounded_number_of_times(fake: FakeGitHub, client: GitHubClient, sleeps):
    fake.fail_next(100, status=503, path=PULL)

    with pytest.raises(GitHubError) as raised:
        client.get_pull("octo", "widgets", 5)

    assert raised.value.status == 503 and raised.value.operation == "pulls/get"
    assert sleeps == [1.0, 2.0, 4.0, 8.0]
    assert len(fake.calls("GET", PULL)) == 5


def test_backoff_is_capped_and_jittered():
    policy = RetryPolicy(backoff_base=1.0, backoff_max=30.0, jitter=0.25)
    waits = [policy.backoff(retries) for retries in range(8)]
    bases = [1, 2, 4, 8, 16, 30, 30, 30]
    assert all(base <= wait <= base * 1.25 for base, wait in zip(bases, waits, strict=True))


@pytest.mark.usefixtures("pull")
def test_a_write_is_retried_too(fake: FakeGitHub, client: GitHubClient, sleeps):
    fake.fail_next(1, status=500, path=r"/repos/octo/widgets/issues/5/comments")

    client.create_issue_comment("octo", "widgets", 5, "hello")

    assert [request.status for request in fake.calls("POST", r".*/comments")] == [500, 201]
    assert sleeps == [1.0]


@pytest.mark.usefixtures("pull")
@pytest.mark.parametrize("drop", [False, True], ids=["502", "dropped"])
def test_a_write_sent_once_is_not_replayed_after_a_failure_github_may_have_applied(
        fake: FakeGitHub, client: GitHubClient, sleeps, metrics, drop: bool):
    client.get_pull("octo", "widgets", 5)  # a pooled keep-alive connection for the drop
    if drop:
        fake.drop_next(method="POST", path=r".*/comments")
    else:
        fake.fail_next(status=502, method="POST", path=r".*/comments")

    with pytest.raises(Unconfirmed) as raised:
        client.create_issue_comment("octo", "widgets", 5, "hello", send_once=True)

    assert raised.value.status == (None if drop else 502)
    assert len(fake.calls("POST", r".*/comments")) == 1 and sleeps == [] and metrics.retries == {}


@pytest.mark.usefixtures("pull")
def test_a_write_sent_once_still_waits_out_a_rate_limit_or_is_refused(fake: FakeGitHub, client: GitHubClient,
                                                                      sleeps):
    fake.rate_limit_next("secondary", retry_after="3", path=r".*/comments")

    client.create_issue_comment("octo", "widgets", 5, "hello", send_once=True)

    assert [request.status for request in fake.calls("POST", r".*/comments")] == [403, 201]
    assert sleeps == [3.0]
    with pytest.raises(GitHubError) as refused:  # a 4xx was not applied, and is no Unconfirmed
        client.create_issue_comment("octo", "widgets", 5, "x" * 70_000, send_once=True)
    assert refused.value.status == 422 and not isinstance(refused.value, Unconfirmed)


@pytest.mark.usefixtures("pull")
@pytest.mark.parametrize("status", [403, 429])
def test_primary_rate_limit_waits_until_the_reset(fake: FakeGitHub, client: GitHubClient, sleeps, metrics,
                                                  status: int):
    fake.rate_limit_next("primary", status=status, reset_in=120, path=PULL)

    assert client.get_pull("octo", "widgets", 5).number == 5

    [wait] = sleeps
    assert 118 <= wait <= 122  # until X-RateLimit-Reset, plus the second it may fall in
    assert metrics.rate_limit_waits == {"primary": 1}
    assert metrics.rate_limit_wait_seconds == wait


@pytest.mark.usefixtures("pull")
@pytest.mark.parametrize("status", [403, 429])
def test_secondary_rate_limit_honours_retry_after(fake: FakeGitHub, client: GitHubClient, sleeps, metrics,
                                                  status: int):
    fake.rate_limit_next("secondary", status=status, retry_after="7", path=PULL)

    client.get_pull("octo", "widgets", 5)

    assert sleeps == [7.0]
    assert metrics.rate_limit_waits == {"secondary": 1}


@pytest.mark.usefixtures("pull")
def test_secondary_rate_limit_without_headers_waits_a_minute_and_more(fake: FakeGitHub, client: GitHubClient,
                                                                      sleeps):
    fake.rate_limit_next("secondary", times=2, path=PULL)

    client.get_pull("octo", "widgets", 5)

    assert sleeps == [60.0, 120.0]


@pytest.mark.usefixtures("pull")
def test_rate_limits_have_their_own_bounded_budget(fake: FakeGitHub, client: GitHubClient, sleeps):
    fake.rate_limit_next("secondary", times=100, retry_after="1", path=PULL)

    with pytest.raises(GitHubError) as raised:
        client.get_pull("octo", "widgets", 5)

    assert raised.value.status == 403 and sleeps == [1.0, 1.0, 1.0]


@pytest.mark.usefixtures("pull")
def test_a_reset_too_far_away_is_not_waited_for(fake: FakeGitHub, github_app_key, sleeps, metrics):
    policy = RetryPolicy(jitter=0.0, sleep=sleeps.append, metrics=metrics, max_rate_limit_wait=600)
    app = GitHubApp(fake.app_id, github_app_key.private_pem, api_url=fake.url, policy=policy)
    fake.rate_limit_next("primary", reset_in=3000, path=PULL)

    with pytest.raises(RateLimited) as raised:
        GitHubClient(app, 7).get_pull("octo", "widgets", 5)

    assert raised.value.wait_seconds > 600 and sleeps == []
    app.close()


@pytest.mark.usefixtures("pull")
def test_a_403_that_is_no_rate_limit_is_not_retried(fake: FakeGitHub, client: GitHubClient, sleeps):
    fake.fail_next(1, status=403, message="Resource not accessible by integration", path=PULL)

    with pytest.raises(GitHubError, match="Resource not accessible by integration") as raised:
        client.get_pull("octo", "widgets", 5)

    assert raised.value.status == 403 and sleeps == []


@pytest.mark.usefixtures("pull")
def test_a_404_is_not_retried(fake: FakeGitHub, client: GitHubClient, sleeps, metrics):
    assert client.get_issue("octo", "widgets", 404) is None
    assert sleeps == [] and metrics.api_calls["issues/get"] == 1


def test_the_token_endpoint_is_retried_like_any_other(fake: FakeGitHub, client: GitHubClient, sleeps):
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)
    fake.fail_next(1, status=502, path=r"/app/installations/7/access_tokens")

    client.get_pull("octo", "widgets", 5)

    assert sleeps == [1.0] and fake.tokens_issued == [7]


def test_metrics_snapshot_is_plain_data(metrics: GitHubMetrics):
    metrics.record_call("pulls/get")
    metrics.record_rate_limit_wait("primary", 31.0)
    assert metrics.snapshot() == {"api_calls": {"pulls/get": 1}, "retries": {},
                                  "rate_limit_waits": {"primary": 1}, "rate_limit_wait_seconds": 31.0}


# The rules, without HTTP


def _failure(status: int, message: str = "", **headers: str) -> AttemptFailed:
    return AttemptFailed(status, {name.replace("_", "-"): value for name, value in headers.items()}, message)


def test_retry_after_comes_before_the_reset():
    now = time.time()
    failure = _failure(403, Retry_After="5", X_RateLimit_Remaining="0", X_RateLimit_Reset=str(int(now) + 999))
    assert rate_limit_wait(failure, now=now, minimum=60) == Wait("secondary", 5.0)


def test_retry_after_as_an_http_date():
    wait = rate_limit_wait(_failure(429, Retry_After="Wed, 21 Oct 2015 07:28:00 GMT"), now=1445412470.0,
                           minimum=60)
    assert wait == Wait("secondary", 10.0)


def test_a_past_reset_still_waits_a_second():
    now = time.time()
    wait = rate_limit_wait(_failure(403, X_RateLimit_Remaining="0", X_RateLimit_Reset=str(int(now) - 10)),
                           now=now, minimum=60)
    assert wait == Wait("primary", 1.0)


@pytest.mark.parametrize(("failure", "expected"), [
    (_failure(429), Wait("secondary", 60)),
    (_failure(403, "API rate limit exceeded for user ID 1."), Wait("primary", 60)),
    (_failure(403, "You have triggered an abuse detection mechanism."), Wait("secondary", 60)),
    (_failure(403, "Resource not accessible by integration"), None),
    (_failure(403, X_RateLimit_Remaining="12", X_RateLimit_Reset="1"), None),
    (_failure(502), None),
])
def test_what_counts_as_a_rate_limit(failure: AttemptFailed, expected: Wait | None):
    assert rate_limit_wait(failure, now=0.0, minimum=60) == expected
