"""The jobs a webhook delivery asks for, one frozen dataclass per kind: the router's handlers make them
(app/webhooks/), the delivery's job runs them (app/triage/pipeline.py).

A job is stored as the delivery's payload summary, plain JSON: `{"job": KIND, "installation_id": ID, ...}`
(`summary()`), and read back with `from_summary()`. The queue message carries only the delivery's GUID.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

JobKind = Literal["triage", "pull_request_closed", "installation", "command", "main_health"]
InstallationState = Literal["active", "suspended", "deleted"]  # as the store keeps it


@dataclass(frozen=True)
class RepositoryRef:
    """The repository a delivery is about, as its payload names it."""

    id: int
    full_name: str
    private: bool = False

    @property
    def owner_repo(self) -> tuple[str, str]:
        owner, _, name = self.full_name.partition("/")
        return owner, name

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "full_name": self.full_name, "private": self.private}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RepositoryRef:
        return cls(int(data["id"]), str(data["full_name"]), bool(data.get("private")))


@dataclass(frozen=True)
class TriageJob:
    """Triage the PRs' current heads: a push, an edit that matters, a re-run of our check."""

    KIND: ClassVar[JobKind] = "triage"
    installation_id: int | None
    repository: RepositoryRef
    numbers: tuple[int, ...]  # empty for a check suite of a fork's push: the open PRs at head_sha then
    head_sha: str | None
    reason: str  # the event's action (`synchronize`…) or `check_run.rerequested`…
    check_run_id: int | None = None  # a re-run of one check run: only if it is ours
    app_id: int | None = None  # a re-run of a check suite: only if it is our App's

    def data(self) -> dict[str, Any]:
        optional = {"check_run_id": self.check_run_id, "app_id": self.app_id}
        return {"repository": self.repository.to_json(), "numbers": list(self.numbers),
                "head_sha": self.head_sha, "reason": self.reason,
                **{key: value for key, value in optional.items() if value is not None}}

    @classmethod
    def from_data(cls, installation_id: int | None, data: Mapping[str, Any]) -> TriageJob:
        return cls(installation_id, RepositoryRef.from_json(data["repository"]),
                   tuple(int(n) for n in data.get("numbers", [])), _optional_str(data.get("head_sha")),
                   str(data.get("reason") or ""), _optional_int(data.get("check_run_id")),
                   _optional_int(data.get("app_id")))


@dataclass(frozen=True)
class ClosedJob:
    """Record a closed PR; a merge opens and closes risk windows, done by ACTOR."""

    KIND: ClassVar[JobKind] = "pull_request_closed"
    installation_id: int | None
    repository: RepositoryRef
    number: int
    merged: bool
    actor: str

    def data(self) -> dict[str, Any]:
        return {"repository": self.repository.to_json(), "number": self.number, "merged": self.merged,
                "actor": self.actor}

    @classmethod
    def from_data(cls, installation_id: int | None, data: Mapping[str, Any]) -> ClosedJob:
        return cls(installation_id, RepositoryRef.from_json(data["repository"]), int(data["number"]),
                   bool(data.get("merged")), str(data.get("actor") or ""))


@dataclass(frozen=True)
class CommandJob:
    """Carry out the `/triage` commands of a PR comment."""

    KIND: ClassVar[JobKind] = "command"
    installation_id: int | None
    repository: RepositoryRef
    number: int
    comment_id: int
    author: str
    body: str

    def data(self) -> dict[str, Any]:
        return {"repository": self.repository.to_json(), "number": self.number, "comment_id": self.comment_id,
                "author": self.author, "body": self.body}

    @classmethod
    def from_data(cls, installation_id: int | None, data: Mapping[str, Any]) -> CommandJob:
        return cls(installation_id, RepositoryRef.from_json(data["repository"]), int(data["number"]),
                   int(data["comment_id"]), str(data["author"]), str(data["body"]))


@dataclass(frozen=True)
class InstallationJob:
    """Record an installation's account and state, and the repositories added to it or removed."""

    KIND: ClassVar[JobKind] = "installation"
    installation_id: int
    account_login: str | None  # None: the delivery's account was null, the stored login stays
    account_type: str | None
    state: InstallationState
    added: tuple[RepositoryRef, ...]
    removed: tuple[RepositoryRef, ...]

    def data(self) -> dict[str, Any]:
        return {"account": {"login": self.account_login, "type": self.account_type}, "state": self.state,
                "added": [repo.to_json() for repo in self.added],
                "removed": [repo.to_json() for repo in self.removed]}

    @classmethod
    def from_data(cls, installation_id: int | None, data: Mapping[str, Any]) -> InstallationJob:
        if installation_id is None:
            raise ValueError("an installation job without its installation")
        account, state = data["account"], data["state"]
        if state not in get_args(InstallationState):
            raise ValueError(f"an installation job in state {state!r}")
        login = account.get("login")
        return cls(installation_id, None if login is None else str(login), account.get("type"), state,
                   _repositories(data["added"]), _repositories(data["removed"]))


@dataclass(frozen=True)
class MainHealthJob:
    """Check the default branch after a push to it: HEAD_SHA, reached from BEFORE_SHA by COMMITS (oldest
    first, as the push lists them), where a suite it newly rejects is searched for its breaking commit."""

    KIND: ClassVar[JobKind] = "main_health"
    installation_id: int | None
    repository: RepositoryRef
    branch: str
    head_sha: str
    before_sha: str | None  # None for the branch's first push
    commits: tuple[str, ...]

    def data(self) -> dict[str, Any]:
        return {"repository": self.repository.to_json(), "branch": self.branch, "head_sha": self.head_sha,
                "before_sha": self.before_sha, "commits": list(self.commits)}

    @classmethod
    def from_data(cls, installation_id: int | None, data: Mapping[str, Any]) -> MainHealthJob:
        return cls(installation_id, RepositoryRef.from_json(data["repository"]), str(data["branch"]),
                   str(data["head_sha"]), _optional_str(data.get("before_sha")),
                   tuple(str(sha) for sha in data.get("commits", [])))


JobPayload = TriageJob | ClosedJob | CommandJob | InstallationJob | MainHealthJob
KINDS: dict[str, type[JobPayload]] = {kind.KIND: kind for kind in (TriageJob, ClosedJob, CommandJob,
                                                                    InstallationJob, MainHealthJob)}


def summary(job: JobPayload) -> dict[str, Any]:
    """JOB as the delivery's payload summary (JSON)."""
    return {"job": job.KIND, "installation_id": job.installation_id, **job.data()}


def from_summary(stored: Mapping[str, Any]) -> JobPayload:
    """The job a payload summary holds; KeyError or ValueError when it holds none (not a job, or written by a
    version that no longer reads it)."""
    kind = KINDS[str(stored["job"])]
    installation_id = stored.get("installation_id")
    return kind.from_data(None if installation_id is None else int(installation_id), stored)


def _repositories(listed: Sequence[Mapping[str, Any]]) -> tuple[RepositoryRef, ...]:
    return tuple(RepositoryRef.from_json(repo) for repo in listed)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
