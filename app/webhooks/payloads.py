"""Typed models of the webhook payloads: only the fields a handler reads, each bounded to what GitHub sends
and what the store can hold, so a malformed delivery is refused (400) at the routing boundary, not a crash.

Each field is exactly as optional and as nullable as GitHub's published webhook schema has it (OpenAPI
description, `tests/service/test_payload_schemas.py` checks every field read here against it): an
installation's `account` may be null or an Enterprise (a `slug`, no `login`), a check suite's `app.id` null,
a `requested_action` without `identifier`, a removed repository without `full_name`."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.triage.job_payloads import RepositoryRef

BIGINT_MAX = 2**63 - 1  # ids are BigInteger columns
INTEGER_MAX = 2**31 - 1  # pull request numbers are Integer columns
COMMENT_CHARS = 65536  # GitHub's limit on a comment's body

Id = Annotated[int, Field(ge=1, le=BIGINT_MAX)]
Number = Annotated[int, Field(ge=1, le=INTEGER_MAX)]
# No NUL: PostgreSQL refuses it in text columns.
Name = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00]+$")]
Sha = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{7,64}$")]
Action = Annotated[str, Field(pattern=r"^[a-z_]{1,64}$")]
AccountType = Annotated[str, Field(max_length=32, pattern=r"^[^\x00]*$")]
# a key or identifier that may end up in an ignored delivery's reason
Word = Annotated[str, Field(max_length=64, pattern=r"^[^\x00]*$")]


class Model(BaseModel):
    # strict: a string is never an object or a number, nor `true` a 1
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class Account(Model):
    """A user or organization (`login`), or an Enterprise (`slug`, no `login`)."""

    login: Name | None = None
    slug: Name | None = None
    type: AccountType | None = None

    @property
    def name(self) -> str | None:
        return self.login or self.slug


class InstallationRef(Model):
    id: Id


class Envelope(Model):
    """What every delivery may carry, handled or not: it is stored with the delivery's row."""

    action: Action | None = None
    installation: InstallationRef | None = None

    @property
    def installation_id(self) -> int | None:
        """The App installation the delivery is for; None for a repository webhook."""
        return self.installation.id if self.installation else None


class Repository(Model):
    id: Id
    full_name: Name
    private: bool = False

    def ref(self) -> RepositoryRef:
        return RepositoryRef(self.id, self.full_name, self.private)


class Head(Model):
    sha: Sha


class RepoId(Model):
    id: Id


class Base(Model):
    repo: RepoId | None = None


class PullRequest(Model):
    number: Number
    head: Head
    base: Base | None = None
    merged: bool | None = None
    merged_by: Account | None = None


class PullRequestEvent(Envelope):
    action: Action
    pull_request: PullRequest
    repository: Repository
    sender: Account | None = None
    changes: dict[Word, Any] | None = None

    @model_validator(mode="after")
    def _one_repository(self) -> PullRequestEvent:
        base = self.pull_request.base
        if base is not None and base.repo is not None and base.repo.id != self.repository.id:
            raise ValueError("pull_request.base.repo.id and repository.id name different repositories")
        return self


class PullRef(Model):
    number: Number


class AppRef(Model):
    id: Id | None  # required, and nullable, in GitHub's schema


class CheckRun(Model):
    id: Id
    head_sha: Sha
    pull_requests: list[PullRef] = []


class RequestedAction(Model):
    identifier: Word | None = None


class CheckRunEvent(Envelope):
    action: Action
    check_run: CheckRun
    repository: Repository
    requested_action: RequestedAction | None = None


class CheckSuite(Model):
    head_sha: Sha
    pull_requests: list[PullRef] = []
    app: AppRef | None = None


class CheckSuiteEvent(Envelope):
    check_suite: CheckSuite
    repository: Repository


class Installation(InstallationRef):
    account: Account | None = None


class RemovedRepository(Model):
    """A repository removed from an installation: GitHub's schema requires none of its fields."""

    id: Id | None = None
    full_name: Name | None = None
    private: bool = False


class InstallationEvent(Envelope):
    installation: Installation
    repositories: list[Repository] | None = None
    repositories_added: list[Repository] | None = None
    repositories_removed: list[RemovedRepository] | None = None

    @model_validator(mode="after")
    def _one_account(self) -> InstallationEvent:
        """An installation is one account's: every repository listed is that account's, each id names one
        repository and each name one id (a delivery that disagrees with itself would rename or move rows)."""
        listed = [(repo.id, repo.full_name) for repo in (*(self.repositories or ()),
                                                          *(self.repositories_added or ()),
                                                          *(self.repositories_removed or ()))]
        account = self.installation.account
        login = account.login if account else None
        for _, full_name in listed:
            if login and full_name and full_name.partition("/")[0].lower() != login.lower():
                raise ValueError("a repository listed is not of the installation's account")
        _one_to_one([(key, name.lower()) for key, name in listed if key is not None and name], "id", "name")
        _one_to_one([(name.lower(), key) for key, name in listed if key is not None and name], "name", "id")
        added = {repo.id for repo in self.repositories_added or ()}
        if added & {repo.id for repo in self.repositories_removed or ()}:
            raise ValueError("a repository is listed as added and removed")
        return self


def _one_to_one(pairs: list[tuple[Any, Any]], key: str, value: str) -> None:
    seen: dict[Any, Any] = {}
    for left, right in pairs:
        if seen.setdefault(left, right) != right:
            raise ValueError(f"a repository {key} is listed with two {value}s")


class Issue(Model):
    number: Number
    pull_request: dict[str, Any] | None = None


class Comment(Model):
    id: Id
    body: Annotated[str, Field(max_length=COMMENT_CHARS)] | None = None
    user: Account | None = None


class IssueCommentEvent(Envelope):
    issue: Issue
    comment: Comment
    repository: Repository


def describe(error: ValidationError) -> str:
    """The first problem, naming the field and never echoing the value: 'payload lacks issue.number'."""
    first = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    if not where:  # a check across fields (a model validator): its message names them
        return f"payload is inconsistent: {first['msg'].removeprefix('Value error, ')}"
    if first["type"] == "missing":
        return f"payload lacks {where}"
    return f"payload has a malformed {where}: {first['msg']}"


class PushedRepository(Repository):
    default_branch: Name


class PushedCommit(Model):
    id: Sha


class PushEvent(Envelope):
    """A push: `ref` names the branch; `after` is all zeros when the branch was deleted."""

    ref: Annotated[str, Field(max_length=1024, pattern=r"^[^\x00]*$")]
    before: Sha | None = None
    after: Sha
    deleted: bool = False
    repository: PushedRepository
    commits: list[PushedCommit] | None = None
