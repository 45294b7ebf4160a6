"""The periodic resync of risk windows: webhooks get lost, so every reference an open window awaits is asked
of GitHub again; a state change is recorded as the windows' event, and a window whose awaited references
have all landed is closed.

GitHub is asked outside any transaction (one read first, one write after): a slow API must not hold the
database's writer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from app.analysis.followups.followup_findings import Resolution
from app.github.client import GitHubClient
from app.github.errors import GitHubError
from app.github.reference_states import ResolutionCache, resolve_reference
from app.service.services import Services
from app.store.models import RiskWindow
from app.store.queries import awaited_references, close_window, windows_awaiting
from app.store.queries import resolve_reference as record_state
from app.store.session import session_scope
from app.store.windows import SYSTEM_ACTOR

log = logging.getLogger(__name__)

SETTLED_STATES = ("merged", "completed")


@dataclass(frozen=True)
class Awaited:
    """A reference an open window awaits, and the installation whose client may ask about it."""

    reference_id: int
    owner: str
    repo: str
    number: int
    installation_id: int
    state: str | None  # as last recorded


@dataclass
class ResyncOutcome:
    checked: int = 0
    changed: list[int] = field(default_factory=list)  # reference ids whose state changed
    closed: list[int] = field(default_factory=list)  # window ids
    failed: int = 0  # references GitHub would not answer for this time


def resync(services: Services, *, client_for: Callable[[int], GitHubClient] | None = None) -> ResyncOutcome:
    """Re-resolve every open window's awaited references, bypassing the resolution cache (its entries may
    predate a merge whose webhook never came)."""
    client_for = client_for or services.client
    with session_scope(services.sessions, read_only=True) as session:
        pending = _awaited(session)
    fresh = ResolutionCache(ttl=0.0)
    outcome = ResyncOutcome()
    states: dict[int, Resolution] = {}
    for awaited in pending:
        try:
            states[awaited.reference_id] = resolve_reference(
                client_for(awaited.installation_id), awaited.owner, awaited.repo, awaited.number, cache=fresh)
        except GitHubError as exc:  # the next resync asks again
            log.warning("resync: %s/%s#%d not resolved: %s", awaited.owner, awaited.repo, awaited.number, exc)
            outcome.failed += 1
    outcome.checked = len(states)
    with services.writing() as session:
        _record(session, pending, states, outcome)
    return outcome


def _awaited(session: Session) -> list[Awaited]:
    found = []
    for reference in awaited_references(session):
        installation_id = reference.pull_request.repository.installation_id
        if installation_id is None:  # the repository left the App: nobody can ask for it
            continue
        found.append(Awaited(reference.id, reference.target_owner, reference.target_repo,
                             reference.target_number, installation_id, reference.state))
    return found


def _record(session: Session, pending: list[Awaited], states: dict[int, Resolution],
            outcome: ResyncOutcome) -> None:
    touched: dict[int, RiskWindow] = {}
    for awaited in pending:
        resolution = states.get(awaited.reference_id)
        if resolution is None:
            continue
        # records the windows' "is now <state>" event when it changed
        record_state(session, reference_id=awaited.reference_id, state=resolution.state,
                     merged_at=resolution.merged_at, actor=SYSTEM_ACTOR)
        if resolution.state != awaited.state:
            outcome.changed.append(awaited.reference_id)
        target = f"{awaited.owner}/{awaited.repo}"
        for window in windows_awaiting(session, repo=target, number=awaited.number):
            touched[window.id] = window
    for window in touched.values():
        if window.awaiting and all(r.state in SETTLED_STATES for r in window.awaiting):
            landed = ", ".join(r.ref for r in window.awaiting)
            close_window(session, window_id=window.id, actor=SYSTEM_ACTOR,
                         reason=f"{landed} landed (found by the periodic resync)")
            outcome.closed.append(window.id)
