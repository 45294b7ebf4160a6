"""The dashboard tests' data, written through app.store's queries as the service writes it: two
repositories (one private), open windows of different ages awaiting follow-ups and prerequisites in various
states, a closed window, and two triage runs with suites and findings; seed_pages() adds a repository with
long names, a dead suite on its default branch and a run explained down to its minimal arguments."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.store.health_checks import Breakage, HealthRecord, open_dead_suite, record_health
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


# The page-by-page browser tests' extra data (seed_pages): a third repository with the longest names GitHub
# allows in spirit, a default branch that rejects one CI suite (a dead-suite window on the home page), and a
# run whose finding carries its minimal arguments, so that every pill, id and sha has something to wrap.
LONG_REPO = "nvidia-nemo-reinforcement-lab/megatron-lm-functional-tests-weekly-gpu-matrix"
LONG_SCRIPT = ("tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_dist_optimizer"
               "_overlap_grad_reduce_param_gather/model_config.yaml")
LONG_SUITE = f"{LONG_SCRIPT}#2"
LONG_TITLE = ("Make --tp-comm-overlap-disable-qkv-with-deterministic-mode-and-fp8-param-gather stricter in "
              "validate_args")
DEAD_ERROR = ("AssertionError: --tp-comm-overlap is not supported with --deterministic-mode (the determinism "
              "check rejects it)")
ARGUMENTS_PY, UNIT_SCRIPT = "megatron/training/arguments.py", "tests/unit_tests/run_ci_test.sh"
DETERMINISTIC_ARGV = ["torchrun", "--nproc-per-node=8", "pretrain_gpt.py", "--tensor-model-parallel-size",
                      "2", "--pipeline-model-parallel-size", "2", "--tp-comm-overlap", "--deterministic-mode",
                      "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
                      "--data-path", "/workspace/data/my-gpt3_00_text_document"]


def _outcomes(*, broken: bool) -> dict[str, dict[str, Any]]:
    rejected = {"outcome": "rejected", "exception": "AssertionError", "path": ARGUMENTS_PY,
                "line": 1077, "message": DEAD_ERROR.removeprefix("AssertionError: ")}
    return {LONG_SUITE: {"script": LONG_SCRIPT, **(rejected if broken else {"outcome": "accepted"})},
            f"{LONG_SCRIPT}#1": {"script": LONG_SCRIPT, "outcome": "accepted"},
            UNIT_SCRIPT: {"script": UNIT_SCRIPT,
                                                "outcome": "accepted"}}


# A Megatron-shaped analysis environment: real torch, CUDA-only packages stubbed, long distribution names.
LONG_DISTRIBUTION = "nvidia-modelopt-with-a-very-long-distribution-name"
ENVIRONMENT = {"python": "3.12.11", "python_asked": ["3.12", "3.11"],
               "requirements": ["torch==2.13.0+cpu", f"{LONG_DISTRIBUTION}==0.35.0", "packaging",
                                "einops==0.8.1"],
               "installed": ["einops==0.8.1", "filelock==3.20.0", f"{LONG_DISTRIBUTION}==0.35.0",
                             "packaging==25.0", "sympy==1.14.0", "torch==2.13.0+cpu",
                             "typing_extensions==4.15.0"],
               "digest": "3f2a9c0d1e4b5a67", "stub_modules": ["apex", "transformer_engine"],
               "stub_missing_modules": True}


def _health(sha: str, *, broken: bool) -> HealthRecord:
    return HealthRecord("main", sha, 3, 2 if broken else 3, True, "the default branch's validation ran",
                        {"source": "repository", "path": ".github/prtriage.yml", "repository": LONG_REPO,
                         "environment": ENVIRONMENT},
                        {"considered": 3, "captured": 2, "partial": [], "failed": ["tests/test_utils/ci.sh"],
                         "no_entry": [], "disabled": []}, _outcomes(broken=broken))


def seed_dead_suite(session: Session, now: datetime) -> int:
    """LONG_REPO's main: accepted for a week, then broken by a commit; the dead suite's window id."""
    repository = upsert_repository(session, repository_id=9_000_000_013, full_name=LONG_REPO, private=False,
                                   installation_id=1)
    repository.default_branch = "main"
    good, broken = "0123456789abcdef" * 2 + "01234567", "fedcba9876543210" * 2 + "fedcba98"
    for days in range(7, 1, -1):
        record_health(session, repository_id=repository.id, record=_health(good, broken=False),
                      at=now - timedelta(days=days))
    record_health(session, repository_id=repository.id, record=_health(broken, broken=True),
                  at=now - timedelta(hours=20))
    breakage = Breakage(LONG_SUITE, LONG_SCRIPT, "rejected", DEAD_ERROR, ARGUMENTS_PY, 1077, broken)
    dead = open_dead_suite(session, repository_id=repository.id, breakage=breakage, found_sha=broken,
                           at=now - timedelta(hours=20))
    return dead.window_id


def seed_explained_run(session: Session, now: datetime) -> int:
    """A failed run of LONG_REPO with its health line, capture counts, timing and a blocking finding that
    names its minimal arguments."""
    pull = upsert_pull_request(session, repository_id=9_000_000_013, number=123456, title=LONG_TITLE,
                               author="a-maintainer-with-a-long-login", head_sha="e" * 40, base_sha="a" * 40,
                               url=f"https://github.com/{LONG_REPO}/pull/123456", base_ref="main",
                               state="open")
    run = start_run(session, pr=pull, head_sha="e" * 40, base_sha="a" * 40).run
    run.created_at = now - timedelta(minutes=30)
    rejected = {"outcome": "rejected", "exception": "AssertionError",
                "message": DEAD_ERROR.removeprefix("AssertionError: "), "path": ARGUMENTS_PY, "line": 1077}
    timeout = {"outcome": "error", "exception": "TimeoutError", "message": "the suite ran for 120 s",
               "path": None, "line": None}
    suites: list[dict[str, Any]] = [
        {"id": LONG_SUITE, "script": LONG_SCRIPT, "argv": DETERMINISTIC_ARGV, "base": {"outcome": "accepted"},
         "head": rejected},
        {"id": UNIT_SCRIPT, "script": UNIT_SCRIPT, "argv": ["bash", UNIT_SCRIPT],
         "base": {"outcome": "accepted"}, "head": timeout},
        {"id": "skipped", "script": "tests/unit_tests/skipped.sh", "argv": ["true"], "base": None,
         "head": None}]
    finding = {"kind": "new_rejection", "severity": "blocking", "path": ARGUMENTS_PY,
               "line": 1077, "in_diff": True, "message": "head rejects 1 suite that base accepts",
               "suites": [LONG_SUITE], "scripts": [LONG_SCRIPT],
               "minimal_args": {"args": ["--tp-comm-overlap", "--deterministic-mode"], "count": 2, "of": 9,
                                "suite": LONG_SUITE, "complete": True, "every_suite_passes": True}}
    warning = {"kind": "new_error", "severity": "warning", "path": None, "line": None, "in_diff": False,
               "message": "head errors on 1 suite that base accepts", "suites": [UNIT_SCRIPT],
               "scripts": [UNIT_SCRIPT]}
    health = {"could_analyse": True, "suites": 3, "reason": "the base revision accepts 2 of 3 suites",
              "base": {"accepted": 2, "rejected": 0, "error": 0}}
    summary = {"suites": 3, "health": health, "findings": [finding, warning],  # the report: minimal_args
               "capture": {"scripts": 3, "captured": 2, "failed": ["tests/test_utils/ci.sh"], "cached": True}}
    timing = {"capture_s": 12.3, "base_s": 4.5, "base_cached": True, "head_s": 40.2, "minimize_s": 8.1,
              "total_s": 65.1}
    finish_run(session, run_id=run.id, conclusion="failure", summary=summary, timing=timing, suites=suites,
               findings=[finding, warning])
    return run.id


@dataclass(frozen=True)
class PagesSeed:
    base: Seed
    dead_window: int
    explained_run: int


def seed_pages(session: Session) -> PagesSeed:
    """seed() and the extra data of the page-by-page browser tests (a database of their own: the other
    tests count the windows and runs of seed() alone)."""
    base = seed(session)
    return PagesSeed(base, seed_dead_suite(session, base.now), seed_explained_run(session, base.now))
