"""GitHubClient's questions answered by the fake GitHub, in plain data: pull requests, files (paginated
through GitHub's Link headers), commits, contents, issues, comments, the App's login, the rate limit."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from app.demo.localgithub import FakeGitHub
from app.demo.localgithub.rest_shapes import REST
from app.github import (
    CommentInfo,
    CommitInfo,
    GitHubClient,
    GitHubError,
    GitHubMetrics,
    NotFound,
    PullInfo,
    RetryPolicy,
)
from app.github.client import TokenClient, decode_content

HEAD, BASE = "a" * 40, "b" * 40
INSTALLATION = 7  # the fixtures' installation of octo/widgets


def test_get_pull_in_plain_data(fake: FakeGitHub, client: GitHubClient):
    fake.add_pull("octo/widgets", 12, head_sha=HEAD, base_sha=BASE, title="Fail fast", body=None,
                  author="alice", head_ref="fail-fast", files=["a.py", "b.py"], draft=True)

    pull = client.get_pull("octo", "widgets", 12)
    repository_id = fake.repo("octo/widgets").id  # type: ignore[union-attr]

    assert pull == PullInfo(
        number=12, title="Fail fast", body="", author="alice", state="open", draft=True, merged=False,
        merged_at=None, head_sha=HEAD, head_ref="fail-fast", head_repo="octo/widgets", base_sha=BASE,
        base_ref="main", base_repo="octo/widgets", url="https://github.com/octo/widgets/pull/12",
        changed_files=2, github_id=repository_id * 100_000 + 12, base_repo_id=repository_id)
    assert not pull.from_fork


def test_pull_from_a_fork_and_from_a_deleted_fork(fake: FakeGitHub, client: GitHubClient):
    fake.add_pull("octo/widgets", 1, head_sha=HEAD, base_sha=BASE, head_repo="mallory/widgets")
    fake.add_pull("octo/widgets", 2, head_sha=HEAD, base_sha=BASE, head_repo=None)

    fork = client.get_pull("octo", "widgets", 1)
    orphan = client.get_pull("octo", "widgets", 2)

    assert fork.head_repo == "mallory/widgets" and fork.from_fork
    assert orphan.head_repo is None and orphan.from_fork


def test_merged_pull(fake: FakeGitHub, client: GitHubClient):
    fake.add_pull("octo/widgets", 3, head_sha=HEAD, base_sha=BASE, state="closed", merged=True,
                  merged_at="2026-01-02T03:04:05Z")

    pull = client.get_pull("octo", "widgets", 3)

    assert pull.merged and pull.state == "closed"
    assert pull.merged_at == datetime.fromisoformat("2026-01-02T03:04:05+00:00")


def test_list_files_follows_three_pages_of_links(fake: FakeGitHub, client: GitHubClient,
                                                 metrics: GitHubMetrics):
    names = [f"pkg/module_{i:03}.py" for i in range(250)]
    fake.add_pull("octo/widgets", 4, head_sha=HEAD, base_sha=BASE, files=names)

    assert client.list_files("octo", "widgets", 4) == names

    pages = fake.calls("GET", r"/(repos/octo/widgets|repositories/\d+)/pulls/4/files")
    assert [(request.route.split("/pulls")[0].split("/")[1], request.query) for request in pages] == [
        ("repos", {"per_page": "100"}),
        ("repositories", {"per_page": "100", "page": "2"}),
        ("repositories", {"per_page": "100", "page": "3"}),
    ]
    assert metrics.api_calls["pulls/list-files"] == 3


def test_list_files_names_both_paths_of_a_rename(fake: FakeGitHub, client: GitHubClient):
    fake.add_pull("octo/widgets", 4, head_sha=HEAD, base_sha=BASE, files=[
        "train.py", {"filename": "args/check.py", "status": "renamed", "previous_filename": "validate.py"}])

    assert client.list_files("octo", "widgets", 4) == ["train.py", "args/check.py", "validate.py"]


def test_list_commits(fake: FakeGitHub, client: GitHubClient):
    revert = "Revert #2204\n\nfollow-up #2210 will fix it"
    fake.add_pull("octo/widgets", 4, head_sha=HEAD, base_sha=BASE,
                  commits=[("c" * 40, "Add the assert"), ("d" * 40, revert)])

    assert client.list_commits("octo", "widgets", 4) == [CommitInfo("c" * 40, "Add the assert"),
                                                         CommitInfo("d" * 40, revert)]


def test_merge_base_asks_the_compare_api(fake: FakeGitHub, client: GitHubClient):
    fake.add_repo("octo/widgets")
    fork_point, other = "c" * 40, "d" * 40
    fake.set_merge_base("octo/widgets", BASE, HEAD, fork_point)

    assert client.merge_base("octo", "widgets", BASE, HEAD) == fork_point  # the base branch moved on
    assert client.merge_base("octo", "widgets", BASE, other) == BASE  # the head is ahead of the base
    [request] = fake.calls("GET", rf"/repos/octo/widgets/compare/{BASE}\.\.\.{HEAD}")
    assert request.query == {}


def test_merge_base_of_unrelated_histories_is_not_found(fake: FakeGitHub, client: GitHubClient):
    fake.add_repo("octo/widgets")
    fake.set_merge_base("octo/widgets", BASE, HEAD, None)

    with pytest.raises(NotFound):
        client.merge_base("octo", "widgets", BASE, HEAD)
    with pytest.raises(ValueError, match="not a commit sha"):
        client.merge_base("octo", "widgets", "main...evil", HEAD)


def test_get_file_reads_the_contents_api(fake: FakeGitHub, client: GitHubClient):
    policy = "paths:\n  - miles/utils/arguments.py\n" * 40  # several base64 lines
    fake.set_file("octo/widgets", BASE, ".github/pr-triage.yml", policy)
    fake.set_file("octo/widgets", HEAD, ".github/pr-triage.yml", "paths: []\n")

    assert client.get_file("octo", "widgets", ".github/pr-triage.yml", BASE) == policy.encode()
    assert client.get_file("octo", "widgets", ".github/pr-triage.yml", HEAD) == b"paths: []\n"
    assert client.get_file("octo", "widgets", ".github/absent.yml", BASE) is None
    assert client.get_file("octo", "widgets", ".github", BASE) is None  # a directory
    [request] = fake.calls("GET", r"/repos/octo/widgets/contents/\.github/pr-triage\.yml")[:1]
    assert request.query == {"ref": BASE}


def test_decode_content_takes_the_examples_literal_backslash_n_too():
    path = REST / "examples" / "repos.get-content.200.response-if-content-is-a-file.json"
    example = json.loads(path.read_text())
    assert "\\n" in example["content"]

    text = decode_content(example["content"]).decode("utf-8", "replace")  # its first line has a bad byte

    assert "To deploy, push to `main`" in text


def test_get_issue_tells_issues_and_pull_requests_apart(fake: FakeGitHub, client: GitHubClient):
    fake.add_issue("octo/widgets", 812, title="Flaky test", author="bob", state="closed",
                   state_reason="completed")
    fake.add_pull("octo/widgets", 2204, head_sha=HEAD, base_sha=BASE, state="closed", merged=True,
                  merged_at="2026-01-02T03:04:05Z")
    fake.add_pull("octo/widgets", 2210, head_sha=HEAD, base_sha=BASE, draft=True)

    issue = client.get_issue("octo", "widgets", 812)
    merged = client.get_issue("octo", "widgets", 2204)
    draft = client.get_issue("octo", "widgets", 2210)

    assert issue is not None and not issue.is_pull_request and issue.state_reason == "completed"
    assert issue.url == "https://github.com/octo/widgets/issues/812"
    assert merged is not None and merged.is_pull_request and merged.merged_at is not None
    assert draft is not None and draft.draft and draft.merged_at is None and draft.state == "open"
    assert client.get_issue("octo", "widgets", 9999) is None
    assert client.get_issue("someone", "private", 1) is None  # not visible to this installation


def test_list_issue_comments_with_their_authors(fake: FakeGitHub, client: GitHubClient):
    fake.add_pull("octo/widgets", 4, head_sha=HEAD, base_sha=BASE)
    first = fake.add_comment("octo/widgets", 4, "depends on #812", author="alice")
    second = fake.add_comment("octo/widgets", 4, "hello", author="prtriage-test[bot]", bot=True)

    comments = client.list_issue_comments("octo", "widgets", 4)

    assert [(comment.id, comment.author, comment.body) for comment in comments] == [
        (first, "alice", "depends on #812"), (second, "prtriage-test[bot]", "hello")]
    assert all(isinstance(comment, CommentInfo) and comment.created_at for comment in comments)


def test_app_login_is_asked_once(fake: FakeGitHub, client: GitHubClient):
    assert client.app_login() == "prtriage-test[bot]"
    assert client.app_login() == "prtriage-test[bot]"
    assert len(fake.calls("GET", r"/app")) == 1


def test_rate_limit(fake: FakeGitHub, client: GitHubClient):
    budget = client.rate_limit()
    assert budget.limit == 5000 and 0 < budget.remaining <= 5000 and budget.reset.tzinfo is not None


def test_names_that_are_no_github_names_are_refused_unsent(fake: FakeGitHub, client: GitHubClient):
    for owner, repo in [("..", "widgets"), ("octo", ".."), ("octo/../x", "y"), ("octo", "")]:
        with pytest.raises(ValueError, match="not a GitHub owner or repository name"):
            client.get_issue(owner, repo, 1)
    with pytest.raises(ValueError, match="not a path inside the repository"):
        client.get_file("octo", "widgets", "../../etc/passwd", "main")
    assert fake.requests == []


def test_changed_files_carry_their_patches_as_given(fake: FakeGitHub, client: GitHubClient):
    patch = "@@ -1,2 +1,3 @@\n x = 1\n+# TODO(#9): later\n y = 2"
    fake.add_pull("octo/widgets", 8, head_sha=HEAD, base_sha=BASE, files=[
        {"filename": "a.py", "status": "modified", "patch": patch}, "logo.png"])

    changed = client.list_changed_files("octo", "widgets", 8)

    # a file given without one has none (GitHub: binary, too large), not the REST example's
    assert [(c.filename, c.status, c.patch) for c in changed] == [("a.py", "modified", patch),
                                                                 ("logo.png", "modified", None)]


def test_a_token_client_reads_with_its_fixed_token(fake: FakeGitHub, policy: RetryPolicy):
    fake.add_pull("octo/widgets", 12, head_sha=HEAD, base_sha=BASE, title="Fail fast")
    token_client = TokenClient(fake.issue_token(INSTALLATION), api_url=fake.url, policy=policy)
    try:
        assert token_client.get_pull("octo", "widgets", 12).title == "Fail fast"
        assert [r.auth for r in fake.calls("GET", r"/repos/octo/widgets/pulls/12")] == ["token"]
        assert not fake.calls("POST", r"/app/installations/.*")  # no App, no installation token bought
    finally:
        token_client.close()


def test_a_refused_token_is_not_asked_again(fake: FakeGitHub, policy: RetryPolicy):
    token_client = TokenClient("ghs_" + "x" * 36, api_url=fake.url, policy=policy)
    try:
        with pytest.raises(GitHubError) as refused:
            token_client.get_pull("octo", "widgets", 12)
        assert refused.value.status == 401
        assert len(fake.calls("GET", r"/repos/octo/widgets/pulls/12")) == 1
        assert "ghs_" not in repr(token_client)
    finally:
        token_client.close()
