"""A delivery's identities checked before anything is stored: its repository id, name, installation and PR
ids must agree with each other, with what is stored and with what GitHub's API says (issue 23: a repository
recreated under a deleted one's name, or a delivery pairing one repository's id with another's name)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from app.github import GitHubError
from app.github.github_models import PullInfo
from app.service.services import Services
from app.store.queries import identity_conflicts, stored_installation_of
from app.store.session import session_scope
from app.triage.job_payloads import InstallationJob, RepositoryRef

log = logging.getLogger(__name__)


class IdentityRefused(Exception):
    """The delivery's ids disagree: nothing of it is stored, and the delivery is marked failed, saying why."""


def check_identity(services: Services, *, repository: RepositoryRef, installation_id: int,
                   pulls: Sequence[PullInfo] = ()) -> None:
    """IdentityRefused when the delivery's ids disagree with GitHub's answers (PULLS, fetched by name) or
    with the store. A repository stored under another installation is asked of GitHub: a transfer is fine."""
    for pull in pulls:
        if pull.base_repo_id is not None and pull.base_repo_id != repository.id:
            _refuse(f"GitHub says {repository.full_name} is repository {pull.base_repo_id}, "
                    f"the delivery says {repository.id}")
    with session_scope(services.sessions, read_only=True) as session:
        problems = identity_conflicts(session, repository_id=repository.id, installation_id=installation_id)
        for pull in pulls:
            problems += identity_conflicts(session, repository_id=repository.id, installation_id=None,
                                           number=pull.number, github_id=pull.github_id)
    installation_moved = [p for p in problems if " belongs to installation " in p]
    if installation_moved and _installation_on_github(services, repository) == installation_id:
        problems = [p for p in problems if p not in installation_moved]  # transferred: GitHub agrees
    if problems:
        _refuse("; ".join(problems))


def check_installation(services: Services, job: InstallationJob) -> frozenset[int]:
    """IdentityRefused when a repository the installation delivery adds or removes is stored under another
    live installation and GitHub does not say it moved. Returns the ids of removals GitHub shows are stale
    (the repository is the other installation's now, a transfer seen out of order): leave those alone."""
    listed = [(repo, False) for repo in job.added] + [(repo, True) for repo in job.removed]
    with session_scope(services.sessions, read_only=True) as session:
        elsewhere = [(repo, removal, stored) for repo, removal in listed
                     if (stored := stored_installation_of(session, repository_id=repo.id,
                                                          other_than=job.installation_id)) is not None]
    stale, problems = set(), []
    for repo, removal, (holder, stored_name) in elsewhere:
        on_github = _installation_on_github(services, RepositoryRef(repo.id, repo.full_name or stored_name))
        if on_github == (holder if removal else job.installation_id):
            if removal:
                log.info("installation %s: repository %s is installation %s's, its removal left alone",
                         job.installation_id, repo.id, holder)
                stale.add(repo.id)
            continue
        problems.append(f"repository {repo.id} belongs to installation {holder}, the delivery "
                        f"{'removes it from' if removal else 'adds it to'} {job.installation_id}")
    if problems:
        _refuse("; ".join(problems))
    return frozenset(stale)


def _installation_on_github(services: Services, repository: RepositoryRef) -> int | None:
    try:
        return services.github.installation_for(*repository.owner_repo)
    except GitHubError:
        return None


def _refuse(problem: str) -> None:
    log.warning("delivery refused: %s", problem)
    raise IdentityRefused(problem)
