"""The default branch's health: `doctor` of its head in the worker (after each push to it, and every
PRTRIAGE_MAIN_HEALTH_SECONDS), stored through the store. A CI suite main rejects or errors on becomes a
dead-suite risk window naming its error, its line and the commit that broke it; the window closes when main
accepts the suite again. A blind health (the policy's threshold not met) is stored as blindness and opens or
closes no dead suite: a harness that cannot see says nothing about main.

The breaking commit is searched among the commits since the last health at which the suite was accepted
(those the push lists, else the compare API's), by bisection: each commit looked at is a doctor of its own,
kept as a `probe` health, and its validation reuses cached results (validation_cache).

Each health keeps the policy it used (source, path) and its analysis environment (environment_facts): the
repository page says under which Python and with which packages main was judged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from app.analysis.core.model import Matrix
from app.analysis.core.policy import PolicyError
from app.analysis.verdict.health import Health
from app.engine.check_steps import AnalysisError, doctor_revision
from app.github import GitHubClient, GitHubError, TarballRefused, download_tree
from app.service.services import Services
from app.store.health_checks import (
    Breakage,
    HealthRecord,
    dead_suites,
    heal_dead_suite,
    health_at,
    last_accepting,
    open_dead_suite,
    record_health,
    set_default_branch,
)
from app.store.models import MainHealth, Repository
from app.store.session import session_scope
from app.triage.base_policy import policy_with_source
from app.triage.environment_facts import environment_facts

log = logging.getLogger(__name__)

MAX_PROBES = 12  # doctors of earlier commits per search: enough to bisect 4,096 commits


@dataclass(frozen=True)
class MainTarget:
    repository_id: int
    installation_id: int
    owner: str
    repo: str
    branch: str | None  # None until a push or GitHub names it


@dataclass(frozen=True)
class MainOutcome:
    health_id: int
    could_analyse: bool
    opened: tuple[str, ...] = ()  # suites found dead
    healed: tuple[str, ...] = ()


def repositories_to_check(services: Services) -> list[int]:
    """The repositories the App is installed on now."""
    with session_scope(services.sessions, read_only=True) as session:
        return list(session.scalars(select(Repository.id).where(Repository.installation_id.is_not(None),
                                                                Repository.removed_at.is_(None))
                                    .order_by(Repository.id)))


def check_repository(services: Services, repository_id: int) -> MainOutcome | None:
    """The periodic health of one repository's default branch at its head now; None when not installed."""
    target = _target(services, repository_id)
    if target is None:
        return None
    client = services.client(target.installation_id)
    branch = target.branch or client.default_branch(target.owner, target.repo)
    head = client.branch_head(target.owner, target.repo, branch)
    return check_main(services, client, target, branch=branch, head_sha=head)


def check_push(services: Services, *, repository_id: int, branch: str, head_sha: str, before_sha: str | None,
               commits: Sequence[str]) -> MainOutcome | None:
    """The health after a push of COMMITS (oldest first) to the default branch BRANCH."""
    with services.writing() as session:
        set_default_branch(session, repository_id=repository_id, branch=branch)
    target = _target(services, repository_id)
    if target is None:
        return None
    client = services.client(target.installation_id)
    return check_main(services, client, target, branch=branch, head_sha=head_sha, before_sha=before_sha,
                      commits=commits)


def check_main(services: Services, client: GitHubClient, target: MainTarget, *, branch: str, head_sha: str,
               before_sha: str | None = None, commits: Sequence[str] = ()) -> MainOutcome:
    """Doctor HEAD_SHA, store it, and open or heal dead suites when it could see."""
    doctor = Doctor(services, client, target, branch)
    head = doctor.run(head_sha, probe=False)
    if not head.could_analyse:
        return MainOutcome(head.id, False)
    with session_scope(services.sessions, read_only=True) as session:
        known = {dead.suite: dead.id for dead in dead_suites(session, repository_id=target.repository_id)}
    rejected = {suite: outcome for suite, outcome in head.outcomes.items()
                if outcome["outcome"] != "accepted"}
    healed = [suite for suite in known if suite not in rejected]
    found = [suite for suite in rejected if suite not in known]
    breakages = [_breakage(suite, rejected[suite],
                           _breaking_commit(doctor, suite, head_sha, before_sha, commits)) for suite in found]
    with services.writing() as session:
        # again inside the write: a check of the same repository that ran meanwhile may have opened some
        current = {dead.suite for dead in dead_suites(session, repository_id=target.repository_id)}
        breakages = [breakage for breakage in breakages if breakage.suite not in current]
        for suite in healed:
            why = "accepted again" if suite in head.outcomes else "no longer run by CI"
            heal_dead_suite(session, dead_suite_id=known[suite], sha=head_sha,
                            reason=f"main {head_sha[:12]}: {why}")
        for breakage in breakages:
            open_dead_suite(session, repository_id=target.repository_id, breakage=breakage,
                            found_sha=head_sha)
    return MainOutcome(head.id, True, tuple(b.suite for b in breakages), tuple(healed))


class Doctor:
    """Doctors of the default branch's commits, each stored once per search (a bisection looks at a commit
    at most once, and reuses one an earlier search stored)."""

    def __init__(self, services: Services, client: GitHubClient, target: MainTarget, branch: str) -> None:
        self.services, self.client, self.target, self.branch = services, client, target, branch
        self.probes = 0

    def run(self, sha: str, *, probe: bool) -> MainHealth:
        record = self._doctor(sha)
        with self.services.writing() as session:
            row = record_health(session, repository_id=self.target.repository_id, record=record, probe=probe)
            session.expunge(row)
        return row

    def outcomes(self, sha: str) -> dict[str, Any]:
        """How each suite ended at SHA: a stored doctor of it, else a new probe."""
        with session_scope(self.services.sessions, read_only=True) as session:
            stored = health_at(session, repository_id=self.target.repository_id, sha=sha)
            if stored is not None:
                return dict(stored.outcomes)
        self.probes += 1
        return dict(self.run(sha, probe=True).outcomes)

    def _doctor(self, sha: str) -> HealthRecord:
        owner, repo = self.target.owner, self.target.repo
        source: dict[str, Any] = {"source": "default", "path": None, "repository": f"{owner}/{repo}"}
        try:
            policy, source = policy_with_source(self.client, owner, repo, sha)
            tree = download_tree(self.client, owner, repo, sha, self.services.trees_dir)
            cache_dir = self.services.settings.cache_dir
            matrix, health = doctor_revision(tree, policy, cache_dir=cache_dir, allow_unsandboxed=False,
                                             repository=f"{owner}/{repo}")
            source = {**source, "environment": environment_facts(policy, tree, cache_dir)}
        except (AnalysisError, PolicyError, TarballRefused) as exc:
            log.warning("main health of %s/%s at %s: %s", owner, repo, sha[:12], exc)
            return HealthRecord(self.branch, sha, 0, 0, False, f"could not run: {exc}", source, {}, {})
        return health_record(self.branch, sha, matrix, health, source)


def health_record(branch: str, sha: str, matrix: Matrix, health: Health,
                  policy: dict[str, Any]) -> HealthRecord:
    """What the store keeps of a doctor: the counts, and every suite's script and outcome."""
    failures = {failure.suite: failure.outcome.to_json() for failure in health.base_failures}
    outcomes = {suite.id: {"script": suite.script, **failures.get(suite.id, {"outcome": "accepted"})}
                for suite in matrix.suites}
    return HealthRecord(branch, sha, health.suites, health.base_accepted, health.could_analyse, health.reason,
                        policy, health.to_json()["scripts"], outcomes)


def _breakage(suite: str, outcome: dict[str, Any], since: str | None) -> Breakage:
    error = ": ".join(part for part in (outcome.get("exception"), outcome.get("message")) if part)
    return Breakage(suite=suite, script=str(outcome.get("script", "")), outcome=str(outcome["outcome"]),
                    error=error or str(outcome["outcome"]), path=outcome.get("path"),
                    line=outcome.get("line"), since_sha=since)


def _breaking_commit(doctor: Doctor, suite: str, head_sha: str, before_sha: str | None,
                     commits: Sequence[str]) -> str | None:
    """The first commit since the suite was last accepted at which main rejects it; None when no commit
    that accepted it is known."""
    with session_scope(doctor.services.sessions, read_only=True) as session:
        accepted_at = last_accepting(session, repository_id=doctor.target.repository_id, suite=suite)
    if accepted_at is None and before_sha is not None and not _broken(doctor.outcomes(before_sha), suite):
        accepted_at = before_sha
    if accepted_at is None:
        return None
    path = _commits_since(doctor, accepted_at, head_sha, before_sha, commits)
    return bisect(path, lambda sha: _broken(doctor.outcomes(sha), suite), budget=MAX_PROBES)


def _commits_since(doctor: Doctor, accepted_at: str, head_sha: str, before_sha: str | None,
                   commits: Sequence[str]) -> list[str]:
    """The commits after ACCEPTED_AT up to HEAD_SHA, oldest first: the push's own list when the suite was
    accepted just before it, else GitHub's; the head alone when neither can say."""
    path = list(commits) if accepted_at == before_sha and commits else []
    if not path:
        try:
            path = doctor.client.commits_between(doctor.target.owner, doctor.target.repo, accepted_at,
                                                 head_sha)
        except GitHubError as exc:
            log.warning("main health: commits since %s not listed: %s", accepted_at[:12], exc)
    if not path or path[-1] != head_sha:
        path.append(head_sha)
    return path


def bisect(path: Sequence[str], broken: Callable[[str], bool], *, budget: int) -> str:
    """The first commit of PATH that is broken, given that the one before PATH is not and PATH's last is;
    at most BUDGET commits are looked at (then the earliest commit known broken)."""
    good, bad = -1, len(path) - 1
    while bad - good > 1 and budget > 0:
        middle = (good + bad) // 2
        budget -= 1
        if broken(path[middle]):
            bad = middle
        else:
            good = middle
    return path[bad]


def _broken(outcomes: dict[str, Any], suite: str) -> bool:
    """Whether SUITE ran and was not accepted (a commit before the suite existed did not break it)."""
    outcome = outcomes.get(suite)
    return outcome is not None and outcome.get("outcome") != "accepted"


def _target(services: Services, repository_id: int) -> MainTarget | None:
    with session_scope(services.sessions, read_only=True) as session:
        repository = session.get(Repository, repository_id)
        if repository is None or repository.installation_id is None or repository.removed_at is not None:
            return None
        owner, _, name = repository.full_name.partition("/")
        return MainTarget(repository.id, repository.installation_id, owner, name, repository.default_branch)
