"""The validation paths learned at a base branch, read back from the reports of its last analyses."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import PullRequest, TriageRun

RECENT_RUNS = 20  # looked at, newest first: a run on the fast path of a base never learned stores none


def last_validation_imports(session: Session, *, pr_id: int) -> Any | None:
    """The `validation_imports` of the newest run, among the pull requests of the same repository with the
    same base branch, whose report stored them; None when none did. As stored: the caller checks it."""
    pull = session.get(PullRequest, pr_id)
    if pull is None:
        return None
    summaries = session.scalars(
        select(TriageRun.summary).join(PullRequest, TriageRun.pull_request_id == PullRequest.id)
        .where(PullRequest.repository_id == pull.repository_id, PullRequest.base_ref == pull.base_ref,
               TriageRun.summary.is_not(None))
        .order_by(TriageRun.id.desc()).limit(RECENT_RUNS))
    for summary in summaries:
        imports = summary.get("validation_imports") if isinstance(summary, dict) else None
        if imports is not None:
            return imports
    return None
