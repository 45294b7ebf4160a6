"""The dashboard tests' data, written through app.store's queries as the service writes it: two
repositories (one private), open windows of different ages awaiting follow-ups and prerequisites in various
states, a closed window, and two triage runs with suites and findings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.store.models import PullRequest, Reference
from app.store.queries import (
    close_window,
    finish_run,
    open_window,
    resolve_reference,
    start_run,
    upsert_installation,
    upsert_pull_request,
    upsert_reference,
    upsert_repository,
)
from app.store.types import utcnow

PUBLIC, PRIVATE = "acme/widgets", "acme/vault"
PRIVATE_TITLE = "Rotate the vault signing keys"
FAIL_FAST_RISK = ("A 30-minute collective timeout for --colocate with LoRA stays possible until #2204 adds "
                  "the fail-fast.")
OLDEST_TITLE = "Revert the over-broad assert in validate_args"
LORA_ARGV = ["python3", "train.py", "--colocate", "--disable-weights-backuper", "--lora-rank", "8"]

INCIDENT_SUITES = [
    {"id": "lora-e2e", "script": "tests/e2e/test_lora.py", "argv": LORA_ARGV,
     "base": {"outcome": "accepted", "exception": None, "message": None, "path": None, "line": None},
     "head": {"outcome": "rejected", "exception": "AssertionError", "path": "miles/args.py", "line": 612,
              "message": "backuper required with colocate"}},
    {"id": "dense-e2e", "script": "tests/e2e/test_dense.py", "argv": ["python3", "train.py"],
     "base": {"outcome": "accepted"}, "head": {"outcome": "accepted"}},
]
INCIDENT_FINDING = {"kind": "new_rejection", "severity": "blocking", "path": "miles/args.py", "line": 612,
                    "in_diff": True, "message": "head rejects 1 suite that base accepts",
                    "suites": ["lora-e2e"], "scripts": ["tests/e2e/test_lora.py"]}


@dataclass(frozen=True)
class Seed:
    now: datetime
    windows: dict[str, int]  # by role: oldest, private, cross, fresh, closed
    runs: dict[str, int]  # by role: incident, clean


def _pull(session: Session, repo_id: int, repo: str, number: int, title: str, merged_at: datetime,
          author: str = "octocat") -> PullRequest:
    return upsert_pull_request(session, repository_id=repo_id, number=number, title=title, author=author,
                               url=f"https://github.com/{repo}/pull/{number}", head_sha=f"{number:040x}",
                               base_sha="b" * 40, base_ref="main", state="closed", merged_at=merged_at)


def _awaited(session: Session, pr: PullRequest, target: str, number: int, kind: str, state: str) -> Reference:
    owner, name = target.split("/")
    reference = upsert_reference(session, pr_id=pr.id, target_owner=owner, target_repo=name,
                                 target_number=number, kind=kind,  # type: ignore[arg-type]
                                 sentence=f"#{number} will follow", url=f"https://github.com/{target}/pull/{number}")
    return resolve_reference(session, reference_id=reference.id, state=state)  # type: ignore[arg-type]


def seed_windows(session: Session, now: datetime) -> dict[str, int]:
    upsert_installation(session, installation_id=1, account_login="acme")
    public = upsert_repository(session, repository_id=11, full_name=PUBLIC, private=False, installation_id=1)
    private = upsert_repository(session, repository_id=12, full_name=PRIVATE, private=True, installation_id=1)
    day = timedelta(days=1)
    oldest = _pull(session, public.id, PUBLIC, 10, OLDEST_TITLE, now - 40 * day)
    secret = _pull(session, private.id, PRIVATE, 7, PRIVATE_TITLE, now - 20 * day, author="keeper")
    cross = _pull(session, public.id, PUBLIC, 11, "Make <Quant> config & flags stricter", now - 5 * day)
    fresh = _pull(session, public.id, PUBLIC, 12, "Merge despite a blocking finding", now - day / 12)
    done = _pull(session, public.id, PUBLIC, 9, "Split the launcher", now - 60 * day)
    windows = {
        "oldest": open_window(session, pr=oldest, risk=FAIL_FAST_RISK,
                              awaiting=[_awaited(session, oldest, PUBLIC, 2204, "followup", "open")]),
        "private": open_window(session, pr=secret, risk="Keys signed before the rotation still verify.",
                               awaiting=[_awaited(session, secret, PRIVATE, 5, "prerequisite",
                                                  "closed_unmerged")]),
        "cross": open_window(session, pr=cross, risk="Quantised configs may pass unchecked.",
                             awaiting=[_awaited(session, cross, "other/lib", 99, "followup", "draft")]),
        "fresh": open_window(session, pr=fresh, risk="A blocking finding was overridden.", awaiting=[]),
        "closed": open_window(session, pr=done, risk="The old launcher path is untested.",
                              awaiting=[_awaited(session, done, PUBLIC, 2100, "followup", "open")]),
    }
    close_window(session, window_id=windows["closed"].id, actor="maintainer", reason="superseded by #2223",
                 at=now - 10 * day)
    return {role: window.id for role, window in windows.items()}


def seed_runs(session: Session, now: datetime) -> dict[str, int]:
    reverted = _pull(session, 11, PUBLIC, 10, OLDEST_TITLE, now - timedelta(days=40))
    incident = start_run(session, pr=reverted, head_sha="c" * 40, base_sha="b" * 40).run
    incident.created_at = now - timedelta(hours=3)
    finish_run(session, run_id=incident.id, conclusion="failure", summary={"suites": 2},
               timing={"total": 1.5}, suites=INCIDENT_SUITES, findings=[INCIDENT_FINDING])
    clean = start_run(session, pr=_pull(session, 12, PRIVATE, 7, PRIVATE_TITLE, now - 20 * timedelta(days=1),
                                        author="keeper"), head_sha="d" * 40, base_sha="b" * 40).run
    clean.created_at = now - timedelta(hours=1)
    finish_run(session, run_id=clean.id, conclusion="success", summary={}, suites=[], findings=[])
    return {"incident": incident.id, "clean": clean.id}


def seed(session: Session) -> Seed:
    now = utcnow()
    return Seed(now=now, windows=seed_windows(session, now), runs=seed_runs(session, now))
