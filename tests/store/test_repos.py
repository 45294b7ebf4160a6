"""Installations, repositories and pull requests are upserted by GitHub's keys, atomically and in order."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.store.models import PullRequest, Repository
from app.store.queries import (
    get_pull_request,
    identity_conflicts,
    pull_request_of,
    upsert_installation,
    upsert_pull_request,
    upsert_repository,
)
from app.store.session import session_scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def pull(session: Session, repository_id: int, **changes: object) -> PullRequest:
    fields: dict[str, object] = {
        "repository_id": repository_id, "number": 2204, "title": "Add the fail-fast", "author": "octocat",
        "url": "https://github.com/acme/widgets/pull/2204", "head_sha": "a" * 40, "base_sha": "b" * 40,
        "base_ref": "main", "state": "open"} | changes
    return upsert_pull_request(session, **fields)  # type: ignore[arg-type]


def widgets(session: Session) -> Repository:
    upsert_installation(session, installation_id=1, account_login="acme")
    return upsert_repository(session, repository_id=7, full_name="acme/widgets", private=False,
                             installation_id=1)


def test_installation_state_changes_are_dated(session: Session) -> None:
    created = upsert_installation(session, installation_id=28513985, account_login="acme",
                                  account_type="Organization")
    first_change = created.state_changed_at
    again = upsert_installation(session, installation_id=28513985, account_login="acme-renamed")
    assert again is created and again.account_login == "acme-renamed"
    assert again.state_changed_at == first_change  # same state: the date stays
    suspended = upsert_installation(session, installation_id=28513985, account_login="acme-renamed",
                                    state="suspended")
    assert suspended.state == "suspended"
    assert first_change is not None and suspended.state_changed_at is not None
    assert suspended.state_changed_at >= first_change


def test_repository_upsert_follows_renames_and_removal(session: Session) -> None:
    upsert_installation(session, installation_id=1, account_login="acme")
    repository = upsert_repository(session, repository_id=1296269, full_name="acme/widgets", private=True,
                                   installation_id=1)
    created_at = repository.created_at
    renamed = upsert_repository(session, repository_id=1296269, full_name="acme/gadgets", private=True,
                                installation_id=1, removed=True)
    assert (renamed.full_name, renamed.created_at) == ("acme/gadgets", created_at)
    assert renamed.removed_at is not None


def test_pull_request_upsert_keeps_one_row_and_hashes_the_body(session: Session) -> None:
    repo = widgets(session)
    opened = pull(session, repo.id, body="#2205 will add the fail-fast")
    pushed = pull(session, repo.id, head_sha="c" * 40, body="#2205 will add the fail-fast")
    assert pushed.id == opened.id and pushed.head_sha == "c" * 40
    assert pushed.body_sha256 == hashlib.sha256(b"#2205 will add the fail-fast").hexdigest()
    assert pull(session, repo.id, body=None).body_sha256 is None
    assert session.scalar(select(func.count()).select_from(PullRequest)) == 1
    assert get_pull_request(session, repo="acme/widgets", number=2204) is pushed
    assert get_pull_request(session, repo="acme/widgets", number=1) is None


def test_merge_commit_is_kept_only_for_a_merged_pr(session: Session) -> None:
    repo = widgets(session)
    assert pull(session, repo.id, merge_commit_sha="d" * 40).merge_commit_sha is None  # GitHub sets it early
    merged = pull(session, repo.id, state="closed", merged_at=T0, merge_commit_sha="d" * 40)
    assert (merged.merged_at, merged.merge_commit_sha) == (T0, "d" * 40)


def test_an_older_description_does_not_overwrite_a_newer_one(session: Session) -> None:
    """Webhooks arrive out of order: GitHub's updated_at decides."""
    repo = widgets(session)
    pull(session, repo.id, head_sha="new" + "0" * 37, github_updated_at=T0 + timedelta(minutes=5))
    stale = pull(session, repo.id, head_sha="old" + "0" * 37, github_updated_at=T0)
    assert stale.head_sha == "new" + "0" * 37
    newer = pull(session, repo.id, head_sha="newest" + "0" * 34, github_updated_at=T0 + timedelta(minutes=6))
    assert newer.head_sha == "newest" + "0" * 34


def test_concurrent_upserts_of_one_pull_request_make_one_row(db: Engine) -> None:
    with session_scope(db) as session:
        widgets(session)
    workers = 6
    start = threading.Barrier(workers)

    def upsert(n: int) -> int:
        start.wait(10)
        with session_scope(db) as session:
            return pull(session, 7, title=f"title {n}").id

    with ThreadPoolExecutor(workers) as pool:
        ids = set(pool.map(upsert, range(workers)))
    assert len(ids) == 1
    with session_scope(db, read_only=True) as session:
        assert session.scalar(select(func.count()).select_from(PullRequest)) == 1


def test_a_name_held_by_a_deleted_repository_and_its_successor_finds_the_successors_pr(
        session: Session) -> None:
    widgets(session)
    pull(session, 7, head_sha="1" * 40)
    # the repository was deleted and another one created under its name (or it was renamed away)
    upsert_repository(session, repository_id=8, full_name="acme/widgets", private=False, installation_id=1)
    pull(session, 8, head_sha="2" * 40)
    assert get_pull_request(session, repo="ACME/Widgets", number=2204).head_sha == "2" * 40  # type: ignore[union-attr]
    assert pull_request_of(session, repository_id=7, number=2204).head_sha == "1" * 40  # type: ignore[union-attr]
    assert pull_request_of(session, repository_id=9, number=2204) is None


def test_github_ids_are_kept_once_known_and_disagreements_named(session: Session) -> None:
    widgets(session)
    pull(session, 7, github_id=700)
    assert pull(session, 7).github_id == 700  # a caller that does not know it leaves it
    upsert_repository(session, repository_id=8, full_name="acme/gadgets", private=False, installation_id=1)
    assert identity_conflicts(session, repository_id=7, installation_id=1, number=2204, github_id=700) == []
    assert identity_conflicts(session, repository_id=7, installation_id=1, number=2204, github_id=701) == [
        "pull request 7#2204 is GitHub's 700, the delivery says 701"]
    assert identity_conflicts(session, repository_id=8, installation_id=1, number=2204, github_id=700) == [
        "pull request 700 is stored as 7#2204, the delivery says 8#2204"]
    upsert_installation(session, installation_id=2, account_login="other")
    assert identity_conflicts(session, repository_id=7, installation_id=2) == [
        "repository 7 belongs to installation 1, the delivery says 2"]
    upsert_repository(session, repository_id=7, full_name="acme/widgets", private=False, installation_id=1,
                      removed=True)
    assert identity_conflicts(session, repository_id=7, installation_id=2) == []  # it left installation 1


def test_an_installation_delivered_with_a_null_account_keeps_its_login(session: Session) -> None:
    upsert_installation(session, installation_id=5, account_login="acme", account_type="Organization")
    kept = upsert_installation(session, installation_id=5, account_login=None, state="suspended")
    assert (kept.account_login, kept.account_type, kept.state) == ("acme", "Organization", "suspended")
    assert upsert_installation(session, installation_id=6, account_login=None).account_login == "ghost"
