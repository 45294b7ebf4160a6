"""Installation events: which accounts installed the App and which repositories it may see."""

from __future__ import annotations

from app.triage.job_payloads import InstallationJob, InstallationState, RepositoryRef
from app.webhooks.payloads import InstallationEvent, RemovedRepository, Repository
from app.webhooks.router import Decision, Job, Router

router = Router()

STATES: dict[str, InstallationState] = {
    "created": "active", "unsuspend": "active", "new_permissions_accepted": "active", "suspend": "suspended",
    "deleted": "deleted"}


def _repositories(listed: list[Repository] | None) -> tuple[RepositoryRef, ...]:
    return tuple(repo.ref() for repo in listed or [])


def _removed(listed: list[RemovedRepository] | None) -> tuple[RepositoryRef, ...]:
    """Removed repositories by id; a name GitHub left out is "" (the stored row keeps its own)."""
    return tuple(RepositoryRef(repo.id, repo.full_name or "", repo.private) for repo in listed or []
                 if repo.id is not None)


def _installation(event: InstallationEvent, state: InstallationState, added: list[Repository] | None,
                  removed: tuple[RepositoryRef, ...]) -> Job:
    """The job; a null account (GitHub's schema allows it) is None: the stored login is kept."""
    account = event.installation.account
    return Job.of(InstallationJob(event.installation.id, account.name if account else None,
                                  account.type if account else None, state, _repositories(added), removed))


@router.register("installation", model=InstallationEvent)
def record_installation(event: InstallationEvent) -> Decision:
    state = STATES.get(event.action or "", "active")
    return _installation(event, state, event.repositories, ())


@router.register("installation_repositories", "added", "removed", model=InstallationEvent)
def record_repositories(event: InstallationEvent) -> Decision:
    return _installation(event, "active", event.repositories_added, _removed(event.repositories_removed))
