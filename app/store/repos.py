"""Installations, repositories and pull requests as GitHub last described them (upserts by GitHub's keys)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, case, or_, select
from sqlalchemy.orm import Session

from app.store.models import Installation, InstallationState, PullRequest, PullRequestState, Repository
from app.store.rows import Excluded, reload, upsert
from app.store.types import utcnow


def upsert_installation(session: Session, *, installation_id: int, account_login: str,
                        account_type: str | None = None, state: InstallationState = "active") -> Installation:
    now = utcnow()
    table = Installation.__table__

    def state_change(excluded: Excluded) -> dict[str, Any]:
        return {"state_changed_at": case((table.c.state != excluded.state, excluded.state_changed_at),
                                         else_=table.c.state_changed_at)}

    upsert(session, Installation, {
        "id": installation_id, "account_login": account_login, "account_type": account_type, "state": state,
        "state_changed_at": now, "created_at": now, "updated_at": now,
    }, key=["id"], keep=["created_at", "state_changed_at"], extra=state_change)
    return reload(session, Installation, id=installation_id)


def upsert_repository(session: Session, *, repository_id: int, full_name: str, private: bool,
                      installation_id: int | None = None, removed: bool = False) -> Repository:
    """Insert or update; `installation_id` must name a stored installation (upsert that first).

    `removed`: the repository left the installation; it is kept, with its history.
    """
    now = utcnow()
    upsert(session, Repository, {
        "id": repository_id, "full_name": full_name, "private": private, "installation_id": installation_id,
        "removed_at": now if removed else None, "created_at": now, "updated_at": now,
    }, key=["id"], keep=["created_at"])
    return reload(session, Repository, id=repository_id)


def upsert_pull_request(session: Session, *, repository_id: int, number: int, title: str, author: str,
                        url: str, head_sha: str, base_sha: str, base_ref: str, state: PullRequestState,
                        draft: bool = False, merged_at: datetime | None = None,
                        merge_commit_sha: str | None = None, body: str | None = None,
                        github_updated_at: datetime | None = None) -> PullRequest:
    """Insert or update the PR; its body is kept only as a hash, to tell an edit apart.

    Webhooks arrive out of order: given GitHub's `updated_at`, an older description of the PR never
    overwrites a newer one. `merge_commit_sha` is kept only for a merged PR (GitHub sets it on open ones).
    """
    now = utcnow()
    stored = PullRequest.__table__.c.github_updated_at

    def newer(excluded: Excluded) -> ColumnElement[bool]:
        proposed = excluded.github_updated_at
        return or_(stored.is_(None), proposed.is_(None), proposed >= stored)

    upsert(session, PullRequest, {
        "repository_id": repository_id, "number": number, "title": title, "author": author, "url": url,
        "head_sha": head_sha, "base_sha": base_sha, "base_ref": base_ref, "state": state, "draft": draft,
        "merged_at": merged_at, "merge_commit_sha": merge_commit_sha if merged_at else None,
        "body_sha256": hashlib.sha256(body.encode()).hexdigest() if body else None,
        "github_updated_at": github_updated_at, "created_at": now, "updated_at": now,
    }, key=["repository_id", "number"], keep=["created_at"], where=newer)
    return reload(session, PullRequest, repository_id=repository_id, number=number)


def has_installation(session: Session, *, installation_id: int) -> bool:
    return session.get(Installation, installation_id) is not None


def pull_request_by_id(session: Session, *, pr_id: int) -> PullRequest | None:
    return session.get(PullRequest, pr_id)


def pull_request_head(session: Session, *, pr_id: int) -> str:
    """The head sha the PR's row holds now (a newer push may have moved it since a run started)."""
    return session.scalars(select(PullRequest.head_sha).where(PullRequest.id == pr_id)).one()


def open_pull_numbers_at(session: Session, *, repository_id: int, head_sha: str) -> list[int]:
    """The numbers of the repository's open PRs whose head is HEAD_SHA (a fork's check suite lists none)."""
    query = select(PullRequest.number).join(Repository).where(
        Repository.id == repository_id, PullRequest.head_sha == head_sha, PullRequest.state == "open")
    return list(session.scalars(query))


def get_pull_request(session: Session, *, repo: str, number: int) -> PullRequest | None:
    """The PR `number` of the repository named `owner/name`."""
    return session.scalars(select(PullRequest).join(Repository)
                           .where(Repository.full_name == repo, PullRequest.number == number)).first()
