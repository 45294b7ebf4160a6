"""One installation's view of the REST API: questions in, plain data out (see models.py)."""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from app.github.app_auth import GitHubApp
from app.github.errors import GitHubError, NotFound
from app.github.github_models import (
    ChangedFile,
    CheckRunInfo,
    CommentInfo,
    CommitInfo,
    CommitTree,
    Comparison,
    IssueInfo,
    PullInfo,
    RateLimit,
)
from app.github.rest import ACCEPT, API_VERSION, USER_AGENT, InstallationAuth, Rest, repo_path
from app.github.retry import RetryPolicy

log = logging.getLogger(__name__)

_WHITESPACE = re.compile(r"\s+")
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")


def decode_content(content: str) -> bytes:
    """The bytes of a contents-API `content`: base64 in lines. GitHub's own examples also show the two
    characters `\\` `n` between lines; a backslash is never base64, so both kinds of break are dropped."""
    text = _WHITESPACE.sub("", content.replace("\\n", ""))
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"contents API answer is not base64: {exc}") from None


class GitHubClient:
    """The REST calls of one installation; every method is one question, answered in plain data.

    Errors: GitHubError (NotFound for 404/410) once the App's retry policy gives up; Unconfirmed for a
    write sent once only (see `send_once`). A token GitHub refuses (401) is dropped from the cache and the
    call made once more with a fresh one.
    """

    def __init__(self, app: GitHubApp, installation_id: int) -> None:
        self.app = app
        self.installation_id = installation_id
        self.policy = app.policy
        self._rest = Rest(app.api_url, InstallationAuth(self._token), app.policy, timeout=app.timeout)

    def __repr__(self) -> str:
        return f"GitHubClient(installation_id={self.installation_id}, api_url={self.app.api_url!r})"

    def _token(self) -> str:
        return self.app.installation_token(self.installation_id)

    def _call(self, operation: str, verb: str, url: str, *, params: Mapping[str, Any] | None = None,
              body: Mapping[str, Any] | None = None, replay: bool = True) -> Any:
        self._token()  # mint outside the attempt, so a failed mint is not counted as this operation's call
        try:
            return self._rest.request(operation, verb, url, params=params, body=body, replay=replay)[1]
        except GitHubError as exc:
            if exc.status != 401 or not self._forget_token():
                raise  # a refused token: nothing was applied, so even a write may go again with a new one
            return self._rest.request(operation, verb, url, params=params, body=body, replay=replay)[1]

    def _forget_token(self) -> bool:
        """Drop the token GitHub refused; whether a fresh one can be had."""
        self.app.tokens.forget(self.installation_id)
        return True

    def _list(self, operation: str, url: str, *, params: Mapping[str, Any] | None = None,
              items: str | None = None) -> list[Any]:
        self._token()
        return list(self._rest.paginate(operation, url, params=params, items=items))

    # Pull requests

    def get_pull(self, owner: str, repo: str, number: int) -> PullInfo:
        pull = self._call("pulls/get", "GET", f"{repo_path(owner, repo)}/pulls/{int(number)}")
        return PullInfo.from_api(pull)

    def list_files(self, owner: str, repo: str, number: int) -> list[str]:
        """Every path the pull request touches, in GitHub's order: for a rename both the new and the old
        path (a validation file moved away is a change to validation). GitHub lists at most 3000 files."""
        paths: list[str] = []
        for changed in self.list_changed_files(owner, repo, number):
            paths.append(changed.filename)
            if changed.previous_filename:
                paths.append(changed.previous_filename)
        return list(dict.fromkeys(paths))

    def list_changed_files(self, owner: str, repo: str, number: int) -> list[ChangedFile]:
        """The pull request's files with their patches, in GitHub's order (at most 3000 files)."""
        listed = self._list("pulls/list-files", f"{repo_path(owner, repo)}/pulls/{int(number)}/files")
        return [ChangedFile.from_api(changed) for changed in listed]

    def list_commits(self, owner: str, repo: str, number: int) -> list[CommitInfo]:
        """The pull request's commits, oldest first (GitHub lists at most 250)."""
        commits = self._list("pulls/list-commits", f"{repo_path(owner, repo)}/pulls/{int(number)}/commits")
        return [CommitInfo.from_api(commit) for commit in commits]

    def list_commit_pulls(self, owner: str, repo: str, sha: str) -> list[PullInfo]:
        """The pull requests that contain commit SHA or merged it (for "This reverts commit SHA").

        GitHub answers 422 for a commit it does not know: raised as GitHubError, like any refusal.
        """
        if not _SHA.fullmatch(sha):
            raise ValueError(f"not a commit sha: {sha!r}")
        url = f"{repo_path(owner, repo)}/commits/{sha}/pulls"
        return [PullInfo.from_api(pull) for pull in self._list("repos/list-pulls-of-commit", url)]

    def merge_base(self, owner: str, repo: str, base_sha: str, head_sha: str) -> str:
        """The merge base of BASE_SHA and HEAD_SHA (compare API, `BASE...HEAD`): the commit the head's
        branch forked from, so that changes landed on the base since then are not taken for the head's.

        GitHub answers 404 when the two have no common history: raised as NotFound."""
        for sha in (base_sha, head_sha):
            if not _SHA.fullmatch(sha):
                raise ValueError(f"not a commit sha: {sha!r}")
        url = f"{repo_path(owner, repo)}/compare/{base_sha}...{head_sha}"
        answer = self._call("repos/compare-commits-with-basehead", "GET", url)
        found = answer.get("merge_base_commit") if isinstance(answer, dict) else None
        merge_base = found.get("sha") if isinstance(found, dict) else None
        if not isinstance(merge_base, str) or not _SHA.fullmatch(merge_base):
            raise GitHubError("repos/compare-commits-with-basehead", 200, "the answer names no merge base")
        return merge_base

    def commits_between(self, owner: str, repo: str, base_sha: str, head_sha: str) -> list[str]:
        """The shas of the commits after BASE_SHA up to HEAD_SHA, oldest first (compare API; GitHub lists
        at most 250): where a default branch's breaking commit is searched."""
        for sha in (base_sha, head_sha):
            if not _SHA.fullmatch(sha):
                raise ValueError(f"not a commit sha: {sha!r}")
        url = f"{repo_path(owner, repo)}/compare/{base_sha}...{head_sha}"
        answer = self._call("repos/compare-commits-with-basehead", "GET", url)
        commits = answer.get("commits") if isinstance(answer, dict) else None
        if not isinstance(commits, list):
            raise GitHubError("repos/compare-commits-with-basehead", 200, "the answer lists no commits")
        return [str(commit["sha"]) for commit in commits
                if isinstance(commit, dict) and _SHA.fullmatch(str(commit.get("sha", "")))]

    def comparison(self, owner: str, repo: str, base_sha: str, head_sha: str) -> Comparison:
        """The files renamed or copied from the merge base of BASE_SHA and HEAD_SHA to HEAD_SHA, and the
        commits between (compare API, `BASE...HEAD`; GitHub lists at most 300 files and 250 commits)."""
        for sha in (base_sha, head_sha):
            if not _SHA.fullmatch(sha):
                raise ValueError(f"not a commit sha: {sha!r}")
        url = f"{repo_path(owner, repo)}/compare/{base_sha}...{head_sha}"
        answer = self._call("repos/compare-commits-with-basehead", "GET", url)
        try:
            return Comparison.from_api(answer)
        except (KeyError, TypeError, ValueError) as exc:
            raise GitHubError("repos/compare-commits-with-basehead", 200,
                              f"an unexpected comparison: {exc}") from None

    # The repository and its default branch

    def default_branch(self, owner: str, repo: str) -> str:
        answer = self._call("repos/get", "GET", repo_path(owner, repo))
        branch = answer.get("default_branch") if isinstance(answer, dict) else None
        if not isinstance(branch, str) or not branch:
            raise GitHubError("repos/get", 200, "the answer names no default branch")
        return branch

    def branch_head(self, owner: str, repo: str, branch: str) -> str:
        """The sha of BRANCH's head commit."""
        url = f"{repo_path(owner, repo)}/branches/{quote(branch, safe='')}"
        answer = self._call("repos/get-branch", "GET", url)
        commit = answer.get("commit") if isinstance(answer, dict) else None
        sha = commit.get("sha") if isinstance(commit, dict) else None
        if not isinstance(sha, str) or not _SHA.fullmatch(sha):
            raise GitHubError("repos/get-branch", 200, "the answer names no head commit")
        return sha

    # Repository contents

    def get_file(self, owner: str, repo: str, path: str, ref: str) -> bytes | None:
        """The bytes of PATH at REF; None when there is no file there (absent, a directory, a symlink)."""
        if ".." in path.split("/"):
            raise ValueError(f"not a path inside the repository: {path!r}")
        url = f"{repo_path(owner, repo)}/contents/{quote(path.strip('/'), safe='/')}"
        try:
            content = self._call("repos/get-content", "GET", url, params={"ref": ref})
        except NotFound:
            return None
        if not isinstance(content, dict) or content.get("type") != "file":
            log.info("%s/%s: %s at %s is not a file", owner, repo, path, ref)
            return None
        if content.get("encoding") != "base64":
            # GitHub leaves `content` empty above 1 MB; nothing we read from a repository is that large
            raise GitHubError("repos/get-content", 200, f"{path}: too large for the contents API "
                                                        f"({content.get('size')} bytes)")
        return decode_content(str(content.get("content") or ""))

    def commit_tree(self, owner: str, repo: str, sha: str) -> CommitTree:
        """The files and symlinks of commit SHA, listed recursively by the Git Trees API."""
        url = f"{repo_path(owner, repo)}/git/trees/{quote(sha, safe='')}"
        answer = self._call("git/get-tree", "GET", url, params={"recursive": "1"})
        try:
            return CommitTree.from_api(answer)
        except (KeyError, TypeError, ValueError) as exc:
            raise GitHubError("git/get-tree", 200, f"an unexpected tree listing: {exc}") from None

    def tarball_request(self, owner: str, repo: str, ref: str) -> tuple[str, dict[str, str]]:
        """URL and headers of GET .../tarball/{ref}, for sources.py (which streams it with httpx).

        The headers carry the installation token: never log them.
        """
        url = f"{self.app.api_url}{repo_path(owner, repo)}/tarball/{quote(ref, safe='')}"
        return url, {**ACCEPT, "Authorization": f"token {self._token()}", "User-Agent": USER_AGENT,
                     "X-GitHub-Api-Version": API_VERSION}

    # Issues and comments

    def get_issue(self, owner: str, repo: str, number: int) -> IssueInfo | None:
        """An issue or pull request by number; None when it does not exist or is not visible to the App."""
        try:
            issue = self._call("issues/get", "GET", f"{repo_path(owner, repo)}/issues/{int(number)}")
        except NotFound:
            return None
        return IssueInfo.from_api(issue)

    def list_issue_comments(self, owner: str, repo: str, number: int) -> list[CommentInfo]:
        url = f"{repo_path(owner, repo)}/issues/{int(number)}/comments"
        comments = self._list("issues/list-comments", url)
        return [CommentInfo.from_api(comment) for comment in comments]

    def create_issue_comment(self, owner: str, repo: str, number: int, body: str, *, send_once: bool = False,
                             ) -> CommentInfo:
        """A new comment. SEND_ONCE: a failure GitHub may have applied (5xx, lost connection) raises
        Unconfirmed instead of the comment being sent again, for a caller that can look whether it was
        made (the sticky comment); without it a rare failure of that kind can leave two copies."""
        created = self._call("issues/create-comment", "POST",
                             f"{repo_path(owner, repo)}/issues/{int(number)}/comments", body={"body": body},
                             replay=not send_once)
        return CommentInfo.from_api(created)

    def update_issue_comment(self, owner: str, repo: str, comment_id: int, body: str) -> CommentInfo:
        url = f"{repo_path(owner, repo)}/issues/comments/{int(comment_id)}"
        updated = self._call("issues/update-comment", "PATCH", url, body={"body": body})
        return CommentInfo.from_api(updated)

    def add_reaction(self, owner: str, repo: str, comment_id: int, content: str) -> None:
        """React to an issue comment (`+1`, `confused`, `eyes` …); reacting twice is no error."""
        url = f"{repo_path(owner, repo)}/issues/comments/{int(comment_id)}/reactions"
        self._call("reactions/create-for-issue-comment", "POST", url, body={"content": content})

    def permission(self, owner: str, repo: str, login: str) -> str:
        """LOGIN's permission on the repository: admin, write (also for the maintain role), read (also
        triage) or none (also when GitHub knows no such user)."""
        url = f"{repo_path(owner, repo)}/collaborators/{quote(login, safe='')}/permission"
        try:
            answer = self._call("repos/get-collaborator-permission-level", "GET", url)
        except NotFound:
            return "none"
        return str(answer.get("permission") or "none") if isinstance(answer, dict) else "none"

    # Check runs: the request bodies are composed by checks.py

    def post_check_run(self, owner: str, repo: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Sent once: a failure GitHub may have applied raises Unconfirmed (checks.py looks, then decides)."""
        created: dict[str, Any] = self._call("checks/create", "POST", f"{repo_path(owner, repo)}/check-runs",
                                             body=body, replay=False)
        return created

    def list_check_runs(self, owner: str, repo: str, ref: str, *, check_name: str) -> list[CheckRunInfo]:
        """This App's check runs named CHECK_NAME on REF: all of them, not only the latest of the name."""
        url = f"{repo_path(owner, repo)}/commits/{quote(ref, safe='')}/check-runs"
        params = {"check_name": check_name, "filter": "all", "app_id": self.app.credentials.app_id}
        runs = [CheckRunInfo.from_api(run)
                for run in self._list("checks/list-for-ref", url, params=params, items="check_runs")]
        return [run for run in runs if run.app_id == self.app.credentials.app_id]

    def patch_check_run(self, owner: str, repo: str, check_run_id: int, body: Mapping[str, Any],
                        ) -> dict[str, Any]:
        url = f"{repo_path(owner, repo)}/check-runs/{int(check_run_id)}"
        updated: dict[str, Any] = self._call("checks/update", "PATCH", url, body=body)
        return updated

    # The App and its budget

    def app_login(self) -> str:
        """The App's bot login (`<slug>[bot]`), the author of the App's comments."""
        return self.app.app_login()

    def rate_limit(self) -> RateLimit:
        """This installation's core budget (asking costs nothing against it)."""
        return RateLimit.from_api(self._call("rate-limit/get", "GET", "/rate_limit"))

    def close(self) -> None:
        self._rest.close()


class TokenClient(GitHubClient):
    """GitHubClient's reading calls with one fixed token (GitHub Actions' `GITHUB_TOKEN`, a personal token)
    instead of the App's installation tokens: how the command line asks about references. Nothing of the
    App (its login, its check runs) can be asked with it."""

    def __init__(self, token: str, *, api_url: str, policy: RetryPolicy | None = None, timeout: int = 30,
                 ) -> None:
        self.installation_id = 0  # keys the resolution cache; one token is one reader
        self.policy = policy or RetryPolicy()
        self._fixed = token
        self._api_url = api_url.rstrip("/")
        self._rest = Rest(self._api_url, InstallationAuth(lambda: self._fixed), self.policy, timeout=timeout)

    def __repr__(self) -> str:
        return f"TokenClient(api_url={self._api_url!r})"

    def _token(self) -> str:
        return self._fixed

    def _forget_token(self) -> bool:
        return False  # a refused fixed token stays refused
