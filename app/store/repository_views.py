"""The dashboard's reads of repositories: each one's default branch, its last health and its dead suites
(the JSON API), and for the repository page its matrix by script and its acceptance over time."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from app.store.cursor import decode_name_cursor, encode_name_cursor
from app.store.models import DeadSuite, MainHealth, Repository
from app.store.pages import DEFAULT_LIMIT, page_size
from app.store.shapes import DeadSuiteOut, EnvironmentOut, HealthOut, PolicyOut, RepositoryOut

HISTORY = 90  # healths in the acceptance chart
HEALTH_COLUMNS = (MainHealth.repository_id, MainHealth.sha, MainHealth.at, MainHealth.suites,
                  MainHealth.accepted, MainHealth.could_analyse, MainHealth.policy)


@dataclass(frozen=True)
class ScriptRow:
    """One CI script of the default branch's matrix and how its suites ended."""

    script: str
    suites: int
    accepted: int
    rejected: int
    errors: int
    outcomes: tuple[tuple[str, str], ...] = ()  # (suite id, outcome) of each suite, by id: the suite pages


@dataclass(frozen=True)
class RepositoryPage:
    """What the repository page shows beyond the API's view."""

    view: RepositoryOut
    repository_id: int
    reason: str | None  # the last health's sentence
    capture: dict[str, Any]  # the last health's scripts: considered, captured, partial, failed, disabled
    scripts: list[ScriptRow]
    history: list[HealthOut]  # oldest first


def list_repositories(session: Session, *, cursor: str | None = None,
                      limit: int = DEFAULT_LIMIT) -> tuple[list[RepositoryOut], str | None]:
    """The repositories the App sees (not removed) by name, a page at a time, each with its last health and
    dead suites; and the cursor of the next page (None on the last)."""
    size = page_size(limit)
    name = func.lower(Repository.full_name)
    query = (select(Repository.id, Repository.full_name, Repository.default_branch, name.label("sort_name"))
             .where(Repository.removed_at.is_(None)))
    if cursor is not None:
        last_name, last_id = decode_name_cursor(cursor)
        query = query.where(or_(name > last_name, and_(name == last_name, Repository.id > last_id)))
    rows = session.execute(query.order_by(name, Repository.id).limit(size + 1)).all()
    repositories = rows[:size]
    ids = [repository.id for repository in repositories]
    healths = _last_healths(session, ids)
    dead = _dead_suites(session, ids)
    items = [_view(row, healths.get(row.id), dead[row.id]) for row in repositories]
    last = repositories[-1] if repositories else None
    # the name as the database lowered it: the next page compares with the same function
    following = encode_name_cursor(last.sort_name, last.id) if last and len(rows) > size else None
    return items, following


def repository_view(session: Session, *, repo: str) -> RepositoryOut | None:
    """The repository GitHub last described as `owner/name` (any case), or None."""
    repository = repository_named(session, repo)
    if repository is None:
        return None
    return _view(repository, _last_healths(session, [repository.id]).get(repository.id),
                 _dead_suites(session, [repository.id])[repository.id])


def repository_page(session: Session, *, repo: str) -> RepositoryPage | None:
    repository = repository_named(session, repo)
    if repository is None:
        return None
    last = session.scalars(_healths(repository.id).limit(1)).first()
    history = session.execute(select(*HEALTH_COLUMNS).where(MainHealth.repository_id == repository.id,
                                                            MainHealth.probe.is_(False))
                              .order_by(MainHealth.at.desc(), MainHealth.id.desc()).limit(HISTORY)).all()
    dead = _dead_suites(session, [repository.id])[repository.id]
    view = _view(repository, history[0] if history else None, dead)
    return RepositoryPage(view=view, repository_id=repository.id, reason=last.reason if last else None,
                          capture=dict(last.scripts) if last else {},
                          scripts=script_rows(last.outcomes) if last else [],
                          history=[_health(row) for row in reversed(history)])


def script_rows(outcomes: dict[str, Any]) -> list[ScriptRow]:
    """The matrix by CI script: suites, and how many main accepts, rejects or errors on."""
    by_script: defaultdict[str, list[tuple[str, str]]] = defaultdict(list)
    for suite, outcome in sorted(outcomes.items()):
        by_script[str(outcome.get("script", ""))].append((suite, str(outcome.get("outcome", "error"))))
    rows = []
    for script, suites in sorted(by_script.items()):
        counts = Counter(outcome for _, outcome in suites)
        rows.append(ScriptRow(script, len(suites), counts["accepted"], counts["rejected"],
                              len(suites) - counts["accepted"] - counts["rejected"], tuple(suites)))
    return rows


def repository_named(session: Session, repo: str) -> Repository | None:
    """The repository GitHub last described as `owner/name` (any case): the newest of a name reused."""
    return session.scalars(select(Repository).where(func.lower(Repository.full_name) == repo.lower())
                           .order_by(Repository.updated_at.desc(), Repository.id.desc()).limit(1)).first()


def _healths(repository_id: int) -> Any:
    return (select(MainHealth).where(MainHealth.repository_id == repository_id, MainHealth.probe.is_(False))
            .order_by(MainHealth.at.desc(), MainHealth.id.desc()))


def _last_healths(session: Session, repository_ids: list[int]) -> dict[int, Any]:
    """Each repository's latest health (columns of the view only: no outcomes), in one query."""
    if not repository_ids:
        return {}
    newest = func.row_number().over(partition_by=MainHealth.repository_id,
                                    order_by=(MainHealth.at.desc(), MainHealth.id.desc()))
    ranked = (select(MainHealth.id, newest.label("rank"))
              .where(MainHealth.repository_id.in_(repository_ids), MainHealth.probe.is_(False)).subquery())
    rows = session.execute(select(*HEALTH_COLUMNS).join(ranked, ranked.c.id == MainHealth.id)
                           .where(ranked.c.rank == 1))
    return {row.repository_id: row for row in rows}


def _dead_suites(session: Session, repository_ids: list[int]) -> defaultdict[int, list[DeadSuiteOut]]:
    found: defaultdict[int, list[DeadSuiteOut]] = defaultdict(list)
    if not repository_ids:
        return found
    # columns, not objects: a page of a thousand repositories may list thousands
    rows = session.execute(select(DeadSuite.repository_id, DeadSuite.suite, DeadSuite.script, DeadSuite.error,
                                  DeadSuite.path, DeadSuite.line, DeadSuite.since_sha, DeadSuite.window_id)
                           .where(DeadSuite.repository_id.in_(repository_ids), DeadSuite.healed_sha.is_(None))
                           .order_by(DeadSuite.opened_at, DeadSuite.id))
    for dead in rows:
        found[dead.repository_id].append({"suite": dead.suite, "script": dead.script, "error": dead.error,
                                          "path": dead.path, "line": dead.line, "since_sha": dead.since_sha,
                                          "window_id": dead.window_id})
    return found


def _health(row: Any) -> HealthOut:
    return {"sha": row.sha, "at": row.at, "suites": row.suites, "accepted": row.accepted,
            "could_analyse": row.could_analyse}


def _environment(stored: Any) -> EnvironmentOut | None:
    """The environment a health recorded; None for a health stored before environments were (or one that
    could not run)."""
    if not isinstance(stored, dict) or not stored.get("python"):
        return None
    return {"python": str(stored["python"]), "python_asked": list(stored.get("python_asked", [])),
            "requirements": list(stored.get("requirements", [])),
            "installed": list(stored.get("installed", [])),
            "digest": str(stored.get("digest", "")), "stub_modules": list(stored.get("stub_modules", [])),
            "stub_missing_modules": bool(stored.get("stub_missing_modules", True))}


def _view(repository: Any, health: Any, dead: list[DeadSuiteOut]) -> RepositoryOut:
    """REPOSITORY: a row or an object with id, full_name and default_branch."""
    policy: PolicyOut | None = None
    if health is not None and health.policy:
        policy = {"source": str(health.policy.get("source")), "path": health.policy.get("path"),
                  "repository": str(health.policy.get("repository") or repository.full_name),
                  "environment": _environment(health.policy.get("environment"))}
    return {"repo": repository.full_name, "default_branch": repository.default_branch, "policy": policy,
            "last_health": _health(health) if health is not None else None, "dead_suites": dead}
