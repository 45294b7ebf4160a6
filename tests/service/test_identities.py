"""Repositories and pull requests are GitHub's ids; names are labels (issue 23). A repository deleted and
recreated under its name, and deliveries whose ids and names disagree, against the fake GitHub over real HTTP
and the store on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import select

from app.demo.localgithub import FakeGitHub
from app.service.services import Services
from app.store.models import Delivery, Installation, PullRequest, Repository, TriageRun
from app.store.queries import fail_run, start_run, upsert_installation, upsert_pull_request, upsert_repository
from app.store.session import session_scope
from app.triage.command_runner import PullComment, run_comment
from app.triage.identity import IdentityRefused
from app.webhooks.comment_events import router

from .conftest import Service
from .payloads import fixture, point_at, pull_request_event, sha

REPO = "acme/widgets"
NUMBER = 21
OLD_HEAD, NEW_HEAD, BASE = sha("old repository's head"), sha("new repository's head"), sha("base")


def store_unconcluded(services: Services, *, repository_id: int, full_name: str, head: str,
                      github_id: int | None = None) -> int:
    """REPOSITORY_ID's PR NUMBER with a run that could not conclude (action_required), for `ack`."""
    with services.writing() as session:
        upsert_installation(session, installation_id=1, account_login="acme")
        upsert_repository(session, repository_id=repository_id, full_name=full_name, private=False,
                          installation_id=1)
        pr = upsert_pull_request(session, repository_id=repository_id, number=NUMBER, title="A change",
                                 author="author", url=f"https://github.com/{full_name}/pull/{NUMBER}",
                                 head_sha=head, base_sha=BASE, base_ref="main", state="open",
                                 github_id=github_id)
        run = start_run(session, pr=pr.id, head_sha=head, base_sha=BASE).run
        fail_run(session, run_id=run.id, error="no sandbox")
        return run.id


def recreated(fake: FakeGitHub) -> tuple[int, int]:
    """REPO created, deleted and created again under its name: (the old id, the new id)."""
    old = fake.add_repo(REPO, installation_id=1).id
    new = fake.add_repo(REPO, installation_id=1).id  # the name now leads to another repository
    fake.add_pull(REPO, NUMBER, head_sha=NEW_HEAD, base_sha=BASE, author="author")
    fake.set_role(REPO, "maintainer", "maintain")
    return old, new


def comment_payload(fake: FakeGitHub, body: str, *, repository_id: int) -> dict[str, Any]:
    payload = point_at(fixture("issue_comment/created.on-pull-request"), fake, REPO, repository_id)
    payload["issue"]["number"] = NUMBER
    comment_id = fake.add_comment(REPO, NUMBER, body, author="maintainer")
    payload["comment"].update(id=comment_id, body=body)
    payload["comment"]["user"].update(login="maintainer", type="User")
    payload["installation"] = {"id": 1}
    return payload


def carry_out(services: Services, payload: dict[str, Any]) -> list[int]:
    job = router.decide("issue_comment", payload)
    comment = PullComment.from_job(1, job.data)  # type: ignore[union-attr]
    return run_comment(services, services.client(1), comment)


def acknowledged(services: Services) -> dict[int, str | None]:
    with session_scope(services.sessions, read_only=True) as session:
        return {run.id: run.acknowledged_by for run in session.scalars(select(TriageRun))}


def test_ack_in_a_recreated_repository_acknowledges_its_own_run_only(services: Services,
                                                                     fake_github: FakeGitHub) -> None:
    old, new = recreated(fake_github)
    old_run = store_unconcluded(services, repository_id=old, full_name=REPO, head=OLD_HEAD)
    new_run = store_unconcluded(services, repository_id=new, full_name=REPO, head=NEW_HEAD)

    carry_out(services, comment_payload(fake_github, "/triage ack flaky runner", repository_id=new))

    assert acknowledged(services) == {old_run: None, new_run: "maintainer"}
    [check] = fake_github.check_runs(REPO)
    assert (check.head_sha, check.conclusion) == (NEW_HEAD, "success")


def test_ack_in_a_recreated_repository_without_runs_never_reaches_the_old_ones(
        services: Services, fake_github: FakeGitHub) -> None:
    old, new = recreated(fake_github)
    old_run = store_unconcluded(services, repository_id=old, full_name=REPO, head=OLD_HEAD)

    carry_out(services, comment_payload(fake_github, "/triage ack flaky runner", repository_id=new))

    assert acknowledged(services) == {old_run: None}
    assert fake_github.check_runs(REPO) == []


def test_a_comment_naming_the_old_repository_id_under_the_new_name_is_refused(
        services: Services, fake_github: FakeGitHub) -> None:
    old, _ = recreated(fake_github)
    old_run = store_unconcluded(services, repository_id=old, full_name=REPO, head=OLD_HEAD)

    refused = rf"GitHub says {REPO} is repository \d+, the delivery says {old}"
    with pytest.raises(IdentityRefused, match=refused):
        carry_out(services, comment_payload(fake_github, "/triage ack forged", repository_id=old))

    assert acknowledged(services) == {old_run: None}
    assert fake_github.check_runs(REPO) == []


def stored(services: Services) -> tuple[list[tuple[int, str]], list[tuple[int, int, str, int | None]]]:
    with session_scope(services.sessions, read_only=True) as session:
        repositories = [(r.id, r.full_name)
                        for r in session.scalars(select(Repository).order_by(Repository.id))]
        pulls = [(p.repository_id, p.number, p.head_sha, p.github_id)
                 for p in session.scalars(select(PullRequest).order_by(PullRequest.id))]
        return repositories, pulls


def delivery_of(service: Service, guid: str) -> Delivery:
    [delivery] = [d for d in service.deliveries() if d.guid == guid]
    return delivery


def test_a_delivery_pairing_one_repositorys_id_with_anothers_name_is_refused_and_stores_nothing(
        service: Service, fake_github: FakeGitHub) -> None:
    other = fake_github.add_repo("acme/gadgets", installation_id=1)
    store_unconcluded(service.services, repository_id=other.id, full_name="acme/gadgets", head=OLD_HEAD)
    fake_github.add_repo(REPO, installation_id=1)
    fake_github.add_pull(REPO, NUMBER, head_sha=NEW_HEAD, base_sha=BASE)
    before = stored(service.services)
    payload = pull_request_event(fake_github, "synchronize", full_name=REPO, number=NUMBER, head_sha=NEW_HEAD,
                                 base_sha=BASE)
    payload["repository"]["id"] = payload["pull_request"]["base"]["repo"]["id"] = other.id  # gadgets' id
    guid = str(uuid.uuid4())

    assert service.post("pull_request", payload, guid=guid).status_code == 202
    service.drain()

    delivery = delivery_of(service, guid)
    assert delivery.status == "failed"
    assert delivery.error == f"refused: GitHub says {REPO} is repository {fake_github.repo(REPO).id}, " \
                             f"the delivery says {other.id}"  # type: ignore[union-attr]
    assert stored(service.services) == before  # gadgets keeps its name, its PR row its head
    assert len(service.runs()) == 1


def test_a_payload_whose_repository_and_pull_request_base_disagree_is_400_and_not_stored(
        service: Service, fake_github: FakeGitHub) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    payload = pull_request_event(fake_github, "opened", full_name=REPO, number=NUMBER, head_sha=NEW_HEAD,
                                 base_sha=BASE)
    payload["pull_request"]["base"]["repo"]["id"] += 1

    answer = service.post("pull_request", payload)

    assert answer.status_code == 400
    assert answer.json()["message"] == ("payload is inconsistent: pull_request.base.repo.id and "
                                        "repository.id name different repositories")
    assert service.deliveries() == []


def test_a_pull_request_stored_with_another_github_id_is_refused(service: Service,
                                                                 fake_github: FakeGitHub) -> None:
    repo = fake_github.add_repo(REPO, installation_id=1)
    fake_github.add_pull(REPO, NUMBER, head_sha=NEW_HEAD, base_sha=BASE)
    store_unconcluded(service.services, repository_id=repo.id, full_name=REPO, head=OLD_HEAD, github_id=1)
    before = stored(service.services)
    guid = str(uuid.uuid4())
    payload = pull_request_event(fake_github, "synchronize", full_name=REPO, number=NUMBER, head_sha=NEW_HEAD,
                                 base_sha=BASE)

    assert service.post("pull_request", payload, guid=guid).status_code == 202
    service.drain()

    assert delivery_of(service, guid).error == (
        f"refused: pull request {repo.id}#{NUMBER} is GitHub's 1, "
        f"the delivery says {repo.id * 100_000 + NUMBER}")
    assert stored(service.services) == before


# Installation deliveries: which repositories an installation holds


def installation_delivery(installation_id: int, account: str, *, added: Sequence[tuple[int, str]] = (),
                          removed: Sequence[tuple[int, str | None]] = ()) -> dict[str, Any]:
    payload = fixture("installation_repositories/added")
    payload["action"] = "removed" if removed and not added else "added"
    payload["installation"].update(id=installation_id)
    payload["installation"]["account"]["login"] = account
    payload["repositories_added"] = [{"id": key, "full_name": name, "private": False} for key, name in added]
    payload["repositories_removed"] = [{"id": key, "full_name": name, "private": False}
                                       for key, name in removed]
    return payload


def installation_rows(services: Services) -> list[tuple[int, str, int | None, bool]]:
    with session_scope(services.sessions, read_only=True) as session:
        return [(r.id, r.full_name, r.installation_id, r.removed_at is not None)
                for r in session.scalars(select(Repository).order_by(Repository.id))]


@pytest.mark.parametrize(("added", "removed", "problem"), [
    ([(7, "mallory/widgets")], [], "a repository listed is not of the installation's account"),
    ([(7, "acme/widgets"), (7, "acme/gadgets")], [], "a repository id is listed with two names"),
    ([(7, "acme/widgets"), (8, "ACME/Widgets")], [], "a repository name is listed with two ids"),
    ([(7, "acme/widgets")], [(7, "acme/widgets")], "a repository is listed as added and removed"),
    ([], [(7, "mallory/widgets")], "a repository listed is not of the installation's account"),
])
def test_an_installation_delivery_that_disagrees_with_itself_is_400_and_not_stored(
        service: Service, added: list[tuple[int, str]], removed: list[tuple[int, str]], problem: str) -> None:
    answer = service.post("installation_repositories", installation_delivery(2, "acme", added=added,
                                                                            removed=removed))

    assert answer.status_code == 400
    assert answer.json()["message"] == f"payload is inconsistent: {problem}"
    assert service.deliveries() == []
    assert installation_rows(service.services) == []


def held_by_installation_1(service: Service, fake: FakeGitHub) -> int:
    """REPO stored as installation 1's, and GitHub agreeing."""
    repo = fake.add_repo(REPO, installation_id=1)
    with service.services.writing() as session:
        upsert_installation(session, installation_id=1, account_login="acme")
        upsert_repository(session, repository_id=repo.id, full_name=REPO, private=False, installation_id=1)
    return repo.id


def transfer(fake: FakeGitHub, full_name: str, installation_id: int) -> None:
    """GitHub moves the repository to another installation of the App (a transfer, or a reinstall)."""
    repo = fake.repo(full_name)
    assert repo is not None
    fake.installations[repo.installation_id].repos.discard(full_name.lower())
    fake.add_installation(installation_id, repo.owner).repos.add(full_name.lower())
    repo.installation_id = installation_id


def test_adding_another_installations_repository_is_refused_and_stores_nothing(
        service: Service, fake_github: FakeGitHub) -> None:
    repo_id = held_by_installation_1(service, fake_github)
    before = installation_rows(service.services)
    guid = str(uuid.uuid4())

    payload = installation_delivery(2, "acme", added=[(repo_id, REPO), (repo_id + 1000, "acme/new")])
    answer = service.post("installation_repositories", payload, guid=guid)
    assert answer.status_code == 202
    service.drain()

    assert delivery_of(service, guid).error == (f"refused: repository {repo_id} belongs to installation 1, "
                                                f"the delivery adds it to 2")
    assert installation_rows(service.services) == before  # not even the other repository
    with session_scope(service.services.sessions, read_only=True) as session:
        assert session.get(Installation, 2) is None


def test_removing_another_installations_repository_leaves_its_row_alone(service: Service,
                                                                       fake_github: FakeGitHub) -> None:
    repo_id = held_by_installation_1(service, fake_github)
    before = installation_rows(service.services)
    for name in (REPO, None):  # GitHub may leave a removed repository's name out
        payload = installation_delivery(2, "acme", removed=[(repo_id, name)])
        assert service.post("installation_repositories", payload).status_code == 202
    service.drain()

    assert [d.status for d in service.deliveries()] == ["processed", "processed"]
    assert installation_rows(service.services) == before


def test_removing_a_repository_where_github_does_not_place_it_is_refused(service: Service,
                                                                         fake_github: FakeGitHub) -> None:
    repo_id = held_by_installation_1(service, fake_github)
    transfer(fake_github, REPO, 2)  # GitHub: installation 2's; stored: 1's; the delivery: removed from 2
    before = installation_rows(service.services)
    guid = str(uuid.uuid4())

    payload = installation_delivery(2, "acme", removed=[(repo_id, REPO)])
    assert service.post("installation_repositories", payload, guid=guid).status_code == 202
    service.drain()

    assert delivery_of(service, guid).error == (f"refused: repository {repo_id} belongs to installation 1, "
                                                f"the delivery removes it from 2")
    assert installation_rows(service.services) == before


def test_a_transfer_github_confirms_moves_the_repository_in_either_order(service: Service,
                                                                         fake_github: FakeGitHub) -> None:
    repo_id = held_by_installation_1(service, fake_github)
    transfer(fake_github, REPO, 2)

    added = installation_delivery(2, "acme", added=[(repo_id, REPO)])
    removed = installation_delivery(1, "acme", removed=[(repo_id, REPO)])
    assert service.post("installation_repositories", added).status_code == 202
    assert service.post("installation_repositories", removed).status_code == 202  # late: stale by now
    service.drain()

    assert [d.status for d in service.deliveries()] == ["processed", "processed"]
    assert installation_rows(service.services) == [(repo_id, REPO, 2, False)]
