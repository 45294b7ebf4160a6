"""Plain values the adapter returns: what the pipeline asks of GitHub, with no PyGithub object inside."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def parse_time(value: Any) -> datetime | None:
    """GitHub's ISO-8601 timestamps (`2011-01-26T19:01:12Z`), None for null."""
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def login_of(user: Any) -> str:
    """The login of a user object; GitHub shows a deleted account as null, we say `ghost` as its UI does."""
    return str(user["login"]) if isinstance(user, dict) and user.get("login") else "ghost"


@dataclass(frozen=True)
class PullInfo:
    number: int
    title: str
    body: str  # "" when GitHub has null
    author: str
    state: str  # "open" | "closed"
    draft: bool
    merged: bool
    merged_at: datetime | None
    head_sha: str
    head_ref: str
    head_repo: str | None  # full name; None when the fork was deleted
    base_sha: str
    base_ref: str
    base_repo: str
    url: str  # the page a person opens
    changed_files: int  # GitHub lists at most 3000 files: compare with len(list_files(...))
    github_id: int | None = None  # GitHub's id of the PR
    base_repo_id: int | None = None  # GitHub's id of the repository the PR is in: names are only labels

    @property
    def from_fork(self) -> bool:
        return self.head_repo != self.base_repo

    @classmethod
    def from_api(cls, pull: dict[str, Any]) -> PullInfo:
        head, base = pull["head"], pull["base"]
        head_repo = head.get("repo")
        return cls(number=int(pull["number"]), title=str(pull["title"]), body=pull.get("body") or "",
                   author=login_of(pull.get("user")), state=str(pull["state"]),
                   draft=bool(pull.get("draft")), merged=bool(pull.get("merged")),
                   merged_at=parse_time(pull.get("merged_at")), head_sha=str(head["sha"]),
                   head_ref=str(head["ref"]), head_repo=str(head_repo["full_name"]) if head_repo else None,
                   base_sha=str(base["sha"]), base_ref=str(base["ref"]),
                   base_repo=str(base["repo"]["full_name"]), url=str(pull["html_url"]),
                   changed_files=int(pull.get("changed_files") or 0), github_id=_id(pull.get("id")),
                   base_repo_id=_id(base["repo"].get("id")))


def _id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class ChangedFile:
    """One file of a pull request's diff, as the PR files API lists it."""

    filename: str
    status: str  # added, modified, removed, renamed, copied, changed, unchanged
    patch: str | None  # the unified diff's hunks; GitHub leaves it out for binary and very large files
    previous_filename: str | None = None

    @classmethod
    def from_api(cls, changed: dict[str, Any]) -> ChangedFile:
        patch = changed.get("patch")
        return cls(filename=str(changed["filename"]), status=str(changed.get("status") or "modified"),
                   patch=patch if isinstance(patch, str) else None,
                   previous_filename=changed.get("previous_filename") or None)


@dataclass(frozen=True)
class CommitTree:
    """A commit's files and symlinks as the Git Trees API lists them (recursively): path -> (mode, blob id).
    `truncated`: GitHub listed only part of a tree that large."""

    blobs: dict[str, tuple[str, str]]
    truncated: bool

    @classmethod
    def from_api(cls, answer: Any) -> CommitTree:
        entries = answer.get("tree") if isinstance(answer, dict) else None
        if not isinstance(entries, list):
            raise ValueError("the answer lists no tree")
        blobs = {str(entry["path"]): (str(entry["mode"]), str(entry["sha"])) for entry in entries
                 if isinstance(entry, dict) and entry.get("type") == "blob"}
        return cls(blobs=blobs, truncated=bool(answer.get("truncated")))


COMPARE_FILES_LIMIT = 300  # the compare API lists at most this many changed files of a comparison


@dataclass(frozen=True)
class Comparison:
    """The compare API's BASE...HEAD as the layout of a revision needs it: the files renamed or copied
    between the merge base and HEAD, (old path, new path); the shas of the commits it lists, oldest first;
    and whether its files were cut at GitHub's limit (then some renames are missing)."""

    moved: list[tuple[str, str]]
    commits: list[str]
    cut: bool

    @classmethod
    def from_api(cls, answer: Any) -> Comparison:
        files = answer.get("files") if isinstance(answer, dict) else None
        commits = answer.get("commits") if isinstance(answer, dict) else None
        if not isinstance(files, list) or not isinstance(commits, list):
            raise ValueError("the answer lists no files or no commits")
        moved = [(str(entry["previous_filename"]), str(entry["filename"])) for entry in files
                 if isinstance(entry, dict) and entry.get("status") in ("renamed", "copied")
                 and entry.get("previous_filename") and entry.get("filename")]
        shas = [str(commit["sha"]) for commit in commits if isinstance(commit, dict) and commit.get("sha")]
        return cls(moved=moved, commits=shas, cut=len(files) >= COMPARE_FILES_LIMIT)


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    message: str

    @classmethod
    def from_api(cls, commit: dict[str, Any]) -> CommitInfo:
        return cls(sha=str(commit["sha"]), message=str(commit["commit"]["message"]))


@dataclass(frozen=True)
class IssueInfo:
    """An issue or a pull request seen through the issues API: enough to tell a follow-up's state."""

    number: int
    title: str
    body: str
    author: str
    state: str  # "open" | "closed"
    state_reason: str | None
    is_pull_request: bool
    draft: bool
    merged_at: datetime | None  # set only for a merged pull request
    url: str

    @classmethod
    def from_api(cls, issue: dict[str, Any]) -> IssueInfo:
        pull = issue.get("pull_request")
        return cls(number=int(issue["number"]), title=str(issue["title"]), body=issue.get("body") or "",
                   author=login_of(issue.get("user")), state=str(issue["state"]),
                   state_reason=issue.get("state_reason"), is_pull_request=isinstance(pull, dict),
                   draft=bool(issue.get("draft")),
                   merged_at=parse_time(pull.get("merged_at")) if isinstance(pull, dict) else None,
                   url=str(issue["html_url"]))


@dataclass(frozen=True)
class CommentInfo:
    id: int
    body: str
    author: str
    created_at: datetime | None
    updated_at: datetime | None
    url: str

    @classmethod
    def from_api(cls, comment: dict[str, Any]) -> CommentInfo:
        return cls(id=int(comment["id"]), body=comment.get("body") or "",
                   author=login_of(comment.get("user")), created_at=parse_time(comment.get("created_at")),
                   updated_at=parse_time(comment.get("updated_at")), url=str(comment.get("html_url") or ""))


@dataclass(frozen=True)
class CheckRunInfo:
    id: int
    name: str
    head_sha: str
    status: str  # "queued" | "in_progress" | "completed" (and Actions' own states)
    conclusion: str | None
    external_id: str
    app_id: int | None  # the App that created it

    @classmethod
    def from_api(cls, run: dict[str, Any]) -> CheckRunInfo:
        app = run.get("app")
        return cls(id=int(run["id"]), name=str(run["name"]), head_sha=str(run["head_sha"]),
                   status=str(run["status"]), conclusion=run.get("conclusion"),
                   external_id=str(run.get("external_id") or ""),
                   app_id=int(app["id"]) if isinstance(app, dict) and app.get("id") is not None else None)


@dataclass(frozen=True)
class RateLimit:
    """The `core` budget of the credential that asked."""

    limit: int
    remaining: int
    used: int
    reset: datetime

    @classmethod
    def from_api(cls, answer: dict[str, Any]) -> RateLimit:
        core = answer["resources"]["core"]
        return cls(limit=int(core["limit"]), remaining=int(core["remaining"]), used=int(core.get("used", 0)),
                   reset=datetime.fromtimestamp(int(core["reset"]), tz=UTC))
