"""What the fake GitHub knows: repositories, pull requests, issues, comments, check runs, files, tarballs,
installations and their tokens, and the faults a test asked for."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class FakePull:
    number: int
    title: str
    body: str | None
    author: str
    head_sha: str
    base_sha: str
    head_ref: str = "topic"
    base_ref: str = "main"
    head_repo: str | None = ""  # "" = the base repository; None = a deleted fork
    state: str = "open"
    draft: bool = False
    merged: bool = False
    merged_at: str | None = None
    merge_commit_sha: str | None = None  # the commit a merge made on the base branch
    files: list[dict[str, Any]] = field(default_factory=list)  # {"filename", "status", ["previous_filename"]}
    commits: list[tuple[str, str]] = field(default_factory=list)  # (sha, message)


@dataclass
class FakeIssue:
    number: int
    title: str
    body: str | None
    author: str
    state: str = "open"
    state_reason: str | None = None
    pull: FakePull | None = None  # every pull request is also an issue


@dataclass
class FakeComment:
    id: int
    repo: str
    issue_number: int
    body: str
    author: str
    author_type: str  # "User" | "Bot"
    created_at: str
    updated_at: str


@dataclass
class FakeReaction:
    id: int
    comment_id: int
    content: str  # "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"
    user: str


@dataclass
class FakeCheckRun:
    id: int
    repo: str
    name: str
    head_sha: str
    status: str = "queued"
    conclusion: str | None = None
    external_id: str = ""
    details_url: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    output: dict[str, Any] = field(default_factory=lambda: {"title": None, "summary": None, "text": None})
    annotations: list[dict[str, Any]] = field(default_factory=list)  # appended across updates, as GitHub does
    actions: list[dict[str, Any]] = field(default_factory=list)  # buttons, replaced by a request naming some


@dataclass
class FakeRepo:
    id: int
    owner: str
    name: str
    installation_id: int
    default_branch: str = "main"
    pulls: dict[int, FakePull] = field(default_factory=dict)
    issues: dict[int, FakeIssue] = field(default_factory=dict)
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (ref, path) -> content
    tarballs: dict[str, bytes] = field(default_factory=dict)  # ref -> gzip tarball
    # ref -> the commit's files as the Git Trees API lists them; by default, what its tarball holds
    trees: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # lower-case login -> admin, maintain, write …
    # (base, head) -> their merge base; a pair not set has the base as its merge base, one set to None
    # has no common history (the compare API answers 404)
    merge_bases: dict[tuple[str, str], str | None] = field(default_factory=dict)
    # the default branch's commits, oldest first, (sha, message): its head, and what compare lists
    history: list[tuple[str, str]] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class Installation:
    id: int
    account: str
    repos: set[str] = field(default_factory=set)  # lower-case full names


@dataclass
class IssuedToken:
    installation_id: int
    expires_at: float


FaultKind = Literal["status", "drop", "primary", "secondary"]


@dataclass
class Fault:
    """The next REMAINING requests to SERVER with METHOD (any when None) whose path matches PATH (all when
    None) fail this way; AFTER_APPLYING ones are carried out first, and only their answer is lost."""

    kind: FaultKind
    remaining: int
    server: str = "api"
    path: re.Pattern[str] | None = None
    status: int = 502
    retry_after: str | None = None
    reset_in: int = 30
    message: str | None = None
    method: str | None = None
    after_applying: bool = False

    def matches(self, server: str, method: str, route: str) -> bool:
        return self.remaining > 0 and self.server == server and self.method in (None, method) and (
            self.path is None or bool(self.path.search(route)))


@dataclass
class RecordedRequest:
    """One request as the fake saw it; the credential itself is never kept, only its kind."""

    server: str  # "api" | "download"
    method: str
    path: str  # as received, API prefix included
    route: str  # path without the API prefix
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names, Authorization left out
    auth: str | None  # "jwt" | "token" | None
    jwt_claims: dict[str, Any] | None
    body: Any
    status: int = 0
    schema_errors: list[str] = field(default_factory=list)
    response: Any = None  # the JSON body answered (None for a raw or empty one)
