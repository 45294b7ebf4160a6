"""The state of the pull requests and issues a PR's text refers to, asked of GitHub and cached for minutes.

    resolve_reference(client, "octo", "widgets", 2204)         -> Resolution("draft", ...)
    resolve_references(client, references)                     -> {"octo/widgets#2204": Resolution, ...}
    with_commits_resolved(client, references, number=2201)     "This reverts commit SHA" -> its PR
    web_host(settings.github_api_url)                          -> the host whose links count ("ghe.example")

Other repositories are asked with the same installation client: one the App is not installed on answers
404 like a missing number (GitHub does not tell them apart), so it comes back not_found; a 403 (an
organisation's SSO or IP allow list, a blocked repository) comes back no_access.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from app.analysis.followups.followup_findings import Resolution
from app.analysis.followups.followups import PRIORITY, TextReference
from app.github.client import GitHubClient
from app.github.errors import GitHubError, NotFound, RateLimited
from app.github.github_models import IssueInfo, PullInfo

DEFAULT_TTL = 300.0  # seconds: a triage asks once; the resync (every 15 minutes) sees fresh states
MAX_ENTRIES = 4096
MAX_RESOLVED = 50  # references resolved per call
RESOLVED_KINDS = ("prerequisite", "followup", "revert")  # the kinds whose state matters to someone

log = logging.getLogger(__name__)


class ResolutionCache:
    """Resolutions by installation and `owner/repo#N`, each kept TTL seconds (CLOCK: monotonic seconds).

    Keyed by installation as well: one installation must not learn through the cache what only another
    may see. Errors are never cached; the oldest entries go first when MAX_ENTRIES is reached.
    """

    def __init__(self, *, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic,
                 max_entries: int = MAX_ENTRIES) -> None:
        self.ttl = ttl
        self.clock = clock
        self.max_entries = max_entries
        self._entries: dict[tuple[int, str], tuple[float, Resolution]] = {}
        self._lock = threading.Lock()  # the worker may resolve from several threads

    def get(self, installation_id: int, target: str) -> Resolution | None:
        with self._lock:
            entry = self._entries.get((installation_id, target.lower()))
            if entry is None:
                return None
            if self.clock() - entry[0] >= self.ttl:
                del self._entries[(installation_id, target.lower())]
                return None
            return entry[1]

    def put(self, installation_id: int, target: str, resolution: Resolution) -> None:
        with self._lock:
            self._entries.pop((installation_id, target.lower()), None)  # re-insert: newest last
            self._entries[(installation_id, target.lower())] = (self.clock(), resolution)
            while len(self._entries) > self.max_entries:
                del self._entries[next(iter(self._entries))]

    def clear(self) -> None:
        """Forget everything (a test's service must not see another test's GitHub)."""
        with self._lock:
            self._entries.clear()

    def forget(self, target: str) -> None:
        """Drop TARGET for every installation: a webhook said it changed (merged, closed, reopened)."""
        with self._lock:
            for key in [key for key in self._entries if key[1] == target.lower()]:
                del self._entries[key]


CACHE = ResolutionCache()  # the process's cache, used when a caller passes none


def web_host(api_url: str) -> str:
    """The host whose links are this GitHub's pages: `github.com` for `https://api.github.com`,
    `ghe.example` for `https://ghe.example/api/v3`, `acme.ghe.com` for `https://api.acme.ghe.com`."""
    parts = urlsplit(api_url)
    host = parts.netloc.lower()
    if parts.path.rstrip("/").startswith("/api"):
        return host  # GitHub Enterprise Server: the API lives under the web host
    return host.removeprefix("api.")


def resolve_reference(client: GitHubClient, owner: str, repo: str, number: int, *,
                      cache: ResolutionCache | None = None) -> Resolution:
    """The state of owner/repo#number, an issue or a pull request, as the installation sees it.

    Raises GitHubError for what says nothing about the reference (server errors, rate limits).
    """
    cache = CACHE if cache is None else cache
    target = f"{owner}/{repo}#{number}"
    cached = cache.get(client.installation_id, target)
    if cached is not None:
        return cached
    resolution = _ask(client, owner, repo, number)
    cache.put(client.installation_id, target, resolution)
    return resolution


def resolve_references(client: GitHubClient, references: Iterable[TextReference], *,
                       cache: ResolutionCache | None = None, limit: int = MAX_RESOLVED,
                       ) -> dict[str, Resolution]:
    """Resolutions of the prerequisites, follow-ups and reverted PRs among REFERENCES, keyed by
    `TextReference.target` (mentions and closing keywords cost no API call; nor do unresolved commits).

    The first LIMIT only: a body naming 500 "dependencies" must not spend a thousand calls of the
    installation's hourly budget. The rest stay unresolved, which gives no finding.
    """
    resolved: dict[str, Resolution] = {}
    for reference in references:
        if reference.kind not in RESOLVED_KINDS or reference.number is None:
            continue
        if len(resolved) == limit:
            log.warning("more than %d references to resolve: the rest stay unresolved", limit)
            break
        resolved[reference.target] = resolve_reference(client, reference.owner, reference.repo,
                                                        reference.number, cache=cache)
    return resolved


def _ask(client: GitHubClient, owner: str, repo: str, number: int) -> Resolution:
    try:
        issue = client.get_issue(owner, repo, number)
        if issue is None:
            return Resolution("not_found")
        if not issue.is_pull_request:
            return _issue_resolution(issue)
        # the pulls API, not the issue's `pull_request` part: older GitHub Enterprise versions leave
        # merged_at out there, and only the pull says draft for certain
        return _pull_resolution(client.get_pull(owner, repo, number))
    except NotFound:
        return Resolution("not_found")
    except ValueError:  # not a GitHub name (`owner/..#3` in someone's text): nothing to ask
        return Resolution("not_found")
    except GitHubError as exc:
        if _refused(exc):
            return Resolution("no_access")
        raise


def _refused(exc: GitHubError) -> bool:
    """A refusal to show the object; not a rate limit the retry policy gave up waiting for."""
    if isinstance(exc, RateLimited) or "rate limit" in exc.message.lower():
        return False
    return exc.status in (403, 451)


def _issue_resolution(issue: IssueInfo) -> Resolution:
    if issue.state == "open":
        return Resolution("open", is_pull_request=False, url=issue.url)
    # "duplicate" moved the work to another issue we do not follow: as good as not planned here
    planned = issue.state_reason not in ("not_planned", "duplicate")
    return Resolution("completed" if planned else "not_planned", is_pull_request=False, url=issue.url)


def _pull_resolution(pull: PullInfo) -> Resolution:
    if pull.merged or pull.merged_at is not None:
        return Resolution("merged", merged_at=pull.merged_at, url=pull.url)
    if pull.state == "closed":
        return Resolution("closed_unmerged", url=pull.url)
    return Resolution("draft" if pull.draft else "open", url=pull.url)


def pull_of_commit(client: GitHubClient, owner: str, repo: str, sha: str) -> int | None:
    """The pull request that brought commit SHA into owner/repo: the earliest merged one into that
    repository, else any that contains it; None when GitHub knows none (or not the commit)."""
    try:
        pulls = client.list_commit_pulls(owner, repo, sha)
    except NotFound:
        return None
    except GitHubError as exc:
        if exc.status == 422 or _refused(exc):  # 422: "No commit found for SHA"
            return None
        raise
    here = [pull for pull in pulls if pull.base_repo.lower() == f"{owner}/{repo}".lower()]
    merged = sorted((pull for pull in here if pull.merged_at is not None),
                    key=lambda pull: (pull.merged_at, pull.number))
    chosen = merged or here or pulls
    return chosen[0].number if chosen else None


def with_commits_resolved(client: GitHubClient, references: Iterable[TextReference], *,
                          number: int) -> list[TextReference]:
    """REFERENCES with each reverted commit replaced by the PR that brought it in, its sentence kept; a
    commit no PR is found for stays a commit reference, and one of the PR being read (NUMBER: a commit
    reverted within the same PR) is dropped. One reference per target, the strongest kind, as before."""
    result: dict[str, TextReference] = {}
    for reference in references:
        if reference.sha is not None:
            found = pull_of_commit(client, reference.owner, reference.repo, reference.sha)
            if found is not None and reference.local and found == number:
                continue
            if found is not None:
                reference = dataclasses.replace(reference, number=found, sha=None, url=None)
        known = result.setdefault(reference.target.lower(), reference)
        if PRIORITY[reference.kind] < PRIORITY[known.kind]:
            result[reference.target.lower()] = reference
    return list(result.values())
