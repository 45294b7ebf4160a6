"""Follow-up references and risk windows: open, await, resolve, close; every change is a window event."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.store.models import (
    PullRequest,
    Reference,
    ReferenceKind,
    ReferenceState,
    RiskWindow,
    WindowEvent,
    WindowState,
    window_awaits,
)
from app.store.rows import get_or_raise, reload, upsert
from app.store.types import utcnow

SYSTEM_ACTOR = "prtriage"  # the actor of changes the service itself observed (webhooks, resync)


def upsert_reference(session: Session, *, pr_id: int, target_owner: str, target_repo: str, target_number: int,
                     kind: ReferenceKind, sentence: str, url: str | None = None) -> Reference:
    """The PR's reference to `owner/repo#number` of this kind, with the sentence it was last found in."""
    upsert(session, Reference, {
        "pull_request_id": pr_id, "target_owner": target_owner, "target_repo": target_repo,
        "target_number": target_number, "kind": kind, "sentence": sentence, "url": url,
        "created_at": utcnow(),
    }, key=["pull_request_id", "target_owner", "target_repo", "target_number", "kind"], keep=["created_at"])
    return reload(session, Reference, pull_request_id=pr_id, target_owner=target_owner,
                  target_repo=target_repo, target_number=target_number, kind=kind)


def resolve_reference(session: Session, *, reference_id: int, state: ReferenceState,
                      merged_at: datetime | None = None, actor: str = SYSTEM_ACTOR) -> Reference:
    """Record the referenced PR's or issue's state; open windows awaiting it get an event when it changed."""
    reference = get_or_raise(session, Reference, reference_id)
    changed = reference.state != state
    reference.state, reference.merged_at, reference.state_checked_at = state, merged_at, utcnow()
    if changed:
        for window in _windows_awaiting_ids(session, [reference.id], "open"):
            add_window_event(session, window_id=window.id, actor=actor,
                             what=f"{reference.ref} is now {state}")
    return reference


def open_window(session: Session, *, pr: PullRequest | int, risk: str, awaiting: Iterable[Reference | int],
                actor: str = SYSTEM_ACTOR, opened_at: datetime | None = None) -> RiskWindow:
    """Open a risk window for a merged PR, awaiting the given references (none: a blocking finding merged).

    A PR has at most one open window: opening again adds the new references to it. `opened_at` defaults to
    the PR's merge time.
    """
    # Lock the PR row: two workers handling one merge must not both open a window (PostgreSQL; SQLite's
    # write lock already serialises them).
    pull = get_or_raise(session, PullRequest, pr if isinstance(pr, int) else pr.id, lock=True)
    references = [r if isinstance(r, Reference) else get_or_raise(session, Reference, r) for r in awaiting]
    window = session.scalars(select(RiskWindow).where(RiskWindow.pull_request_id == pull.id,
                                                      RiskWindow.state == "open")).first()
    if window is None:
        window = RiskWindow(repository_id=pull.repository_id, pull_request_id=pull.id, state="open",
                            risk=risk, opened_at=opened_at or pull.merged_at or utcnow(), awaiting=references)
        session.add(window)
        session.flush()
        what = f"opened, awaiting {_refs(references)}" if references else "opened"
        # Dated like the window: its timeline starts at the merge, even when the window is found later.
        add_window_event(session, window_id=window.id, actor=actor, what=what, at=window.opened_at)
        return window
    added = [r for r in references if r not in window.awaiting]
    if added:
        window.awaiting.extend(added)
        add_window_event(session, window_id=window.id, actor=actor, what=f"now also awaiting {_refs(added)}")
    return window


def close_window(session: Session, *, window_id: int, actor: str, reason: str,
                 at: datetime | None = None) -> RiskWindow:
    """Close the window with a reason, as an event; an already closed window is left as it is."""
    window = get_or_raise(session, RiskWindow, window_id, lock=True)
    if window.state == "closed":
        return window
    window.state, window.closed_at, window.close_reason = "closed", at or utcnow(), reason
    add_window_event(session, window_id=window.id, actor=actor, what=f"closed: {reason}", at=window.closed_at)
    return window


def add_window_event(session: Session, *, window_id: int, actor: str, what: str,
                     at: datetime | None = None) -> WindowEvent:
    event = WindowEvent(window_id=window_id, actor=actor, what=what, at=at or utcnow())
    session.add(event)
    session.flush()
    return event


def windows_awaiting(session: Session, *, repo: str, number: int,
                     state: WindowState = "open") -> list[RiskWindow]:
    """Windows awaiting `owner/name#number` (to close when it merges); owner and name ignore case."""
    owner, _, name = repo.partition("/")
    reference_ids = session.scalars(select(Reference.id).where(
        Reference.target_number == number, func.lower(Reference.target_repo) == name.lower(),
        func.lower(Reference.target_owner) == owner.lower())).all()
    return _windows_awaiting_ids(session, reference_ids, state)


def awaited_references(session: Session) -> list[Reference]:
    """Every reference an open window awaits: the periodic resync re-resolves them (webhooks get lost)."""
    awaited = (select(window_awaits.c.reference_id)
               .join(RiskWindow, RiskWindow.id == window_awaits.c.window_id)
               .where(RiskWindow.state == "open"))
    return list(session.scalars(select(Reference).where(Reference.id.in_(awaited)).order_by(Reference.id)))


def windows_of_pull_request(session: Session, *, pr_id: int) -> list[RiskWindow]:
    """All windows a PR opened, oldest first (a revert shows what it re-opens or fixes)."""
    return list(session.scalars(select(RiskWindow).where(RiskWindow.pull_request_id == pr_id)
                                .order_by(RiskWindow.opened_at, RiskWindow.id)))


def closing_references(session: Session, *, pr_id: int) -> list[Reference]:
    """The issues and PRs the PR says it closes (`Fixes #N`)."""
    return list(session.scalars(select(Reference).where(Reference.pull_request_id == pr_id,
                                                        Reference.kind == "closes")))


def _windows_awaiting_ids(session: Session, reference_ids: Iterable[int],
                          state: WindowState) -> list[RiskWindow]:
    ids = list(reference_ids)
    if not ids:
        return []
    awaiting = select(window_awaits.c.window_id).where(window_awaits.c.reference_id.in_(ids))
    query = select(RiskWindow).where(RiskWindow.id.in_(awaiting), RiskWindow.state == state)
    return list(session.scalars(query.order_by(RiskWindow.opened_at, RiskWindow.id)))


def _refs(references: Iterable[Reference]) -> str:
    return ", ".join(f"{r.ref} ({r.kind})" for r in references)
