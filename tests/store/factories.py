"""Rows that tests need around the one under test, with plausible defaults."""

from __future__ import annotations

import itertools
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import Installation, PullRequest, Reference, Repository, RiskWindow
from app.store.queries import open_window, upsert_pull_request, upsert_reference


class Factory:
    """Ids are unique within one test; the repository of a name is made once."""

    def __init__(self) -> None:
        self._ids = itertools.count(1000)

    def repository(self, session: Session, full_name: str = "acme/widgets") -> Repository:
        existing = session.scalars(select(Repository).filter_by(full_name=full_name)).first()
        if existing is not None:
            return existing
        installation = Installation(id=next(self._ids), account_login=full_name.split("/")[0])
        repository = Repository(id=next(self._ids), full_name=full_name, private=False,
                                installation_id=installation.id)
        session.add(installation)
        session.flush()
        session.add(repository)
        session.flush()
        return repository

    def pull_request(self, session: Session, number: int = 1, *, repo: str = "acme/widgets",
                     head_sha: str = "a" * 40, merged_at: datetime | None = None,
                     title: str | None = None) -> PullRequest:
        repository = self.repository(session, repo)
        return upsert_pull_request(
            session, repository_id=repository.id, number=number, title=title or f"Change {number}",
            author="octocat", url=f"https://github.com/{repo}/pull/{number}", head_sha=head_sha,
            base_sha="b" * 40, base_ref="main", state="closed" if merged_at else "open", merged_at=merged_at)

    def reference(self, session: Session, pr: PullRequest, number: int, *, kind: str = "followup",
                  target: str = "acme/widgets") -> Reference:
        owner, name = target.split("/")
        return upsert_reference(session, pr_id=pr.id, target_owner=owner, target_repo=name,
                                target_number=number, kind=kind,
                                sentence=f"#{number} will add the fail-fast",
                                url=f"https://github.com/{target}/pull/{number}")

    def window(self, session: Session, number: int, *, opened_at: datetime, repo: str = "acme/widgets",
               awaiting: int | None = None) -> RiskWindow:
        pr = self.pull_request(session, number, repo=repo, merged_at=opened_at)
        references = [self.reference(session, pr, awaiting)] if awaiting is not None else []
        return open_window(session, pr=pr, risk=f"risk of #{number}", awaiting=references)
