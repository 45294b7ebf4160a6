"""Risk windows from merges: a merged PR opens a window for what it still awaits (or for the blocking finding
it merged with), closes the windows that awaited it, and a merged revert closes the reverted PR's windows.

GitHub is asked first (texts, references, states), then everything is written in one transaction: a
retried job repeats no question's side effects and changes nothing twice (every store call is idempotent).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from app.analysis.followups.diffrefs import diff_texts, patch_lines
from app.analysis.followups.followup_findings import Resolution, awaited, risk_sentence, trim
from app.analysis.followups.followups import TextReference, find_references
from app.analysis.followups.references import Text, pull_texts, target_of, within_budget
from app.github.client import GitHubClient
from app.github.github_models import ChangedFile, PullInfo
from app.github.reference_states import (
    CACHE,
    RESOLVED_KINDS,
    ResolutionCache,
    resolve_references,
    web_host,
    with_commits_resolved,
)
from app.service.services import Services
from app.store.models import PullRequest, Reference, RiskWindow
from app.store.queries import (
    add_window_event,
    close_window,
    get_pull_request,
    latest_run,
    open_window,
    resolve_reference,
    upsert_reference,
    windows_awaiting,
    windows_of_pull_request,
)
from app.store.rows import get_or_raise
from app.store.windows import SYSTEM_ACTOR

log = logging.getLogger(__name__)

ROLE = {"followup": "follow-up", "prerequisite": "prerequisite"}
SETTLED_STATES = ("merged", "completed")


@dataclass(frozen=True)
class MergeOutcome:
    """What a merge changed: the window it opened (or added to), and the windows it closed."""

    opened: int | None = None
    closed: list[int] = field(default_factory=list)


def read_references(client: GitHubClient, owner: str, repo: str, pull: PullInfo, *,
                    api_url: str) -> list[TextReference]:
    """The PR's classified references: title, body, commit messages, its author's comments and the lines
    its diff adds (a `TODO(#N)`); reverted commits replaced by the PR that brought them in."""
    commits = client.list_commits(owner, repo, pull.number)
    comments = client.list_issue_comments(owner, repo, pull.number)
    texts = pull_texts(title=pull.title, body=pull.body, commits=[commit.message for commit in commits],
                       comments=[(comment.author, comment.body) for comment in comments], author=pull.author)
    texts += pull_diff_texts(client.list_changed_files(owner, repo, pull.number))
    if note := within_budget(texts).note:
        log.warning("%s/%s#%d: not everything was read: %s", owner, repo, pull.number, note)
    found = find_references(texts, owner=owner, repo=repo, number=pull.number, web_hosts=[web_host(api_url)])
    return with_commits_resolved(client, found, number=pull.number)


def pull_diff_texts(files: Iterable[ChangedFile]) -> list[Text]:
    """The prose of the lines the PR's files add, from the patches GitHub lists (none for a binary or
    very large file: its promises go unread)."""
    return diff_texts(itertools.chain.from_iterable(
        patch_lines(changed.filename, changed.patch) for changed in files if changed.patch))


def resolve_merge(client: GitHubClient, owner: str, repo: str, pull: PullInfo, *, api_url: str,
                  cache: ResolutionCache | None = None) -> tuple[list[TextReference], dict[str, Resolution]]:
    """The GitHub half of a merge: the PR's references and the state of each that matters."""
    # the merge changed this PR's state: no resolution cached before it may be read after it
    (CACHE if cache is None else cache).forget(target_of(owner, repo, pull.number))
    references = read_references(client, owner, repo, pull, api_url=api_url)
    return references, resolve_references(client, references, cache=cache)


def handle_merge(services: Services, client: GitHubClient, *, pr_id: int, owner: str, repo: str,
                 pull: PullInfo, actor: str = SYSTEM_ACTOR, cache: ResolutionCache | None = None,
                 ) -> MergeOutcome:
    """A merged PR (stored, as PR_ID): ask GitHub, then record it in one transaction."""
    api_url = services.settings.github_api_url
    references, resolutions = resolve_merge(client, owner, repo, pull, api_url=api_url, cache=cache)
    with services.writing() as session:
        pr = get_or_raise(session, PullRequest, pr_id)
        outcome = record_merge(session, pr=pr, references=references, resolutions=resolutions, actor=actor)
    log.info("%s/%s#%d merged: window %s opened, %d closed", owner, repo, pull.number, outcome.opened,
             len(outcome.closed))
    return outcome


def record_merge(session: Session, *, pr: PullRequest, references: Sequence[TextReference],
                 resolutions: Mapping[str, Resolution], actor: str = SYSTEM_ACTOR) -> MergeOutcome:
    """The store half of a merge of PR (its row already says merged): references stored with their state,
    the PR's window opened, the windows awaiting it and those of the PRs it reverts closed."""
    rows = _store_references(session, pr, references, resolutions, actor)
    opened = _open_for_merge(session, pr, references, resolutions, rows, actor)
    closed = _close_fulfilled(session, pr, actor) + _close_reverted(session, pr, references, actor)
    return MergeOutcome(opened=opened.id if opened else None, closed=closed)


def _store_references(session: Session, pr: PullRequest, references: Iterable[TextReference],
                      resolutions: Mapping[str, Resolution], actor: str) -> dict[str, Reference]:
    """Rows of the references whose state matters, and of the issues the PR closes (a revert of it
    re-opens them), keyed by lower-case target (a commit without a PR cannot be stored: a reference row
    names a number)."""
    by_target = {target.lower(): resolution for target, resolution in resolutions.items()}
    rows: dict[str, Reference] = {}
    for reference in references:
        if reference.kind not in (*RESOLVED_KINDS, "closes") or reference.number is None:
            continue
        row = upsert_reference(session, pr_id=pr.id, target_owner=reference.owner, target_repo=reference.repo,
                               target_number=reference.number, kind=reference.kind,
                               sentence=reference.sentence, url=reference.url)
        resolution = by_target.get(reference.target.lower())
        if resolution is not None:
            row = resolve_reference(session, reference_id=row.id, state=resolution.state,
                                    merged_at=resolution.merged_at, actor=actor)
        rows[reference.target.lower()] = row
    return rows


def _open_for_merge(session: Session, pr: PullRequest, references: Sequence[TextReference],
                    resolutions: Mapping[str, Resolution], rows: Mapping[str, Reference],
                    actor: str) -> RiskWindow | None:
    waiting = [rows[r.target.lower()] for r in awaited(references, resolutions) if r.target.lower() in rows]
    blocking = _blocking_at_merge(session, pr)
    if not waiting and not blocking:
        return None
    earlier = windows_of_pull_request(session, pr_id=pr.id)
    if earlier and all(window.state == "closed" for window in earlier):
        return None  # a redelivered merge must not re-open what a maintainer or a follow-up closed
    risk = risk_sentence(references) or (trim(blocking[0], 200) if blocking else "")
    window = open_window(session, pr=pr, risk=risk, awaiting=waiting, actor=actor)
    if blocking and not earlier:
        add_window_event(session, window_id=window.id, actor=actor, what=_merged_blocking(session, pr))
    return window


def _blocking_at_merge(session: Session, pr: PullRequest) -> list[str]:
    """The messages of the blocking findings of the PR's latest triage, acknowledged or not."""
    run = latest_run(session, pr_id=pr.id)
    if run is None:
        return []
    return [finding.message for finding in run.findings if finding.severity == "blocking"]


def _merged_blocking(session: Session, pr: PullRequest) -> str:
    run = latest_run(session, pr_id=pr.id)
    assert run is not None
    blocking = [finding for finding in run.findings if finding.severity == "blocking"]
    acknowledged = sorted({f"{f.acknowledged_by}: {f.ack_reason}" for f in blocking if f.acknowledged_by})
    what = f"merged while its check reported {len(blocking)} blocking finding{'s' * (len(blocking) != 1)}"
    if acknowledged:
        what += f" (acknowledged by {'; '.join(acknowledged)})"
    return what


def _close_fulfilled(session: Session, pr: PullRequest, actor: str) -> list[int]:
    """Windows that awaited PR: it merged. One that still awaits something else stays open, saying so."""
    full_name = pr.repository.full_name
    closed: list[int] = []
    for window in windows_awaiting(session, repo=full_name, number=pr.number):
        mine = [r for r in window.awaiting if _names(r, full_name, pr.number)]
        for reference in mine:
            resolve_reference(session, reference_id=reference.id, state="merged", merged_at=pr.merged_at,
                              actor=actor)
        landed = ", ".join(f"{ROLE.get(r.kind, r.kind)} {_label(r, window)} merged" for r in mine)
        if all(r.state in SETTLED_STATES for r in window.awaiting):
            # dated when observed, like the state change before it: the timeline stays in order
            close_window(session, window_id=window.id, actor=actor, reason=landed)
            closed.append(window.id)
        else:
            rest = ", ".join(_label(r, window) for r in window.awaiting if r.state not in SETTLED_STATES)
            add_window_event(session, window_id=window.id, actor=actor,
                             what=f"{landed}; still awaiting {rest}")
    return closed


def _close_reverted(session: Session, pr: PullRequest, references: Iterable[TextReference],
                    actor: str) -> list[int]:
    """The open windows of the PRs this merged PR reverts: the risky change is gone."""
    closed: list[int] = []
    for reference in references:
        if reference.kind != "revert" or reference.number is None:
            continue
        reverted = get_pull_request(session, repo=f"{reference.owner}/{reference.repo}",
                                    number=reference.number)
        if reverted is None:
            continue
        by = f"#{pr.number}" if reverted.repository_id == pr.repository_id else \
            f"{pr.repository.full_name}#{pr.number}"
        for window in windows_of_pull_request(session, pr_id=reverted.id):
            if window.state == "open":
                close_window(session, window_id=window.id, actor=actor, reason=f"reverted by {by}")
                closed.append(window.id)
    return closed


def _names(reference: Reference, full_name: str, number: int) -> bool:
    return reference.ref.lower() == f"{full_name}#{number}".lower()


def _label(reference: Reference, window: RiskWindow) -> str:
    """`#N` within the window's repository, `owner/repo#N` elsewhere (as comments name references)."""
    local = f"{reference.target_owner}/{reference.target_repo}".lower() == \
        window.repository.full_name.lower()
    return f"#{reference.target_number}" if local else reference.ref
