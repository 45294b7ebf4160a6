"""Installations, repositories and pull requests as GitHub last described them (upserts by GitHub's keys)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, case, func, or_, select
from sqlalchemy.orm import Session

from app.store.models import Installation, InstallationState, PullRequest, PullRequestState, Repository
from app.store.rows import Excluded, reload, upsert
from app.store.types import utcnow


def upsert_installation(session: Session, *, installation_id: int, account_login: str | None,
                        account_type: str | None = None, state: InstallationState = "active") -> Installation:
    """Insert or update; without `account_login` (GitHub sent a null account) the stored account stays, and
    a new row says `ghost`, as GitHub's pages do."""
    now = utcnow()
    table = Installation.__table__

    def state_change(excluded: Excluded) -> dict[str, Any]:
        return {"state_changed_at": case((table.c.state != excluded.state, excluded.state_changed_at),
                                         else_=table.c.state_changed_at)}

    unknown = ["account_login", "account_type"] if account_login is None else []
    upsert(session, Installation, {
        "id": installation_id, "account_login": account_login or "ghost", "account_type": account_type,
        "state": state, "state_changed_at": now, "created_at": now, "updated_at": now,
    }, key=["id"], keep=["created_at", "state_changed_at", *unknown], extra=state_change)
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


def mark_repository_removed(session: Session, *, repository_id: int) -> None:
    """The repository left its installation (a delivery that does not name it): its row, if any, is kept."""
    repository = session.get(Repository, repository_id)
    if repository is not None and repository.removed_at is None:
        repository.removed_at = utcnow()


def upsert_pull_request(session: Session, *, repository_id: int, number: int, title: str, author: str,
                        url: str, head_sha: str, base_sha: str, base_ref: str, state: PullRequestState,
                        draft: bool = False, merged_at: datetime | None = None,
                        merge_commit_sha: str | None = None, body: str | None = None,
                        github_updated_at: datetime | None = None,
                        github_id: int | None = None) -> PullRequest:
    """Insert or update the PR; its body is kept only as a hash, to tell an edit apart.

    `github_id`, GitHub's id of the PR, is kept once known (a caller that does not know it leaves it);
    `identity_conflicts()` refuses a delivery that pairs it with another PR before it comes here.

    Webhooks arrive out of order: given GitHub's `updated_at`, an older description of the PR never
    overwrites a newer one. `merge_commit_sha` is kept only for a merged PR (GitHub sets it on open ones).
    """
    now = utcnow()
    stored = PullRequest.__table__.c.github_updated_at

    def newer(excluded: Excluded) -> ColumnElement[bool]:
        proposed = excluded.github_updated_at
        return or_(stored.is_(None), proposed.is_(None), proposed >= stored)

    pr_table = PullRequest.__table__

    def known_id(excluded: Excluded) -> dict[str, Any]:
        return {"github_id": func.coalesce(excluded.github_id, pr_table.c.github_id)}

    upsert(session, PullRequest, {
        "repository_id": repository_id, "number": number, "github_id": github_id, "title": title,
        "author": author, "url": url,
        "head_sha": head_sha, "base_sha": base_sha, "base_ref": base_ref, "state": state, "draft": draft,
        "merged_at": merged_at, "merge_commit_sha": merge_commit_sha if merged_at else None,
        "body_sha256": hashlib.sha256(body.encode()).hexdigest() if body else None,
        "github_updated_at": github_updated_at, "created_at": now, "updated_at": now,
    }, key=["repository_id", "number"], keep=["created_at", "github_id"], extra=known_id, where=newer)
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


def pull_request_of(session: Session, *, repository_id: int, number: int) -> PullRequest | None:
    """The PR `number` of the repository with GitHub's id `repository_id`: how a delivery finds its PR."""
    return session.scalars(select(PullRequest).where(PullRequest.repository_id == repository_id,
                                                     PullRequest.number == number)).one_or_none()


def get_pull_request(session: Session, *, repo: str, number: int) -> PullRequest | None:
    """The PR `number` of the repository a PR's text names `owner/name`: a label, which a deleted or renamed
    repository may have held before; the repository that GitHub last described under that name holds it."""
    holder = (select(Repository.id).where(func.lower(Repository.full_name) == repo.lower())
              .order_by(Repository.updated_at.desc(), Repository.id.desc()).limit(1).scalar_subquery())
    return session.scalars(select(PullRequest).where(PullRequest.repository_id == holder,
                                                     PullRequest.number == number)).one_or_none()


def stored_installation_of(session: Session, *, repository_id: int,
                           other_than: int) -> tuple[int, str] | None:
    """(installation id, name) of the repository when an installation other than OTHER_THAN holds it (not
    uninstalled, the repository not removed from it)."""
    stored = session.get(Repository, repository_id)
    if (stored is None or stored.installation_id is None or stored.installation_id == other_than
            or stored.removed_at is not None):
        return None
    holder = session.get(Installation, stored.installation_id)
    if holder is not None and holder.state == "deleted":
        return None
    return stored.installation_id, stored.full_name


def identity_conflicts(session: Session, *, repository_id: int, installation_id: int | None,
                       number: int | None = None, github_id: int | None = None) -> list[str]:
    """How a delivery's ids disagree with what is stored: the repository under another live installation,
    the PR (repository, number) stored with another GitHub id, or that GitHub id stored for another PR.

    An installation change is also what a transfer looks like: the caller asks GitHub before refusing.
    """
    problems = []
    stored = session.get(Repository, repository_id)
    if (stored is not None and installation_id is not None and stored.installation_id is not None
            and stored.installation_id != installation_id and stored.removed_at is None):
        problems.append(f"repository {repository_id} belongs to installation {stored.installation_id}, "
                        f"the delivery says {installation_id}")
    if number is None or github_id is None:
        return problems
    pr = pull_request_of(session, repository_id=repository_id, number=number)
    if pr is not None and pr.github_id is not None and pr.github_id != github_id:
        problems.append(f"pull request {repository_id}#{number} is GitHub's {pr.github_id}, "
                        f"the delivery says {github_id}")
    other = session.scalars(select(PullRequest).where(PullRequest.github_id == github_id)).one_or_none()
    if other is not None and (other.repository_id, other.number) != (repository_id, number):
        problems.append(f"pull request {github_id} is stored as {other.repository_id}#{other.number}, "
                        f"the delivery says {repository_id}#{number}")
    return problems
