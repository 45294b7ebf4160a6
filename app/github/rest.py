"""One REST request through PyGithub's requester under the retry policy, and pagination by Link headers.

PyGithub supplies the transport (connection pool, base URL with a GitHub Enterprise path prefix,
Authorization from its `Auth` classes, error answers as exceptions); its own retries and write throttling
are off, so that every call here is exactly one HTTP request and the policy alone decides what to retry,
what to wait for, and what to count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import requests
from github import Auth, Github, GithubException

from app.github import logsafe
from app.github.retry import AttemptFailed, RetryPolicy

logsafe.install()  # before the first request can log anything

API_VERSION = "2022-11-28"
USER_AGENT = "prtriage"
ACCEPT = {"Accept": "application/vnd.github+json"}
PER_PAGE = 100
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


class InstallationAuth(Auth.Auth):
    """An installation token asked of TOKENS on every request, so a long-lived client never sends an
    expired one; the token itself is never stored here."""

    def __init__(self, tokens: Callable[[], str]) -> None:
        self._tokens = tokens

    @property
    def token_type(self) -> str:
        return "token"

    @property
    def token(self) -> str:
        return self._tokens()

    @property
    def _masked_token(self) -> str:
        return "(installation token removed)"

    def __repr__(self) -> str:
        return "InstallationAuth()"


_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def repo_path(owner: str, repo: str) -> str:
    """`/repos/{owner}/{repo}`. Names can come from text a PR author wrote (`owner/repo#N`): one that is
    no GitHub name (`..`, a slash) is refused rather than allowed to reach another endpoint."""
    for name in (owner, repo):
        if not _NAME.fullmatch(name) or name in (".", ".."):
            raise ValueError(f"not a GitHub owner or repository name: {name!r}")
    return f"/repos/{owner}/{repo}"


def _message(data: Any) -> str:
    if isinstance(data, Mapping):
        return str(data.get("message") or "")
    return ""


class Rest:
    """REST calls to one API base URL with one credential (the App's JWT, or an installation's token)."""

    def __init__(self, api_url: str, auth: Auth.Auth, policy: RetryPolicy, *, timeout: int = 30) -> None:
        self.api_url = api_url.rstrip("/")
        self.policy = policy
        self._github = Github(base_url=self.api_url, auth=auth, timeout=timeout, user_agent=USER_AGENT,
                              per_page=PER_PAGE, retry=None, seconds_between_requests=None,
                              seconds_between_writes=None, api_version=API_VERSION)

    def __repr__(self) -> str:
        return f"Rest({self.api_url!r})"

    def request(self, operation: str, verb: str, url: str, *, params: Mapping[str, Any] | None = None,
                body: Mapping[str, Any] | None = None, replay: bool = True) -> tuple[dict[str, Any], Any]:
        """(response headers, decoded JSON) of one call; URL is a path under the base or an absolute URL
        GitHub gave (a Link). Raises GitHubError (NotFound for 404/410) once the policy gives up; without
        REPLAY, Unconfirmed at the first failure GitHub may have applied (see RetryPolicy.run)."""
        requester = self._github.requester

        def attempt() -> tuple[dict[str, Any], Any]:
            try:
                return requester.requestJsonAndCheck(verb, url, parameters=dict(params) if params else None,
                                                     headers=dict(ACCEPT), input=body)
            except GithubException as exc:
                raise AttemptFailed(exc.status, exc.headers or {}, _message(exc.data)) from None
            except requests.RequestException as exc:
                raise AttemptFailed(None, {}, type(exc).__name__) from None
            except ValueError:  # a body cut short: as good as no answer
                raise AttemptFailed(None, {}, "malformed JSON answer") from None

        return self.policy.run(operation, attempt, replay=replay)

    def paginate(self, operation: str, url: str, *, params: Mapping[str, Any] | None = None,
                 items: str | None = None) -> Iterator[Any]:
        """Every item of a listing, following the `next` Link GitHub gives (not computed page numbers).
        ITEMS names the list in a page that is an object (`check_runs` of `{"total_count", "check_runs"}`)."""
        next_url: str | None = url
        page_params: Mapping[str, Any] | None = {"per_page": PER_PAGE, **(params or {})}
        while next_url is not None:
            headers, page = self.request(operation, "GET", next_url, params=page_params)
            yield from page[items] if items is not None else page
            match = _NEXT_LINK.search(headers.get("link", ""))
            next_url = match.group(1) if match else None
            page_params = None  # the next link carries the whole query

    def close(self) -> None:
        self._github.close()
