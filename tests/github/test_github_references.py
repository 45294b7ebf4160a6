"""Resolving the references of a PR's text against the fake GitHub (real HTTP on loopback): pull requests and
issues in every state, other repositories, refusals, the cache, and reverted commits back to their PR."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from app.analysis.core.policy import Followups
from app.analysis.followups.followup_findings import Resolution, followup_findings
from app.analysis.followups.followups import find_references
from app.analysis.followups.references import Text, pull_texts
from app.demo.localgithub import AppKey, FakeGitHub
from app.github import GitHubApp, GitHubClient, GitHubError, RetryPolicy
from app.github.reference_states import (
    ResolutionCache,
    pull_of_commit,
    resolve_reference,
    resolve_references,
    web_host,
    with_commits_resolved,
)

HEAD, BASE = "a" * 40, "b" * 40
MERGED_AT = "2026-01-02T03:04:05Z"
INSTALLATION = 7


class Clock:
    """Monotonic seconds a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(clock: Clock) -> ResolutionCache:
    return ResolutionCache(ttl=300, clock=clock)


def issue_calls(fake: FakeGitHub) -> int:
    return len(fake.calls("GET", r"/repos/[^/]+/[^/]+/(issues|pulls)/\d+"))


@pytest.mark.parametrize(("fields", "expected"), [
    ({}, Resolution("open", url="https://github.com/octo/widgets/pull/5")),
    ({"draft": True}, Resolution("draft", url="https://github.com/octo/widgets/pull/5")),
    ({"state": "closed", "merged": True, "merged_at": MERGED_AT},
     Resolution("merged", merged_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
                url="https://github.com/octo/widgets/pull/5")),
    ({"state": "closed"}, Resolution("closed_unmerged", url="https://github.com/octo/widgets/pull/5")),
])
def test_pull_request_states(fake: FakeGitHub, client: GitHubClient, cache: ResolutionCache,
                             fields: dict[str, object], expected: Resolution) -> None:
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE, **fields)

    assert resolve_reference(client, "octo", "widgets", 5, cache=cache) == expected
    assert [call.route for call in fake.calls("GET")] == ["/repos/octo/widgets/issues/5",
                                                          "/repos/octo/widgets/pulls/5"]


@pytest.mark.parametrize(("state", "reason", "expected"), [
    ("open", None, "open"),
    ("closed", "completed", "completed"),
    ("closed", None, "completed"),  # closed before GitHub recorded reasons
    ("closed", "not_planned", "not_planned"),
    ("closed", "duplicate", "not_planned"),
])
def test_issue_states(fake: FakeGitHub, client: GitHubClient, cache: ResolutionCache, state: str,
                      reason: str | None, expected: str) -> None:
    fake.add_issue("octo/widgets", 8, state=state, state_reason=reason)

    resolution = resolve_reference(client, "octo", "widgets", 8, cache=cache)

    assert resolution == Resolution(expected, is_pull_request=False,  # type: ignore[arg-type]
                                    url="https://github.com/octo/widgets/issues/8")
    assert [call.route for call in fake.calls("GET")] == ["/repos/octo/widgets/issues/8"]  # no pulls call


def test_not_found_and_other_repositories(fake: FakeGitHub, client: GitHubClient,
                                          cache: ResolutionCache) -> None:
    fake.add_repo("octo/gadgets", installation_id=INSTALLATION)
    fake.add_pull("octo/gadgets", 3, head_sha=HEAD, base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT)
    fake.add_repo("acme/private", installation_id=8)  # another installation's: GitHub says 404
    fake.add_pull("acme/private", 4, head_sha=HEAD, base_sha=BASE)

    assert resolve_reference(client, "octo", "gadgets", 3, cache=cache).state == "merged"
    assert resolve_reference(client, "acme", "private", 4, cache=cache) == Resolution("not_found")
    assert resolve_reference(client, "octo", "widgets", 404, cache=cache) == Resolution("not_found")
    assert resolve_reference(client, "octo", "..", 1, cache=cache) == Resolution("not_found")  # never asked
    assert all(".." not in call.path for call in fake.calls())


def test_forbidden_is_no_access(fake: FakeGitHub, client: GitHubClient, cache: ResolutionCache) -> None:
    fake.add_issue("octo/widgets", 9)
    fake.fail_next(status=403, message="Resource protected by organization SAML enforcement.",
                   path=r"/issues/9$")

    assert resolve_reference(client, "octo", "widgets", 9, cache=cache) == Resolution("no_access")


def test_errors_are_raised_and_not_cached(fake: FakeGitHub, client: GitHubClient,
                                          cache: ResolutionCache) -> None:
    fake.add_issue("octo/widgets", 9)
    fake.fail_next(times=5, status=502, path=r"/issues/9$")

    with pytest.raises(GitHubError) as raised:
        resolve_reference(client, "octo", "widgets", 9, cache=cache)

    assert raised.value.status == 502
    assert resolve_reference(client, "octo", "widgets", 9, cache=cache).state == "open"


def test_a_rate_limit_the_policy_gives_up_on_is_no_refusal(fake: FakeGitHub, client: GitHubClient,
                                                           cache: ResolutionCache) -> None:
    fake.add_issue("octo/widgets", 9)
    fake.rate_limit_next("secondary", times=10, path=r"/issues/9$")

    with pytest.raises(GitHubError) as raised:
        resolve_reference(client, "octo", "widgets", 9, cache=cache)

    assert raised.value.status == 403 and "rate limit" in raised.value.message


def test_cached_for_the_ttl(fake: FakeGitHub, client: GitHubClient, cache: ResolutionCache,
                            clock: Clock) -> None:
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)

    assert resolve_reference(client, "octo", "widgets", 5, cache=cache).state == "open"
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT)
    clock.now += 299
    assert resolve_reference(client, "OCTO", "Widgets", 5, cache=cache).state == "open"  # cached
    assert issue_calls(fake) == 2

    clock.now += 1
    assert resolve_reference(client, "octo", "widgets", 5, cache=cache).state == "merged"
    assert issue_calls(fake) == 4


def test_forget_and_bounded_size(fake: FakeGitHub, client: GitHubClient, clock: Clock) -> None:
    small = ResolutionCache(ttl=300, clock=clock, max_entries=2)
    for number in (1, 2, 3):
        fake.add_issue("octo/widgets", number)
        resolve_reference(client, "octo", "widgets", number, cache=small)

    assert small.get(INSTALLATION, "octo/widgets#1") is None  # the oldest went first
    assert small.get(INSTALLATION, "octo/widgets#3") == Resolution(
        "open", is_pull_request=False, url="https://github.com/octo/widgets/issues/3")
    small.forget("Octo/Widgets#3")
    assert small.get(INSTALLATION, "octo/widgets#3") is None
    assert small.get(INSTALLATION, "octo/widgets#2") is not None


def test_the_cache_is_per_installation(fake: FakeGitHub, app: GitHubApp, client: GitHubClient,
                                       cache: ResolutionCache) -> None:
    fake.add_repo("acme/private", installation_id=8)
    fake.add_issue("acme/private", 1)
    other = GitHubClient(app, 8)
    try:
        assert resolve_reference(other, "acme", "private", 1, cache=cache).state == "open"
        assert resolve_reference(client, "acme", "private", 1, cache=cache).state == "not_found"
    finally:
        other.close()


def test_resolve_references_asks_only_what_matters(fake: FakeGitHub, client: GitHubClient,
                                                   cache: ResolutionCache) -> None:
    fake.add_repo("octo/gadgets", installation_id=INSTALLATION)
    fake.add_pull("octo/widgets", 1, head_sha=HEAD, base_sha=BASE, draft=True)
    fake.add_issue("octo/gadgets", 2, state="closed", state_reason="not_planned")
    fake.add_pull("octo/widgets", 3, head_sha=HEAD, base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT)
    body = "Depends on #1. Tracked in octo/gadgets#2. Reverts #3. See #4, fixes #5."
    references = find_references([Text("body", body)], owner="octo", repo="widgets", number=99)

    resolved = resolve_references(client, references, cache=cache)

    assert {target: resolution.state for target, resolution in resolved.items()} == {
        "octo/widgets#1": "draft", "octo/gadgets#2": "not_planned", "octo/widgets#3": "merged"}
    assert not fake.calls("GET", r".*/(issues|pulls)/[45]")
    findings = followup_findings(references, resolved, Followups())
    assert [(f.kind, f.severity) for f in findings] == [("unmerged_prerequisite", "blocking"),
                                                        ("abandoned_followup", "warning")]


def test_resolve_references_is_bounded(fake: FakeGitHub, client: GitHubClient, cache: ResolutionCache,
                                       caplog: pytest.LogCaptureFixture) -> None:
    body = "Depends on " + ", ".join(f"#{n}" for n in range(1, 8))
    references = find_references([Text("body", body)], owner="octo", repo="widgets", number=99)

    resolved = resolve_references(client, references, cache=cache, limit=3)

    assert list(resolved) == ["octo/widgets#1", "octo/widgets#2", "octo/widgets#3"]
    assert issue_calls(fake) == 3
    assert "the rest stay unresolved" in caplog.text


# Reverted commits


def test_pull_of_a_commit(fake: FakeGitHub, client: GitHubClient) -> None:
    squash = "c" * 40
    fake.add_pull("octo/widgets", 2190, head_sha=HEAD, base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT, merge_commit_sha=squash, commits=[("d" * 40, "Add the assert")])
    fake.add_pull("octo/widgets", 2195, head_sha=HEAD, base_sha=BASE, commits=[("e" * 40, "Try again")])

    assert pull_of_commit(client, "octo", "widgets", squash) == 2190
    assert pull_of_commit(client, "octo", "widgets", squash[:12]) == 2190
    assert pull_of_commit(client, "octo", "widgets", "d" * 40) == 2190
    assert pull_of_commit(client, "octo", "widgets", "e" * 40) == 2195
    assert pull_of_commit(client, "octo", "widgets", "f" * 40) is None
    assert fake.calls("GET", rf"/repos/octo/widgets/commits/{squash}/pulls")


def test_unknown_commit_answer_is_none(fake: FakeGitHub, client: GitHubClient) -> None:
    fake.fail_next(status=422, message="No commit found for SHA: 1234567", path=r"/commits/")

    assert pull_of_commit(client, "octo", "widgets", "1234567") is None
    with pytest.raises(ValueError, match="not a commit sha"):
        client.list_commit_pulls("octo", "widgets", "HEAD~1")


def test_with_commits_resolved(fake: FakeGitHub, client: GitHubClient) -> None:
    fake.add_pull("octo/widgets", 2190, head_sha=HEAD, base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT, merge_commit_sha="c" * 40)
    fake.add_pull("octo/widgets", 2201, head_sha=HEAD, base_sha=BASE,
                  commits=[("1" * 40, "Try a fix"), ("2" * 40, f"Revert\n\nThis reverts commit {'1' * 40}.")])
    texts = [Text("commit", f"Revert the assert\n\nThis reverts commit {'c' * 40}."),
             Text("commit", f"This reverts commit {'9' * 40}."), Text("body", "See #2190."),
             Text("commit", f"This reverts commit {'1' * 40}.")]
    references = find_references(texts, owner="octo", repo="widgets", number=2201)

    resolved = with_commits_resolved(client, references, number=2201)

    assert [(r.label, r.kind, r.sentence) for r in resolved] == [
        ("#2190", "revert", f"This reverts commit {'c' * 40}."),
        (f"commit {'9' * 12}", "revert", f"This reverts commit {'9' * 40}.")]


# GitHub Enterprise


def test_web_host() -> None:
    assert web_host("https://api.github.com") == "github.com"
    assert web_host("https://ghe.example/api/v3") == "ghe.example"
    assert web_host("https://GHE.example:8443/api/v3/") == "ghe.example:8443"
    assert web_host("https://api.acme.ghe.com") == "acme.ghe.com"


@pytest.fixture
def enterprise(fake_github_factory: Callable[..., FakeGitHub], github_app_key: AppKey,
               policy: RetryPolicy) -> Iterator[tuple[FakeGitHub, GitHubClient]]:
    fake = fake_github_factory(prefix="/api/v3")
    fake.add_repo("octo/widgets", installation_id=INSTALLATION)
    app = GitHubApp(fake.app_id, github_app_key.private_pem, api_url=fake.url, policy=policy)
    client = GitHubClient(app, INSTALLATION)
    yield fake, client
    client.close()
    app.close()


def test_enterprise_links_resolve_through_the_api_prefix(enterprise: tuple[FakeGitHub, GitHubClient],
                                                         cache: ResolutionCache) -> None:
    fake, client = enterprise
    fake.add_pull("octo/widgets", 2204, head_sha=HEAD, base_sha=BASE, state="closed")
    host = web_host(fake.url)  # 127.0.0.1:port: the fake serves pages' links on its own host
    body = f"A follow-up PR, http://{host}/octo/widgets/pull/2204, would add the fail-fast instead."
    references = find_references([Text("body", body)], owner="octo", repo="widgets", number=2201,
                                 web_hosts=[host])

    resolved = resolve_references(client, references, cache=cache)

    assert [(r.label, r.kind) for r in references] == [("#2204", "followup")]
    assert resolved["octo/widgets#2204"].state == "closed_unmerged"
    assert all(call.path.startswith("/api/v3/") for call in fake.calls())


# The real case, end to end


def test_the_revert_whose_followup_never_merged(fake: FakeGitHub, client: GitHubClient,
                                                cache: ResolutionCache) -> None:
    fake.add_repo("radixark/miles", installation_id=INSTALLATION)
    fake.add_pull("radixark/miles", 2190, head_sha=HEAD, base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT, merge_commit_sha="9d1c4e2f" * 5)
    fake.add_pull("radixark/miles", 2204, head_sha=HEAD, base_sha=BASE, state="closed",
                  title="Fail fast at the weight update")
    body = ("Reverts radixark/miles#2190\n\nThe assert was over-broad: `--colocate` turns on offload.\n\n"
            "A follow-up PR #2204 would add a fail-fast at the real failure point instead.")
    texts = pull_texts(title='Revert "Reject --disable-weights-backuper with colocate (#2190)"', body=body,
                       commits=[f"Revert\n\nThis reverts commit {'9d1c4e2f' * 5}."], comments=[],
                       author="alice")
    references = with_commits_resolved(client, find_references(texts, owner="radixark", repo="miles",
                                                               number=2201), number=2201)

    resolved = resolve_references(client, references, cache=cache)
    [finding] = followup_findings(references, resolved, Followups())

    assert [(r.label, r.kind) for r in references] == [("#2190", "revert"), ("#2204", "followup")]
    assert finding.kind == "abandoned_followup"
    assert finding.message == ("Promised follow-up #2204 was closed without being merged: the promise was "
                               "abandoned, and what it was to fix is still open (“A follow-up PR #2204 would "
                               "add a fail-fast at the real failure point instead.”).")
    assert "Fail fast at the weight update" not in finding.message  # titles may be private: never quoted
