"""The App's credentials against the fake GitHub: JWT, installation tokens and their cache, GitHub
Enterprise base paths, and secrets kept out of logs, reprs and errors."""

from __future__ import annotations

import logging
import re
import time

import httpx
import jwt
import pytest

from app.config import ConfigError, Settings
from app.demo.localgithub import FakeGitHub, make_app_key
from app.github import GitHubApp, GitHubClient, GitHubError, NotFound, RetryPolicy, download_tree
from app.github.app_auth import InstallationToken

TOKEN_ROUTE = r"/app/installations/7/access_tokens"
HEAD, BASE = "a" * 40, "b" * 40


def test_installation_token_is_bought_with_the_jwt_once_and_reused(fake: FakeGitHub, client: GitHubClient):
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)

    client.get_pull("octo", "widgets", 5)
    client.get_pull("octo", "widgets", 5)
    client.list_files("octo", "widgets", 5)

    [mint] = fake.calls("POST", TOKEN_ROUTE)
    assert mint.auth == "jwt" and mint.status == 201 and mint.body is None
    pulls = fake.calls("GET", r"/repos/octo/widgets/pulls/5.*")
    assert [request.auth for request in pulls] == ["token"] * 3
    assert fake.tokens_issued == [7]


def test_the_token_is_renewed_five_minutes_before_it_expires(fake: FakeGitHub, github_app_key, policy):
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)
    now = [time.time()]
    fake.clock = lambda: now[0]
    app = GitHubApp(fake.app_id, github_app_key.private_pem, api_url=fake.url, policy=policy,
                    clock=lambda: now[0])
    client = GitHubClient(app, 7)

    client.get_pull("octo", "widgets", 5)
    now[0] += fake.token_ttl - 301  # 5 min + 1 s before expiry: still good
    client.get_pull("octo", "widgets", 5)
    assert fake.tokens_issued == [7]
    now[0] += 2  # inside the last five minutes
    client.get_pull("octo", "widgets", 5)
    assert fake.tokens_issued == [7, 7]
    app.close()


def test_tokens_are_cached_per_installation(fake: FakeGitHub, app: GitHubApp):
    fake.add_repo("other/thing", installation_id=8)
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)
    fake.add_pull("other/thing", 1, head_sha=HEAD, base_sha=BASE)

    for _ in range(2):
        GitHubClient(app, 7).get_pull("octo", "widgets", 5)
        GitHubClient(app, 8).get_pull("other", "thing", 1)

    assert sorted(fake.tokens_issued) == [7, 8]


def test_a_token_github_refuses_is_replaced_once(fake: FakeGitHub, client: GitHubClient):
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)
    client.get_pull("octo", "widgets", 5)
    fake.tokens.clear()  # revoked behind our back

    assert client.get_pull("octo", "widgets", 5).number == 5
    assert fake.tokens_issued == [7, 7]
    statuses = [request.status for request in fake.calls("GET", r"/repos/octo/widgets/pulls/5")]
    assert statuses == [200, 401, 200]


def test_the_jwt_is_backdated_60_seconds_and_signed_with_the_app_key(fake: FakeGitHub, client: GitHubClient):
    before = time.time()
    client.app_login()
    [request] = fake.calls("GET", r"/app")
    claims = request.jwt_claims
    assert request.status == 200 and claims is not None
    assert claims["iss"] == str(fake.app_id)
    assert before - 62 <= claims["iat"] <= time.time() - 59
    assert 0 < claims["exp"] - claims["iat"] <= 600


def test_the_fake_refuses_a_jwt_that_is_not_backdated_or_not_ours(fake: FakeGitHub, github_app_key):
    now = int(time.time())
    fresh = jwt.encode({"iat": now, "exp": now + 300, "iss": str(fake.app_id)}, github_app_key.private_pem,
                       algorithm="RS256")
    stranger = jwt.encode({"iat": now - 60, "exp": now + 240, "iss": str(fake.app_id)},
                          make_app_key().private_pem, algorithm="RS256")
    answers = [httpx.get(f"{fake.url}/app", headers={"Authorization": f"Bearer {token}"})
               for token in (fresh, stranger)]
    assert [answer.status_code for answer in answers] == [401, 401]
    assert "backdated" in answers[0].json()["message"]


def test_a_key_github_does_not_know_is_an_error_without_retries(fake: FakeGitHub, policy, sleeps):
    app = GitHubApp(fake.app_id, make_app_key().private_pem, api_url=fake.url, policy=policy)
    with pytest.raises(GitHubError) as raised:
        GitHubClient(app, 7).get_pull("octo", "widgets", 5)
    assert raised.value.status == 401 and raised.value.operation == "apps/create-installation-access-token"
    assert sleeps == []
    app.close()


def test_github_enterprise_base_path(fake_github_factory, github_app_key, policy, tmp_path):
    fake = fake_github_factory(prefix="/api/v3")
    fake.add_repo("octo/widgets", installation_id=7)
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "train.py").write_text("print('train')\n")
    fake.add_tarball("octo/widgets", HEAD, tmp_path / "source")
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE, files=[f"f{i}.py" for i in range(150)])
    fake.set_file("octo/widgets", BASE, ".github/pr-triage.yml", "paths: [x]\n")
    settings = Settings(GITHUB_APP_ID=fake.app_id, GITHUB_PRIVATE_KEY=github_app_key.private_pem,
                        GITHUB_API_URL=fake.url)
    app = GitHubApp.from_settings(settings, policy=policy)
    client = GitHubClient(app, 7)

    assert fake.url.endswith("/api/v3")
    assert client.get_pull("octo", "widgets", 5).head_sha == HEAD
    assert len(client.list_files("octo", "widgets", 5)) == 150
    assert client.get_file("octo", "widgets", ".github/pr-triage.yml", BASE) == b"paths: [x]\n"
    assert client.app_login() == "prtriage-test[bot]"
    tree = download_tree(client, "octo", "widgets", HEAD, tmp_path / "cache")
    assert (tree / "train.py").read_text() == "print('train')\n"

    paths = [request.path for request in fake.calls()]
    assert len(paths) == 8 and all(path.startswith("/api/v3/") for path in paths), paths
    assert "/api/v3/repos/octo/widgets/git/trees/" + HEAD in paths  # the tarball is checked against it
    assert [request.status for request in fake.calls()] == [201, 200, 200, 200, 200, 200, 200, 302]
    app.close()


def test_settings_name_what_is_missing_or_wrong(fake: FakeGitHub):
    with pytest.raises(ConfigError, match="GITHUB_APP_ID"):
        GitHubApp.from_settings(Settings(GITHUB_PRIVATE_KEY="x"))
    not_a_key = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
    with pytest.raises(ConfigError, match="GITHUB_PRIVATE_KEY") as raised:
        GitHubApp.from_settings(Settings(GITHUB_APP_ID=1, GITHUB_PRIVATE_KEY=not_a_key))
    assert "bm90IGEga2V5" not in str(raised.value)


JWT_SHAPE = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")


def test_secrets_stay_out_of_logs_reprs_and_errors(fake: FakeGitHub, app: GitHubApp, client: GitHubClient,
                                                   github_app_key, caplog):
    caplog.set_level(logging.DEBUG)
    fake.add_pull("octo/widgets", 5, head_sha=HEAD, base_sha=BASE)
    fake.fail_next(1, path=r"/repos/octo/widgets/pulls/5")

    client.get_pull("octo", "widgets", 5)
    with pytest.raises(NotFound) as raised:
        client.get_pull("octo", "widgets", 6)

    [token] = fake.tokens
    private = github_app_key.private_pem.splitlines()[1]
    shown = "\n".join([caplog.text, str(raised.value), repr(raised.value), repr(app), repr(client),
                       repr(app.tokens), repr(app.credentials),
                       repr(InstallationToken(7, token, app.tokens._tokens[7].expires_at))])
    assert "retrying in 1.0 s" in caplog.text  # the logs were captured, at every level
    assert token not in shown
    assert private not in shown and "PRIVATE KEY" not in shown
    assert not JWT_SHAPE.search(shown)


def test_a_retry_policy_is_shared_by_the_app_and_its_clients(app: GitHubApp, client: GitHubClient):
    assert client.policy is app.policy
    assert isinstance(app.policy, RetryPolicy)


def test_the_installation_of_a_repository(fake: FakeGitHub, app: GitHubApp):
    assert app.installation_for("octo", "widgets") == 7
    with pytest.raises(NotFound):
        app.installation_for("octo", "unknown")
    assert {request.auth for request in fake.calls()} == {"jwt"}


def test_an_app_whose_slug_github_leaves_out_is_a_clear_error(fake: FakeGitHub, app: GitHubApp):
    fake.app_slug = ""  # GitHub's description makes `slug` optional in GET /app
    with pytest.raises(GitHubError, match="GET /app named no slug"):
        app.app_login()
