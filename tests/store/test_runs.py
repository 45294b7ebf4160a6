"""Triage runs: supersede on a newer head, is-current checks, results stored once, acknowledgements."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.analysis.core.model import Finding, Outcome, Suite
from app.store.models import TriageRun
from app.store.queries import (
    acknowledge_findings,
    fail_run,
    finish_run,
    is_current,
    latest_run,
    mark_running,
    run_for_check_run,
    run_with_suites,
    start_run,
    upsert_pull_request,
)
from app.store.session import session_scope

from .factories import Factory

SUITES = [Suite(id="lora-colocate", script="tests/e2e/lora.py",
                argv=("--colocate", "--disable-weights-backuper")),
          Suite(id="dense", script="tests/e2e/dense.py", argv=("--tp", "2"))]
OUTCOMES = {
    "lora-colocate": (Outcome("accepted"), Outcome("rejected", "AssertionError", "backuper needs offload",
                                                  "miles/utils/arguments.py", 612)),
    "dense": (Outcome("accepted"), Outcome("accepted")),
}
FINDING = Finding(kind="new_rejection", severity="blocking", message="rejects --disable-weights-backuper",
                  scripts=("tests/e2e/lora.py",), suites=("lora-colocate",), path="miles/utils/arguments.py",
                  line=612, in_diff=True)


def suite_records() -> list[dict[str, object]]:
    return [s.to_json() | {"base": OUTCOMES[s.id][0].to_json(), "head": OUTCOMES[s.id][1].to_json()}
            for s in SUITES]


def finish(session: Session, run: TriageRun) -> TriageRun:
    return finish_run(session, run_id=run.id, conclusion="failure",
                      summary={"broken_suites": ["lora-colocate"]}, suites=suite_records(),
                      findings=[FINDING.to_json()], timing={"total_s": 1.5})


def test_a_newer_head_supersedes_queued_and_running_runs(session: Session, make: Factory) -> None:
    pr = make.pull_request(session)
    done = start_run(session, pr=pr, head_sha="1" * 40, base_sha="b" * 40).run
    finish(session, done)
    running = start_run(session, pr=pr, head_sha="2" * 40, base_sha="b" * 40).run
    mark_running(session, run_id=running.id, check_run_id=4)
    queued = start_run(session, pr=pr.id, head_sha="3" * 40, base_sha="b" * 40)
    assert queued.superseded == [running]
    newest = start_run(session, pr=pr, head_sha="4" * 40, base_sha="b" * 40)
    assert newest.superseded == [queued.run]
    assert (running.status, running.conclusion) == ("superseded", "cancelled")
    assert running.superseded_by == "3" * 40
    assert running.check_run_id == 4 and running.finished_at is not None
    assert queued.run.superseded_by == "4" * 40
    assert (done.status, done.conclusion) == ("completed", "failure")  # finished runs are history
    assert newest.run.status == "queued"
    assert latest_run(session, pr_id=pr.id) is newest.run


def test_runs_of_other_pull_requests_are_left_alone(session: Session, make: Factory) -> None:
    first, second = make.pull_request(session, 1), make.pull_request(session, 2)
    other = start_run(session, pr=second, head_sha="1" * 40, base_sha="b" * 40).run
    assert start_run(session, pr=first, head_sha="1" * 40, base_sha="b" * 40).superseded == []
    assert other.status == "queued"
    with pytest.raises(LookupError):
        start_run(session, pr=999_999, head_sha="1" * 40, base_sha="b" * 40)


def test_is_current(session: Session, make: Factory) -> None:
    pr = make.pull_request(session, head_sha="1" * 40)
    old = start_run(session, pr=pr, head_sha="1" * 40, base_sha="b" * 40).run
    assert is_current(session, run_id=old.id)
    new = start_run(session, pr=pr, head_sha="2" * 40, base_sha="b" * 40).run
    assert not is_current(session, run_id=old.id)
    # The newer run exists but the PR row still names the old head until its webhook is processed.
    assert not is_current(session, run_id=new.id)
    upsert_pull_request(session, repository_id=pr.repository_id, number=pr.number, title=pr.title,
                        author=pr.author, url=pr.url, head_sha="2" * 40, base_sha="b" * 40, base_ref="main",
                        state="open")
    assert is_current(session, run_id=new.id)


def test_a_finished_run_is_not_current_once_a_rerun_starts(session: Session, make: Factory) -> None:
    pr = make.pull_request(session, head_sha="1" * 40)
    first = start_run(session, pr=pr, head_sha="1" * 40, base_sha="b" * 40).run
    finish(session, first)
    assert is_current(session, run_id=first.id)
    start_run(session, pr=pr, head_sha="1" * 40, base_sha="b" * 40)  # /triage rerun, same head
    assert not is_current(session, run_id=first.id)


def test_finish_run_stores_suites_and_findings_from_the_analysis_shapes(db: Engine, make: Factory) -> None:
    with session_scope(db) as session:
        run = start_run(session, pr=make.pull_request(session), head_sha="1" * 40, base_sha="b" * 40).run
        mark_running(session, run_id=run.id, check_run_id=2_147_483_648_123)  # beyond 32 bits
        finish(session, run)
    with session_scope(db, read_only=True) as session:
        detail = run_with_suites(session, run_id=run.id)
        assert run_for_check_run(session, check_run_id=2_147_483_648_123) is not None
    assert detail is not None
    assert (detail["status"], detail["conclusion"]) == ("completed", "failure")
    assert detail["summary"] == {"broken_suites": ["lora-colocate"]} and detail["timing"] == {"total_s": 1.5}
    assert detail["started_at"] is not None and detail["finished_at"] is not None
    assert [Suite(id=s["id"], script=s["script"], argv=tuple(s["argv"])) for s in detail["suites"]] == SUITES
    lora = detail["suites"][0]
    assert lora["base"] is not None and lora["head"] is not None
    assert (Outcome.from_json(lora["base"]), Outcome.from_json(lora["head"])) == OUTCOMES["lora-colocate"]
    [finding] = detail["findings"]
    assert Finding.from_json(dict(finding)) == FINDING
    assert finding["acknowledged_by"] is None


def test_finish_run_twice_changes_nothing(session: Session, make: Factory) -> None:
    """A retried job (its worker was killed after storing) must not store its results twice."""
    run = start_run(session, pr=make.pull_request(session), head_sha="1" * 40, base_sha="b" * 40).run
    finish(session, run)
    again = finish_run(session, run_id=run.id, conclusion="success", summary={}, suites=suite_records(),
                       findings=[])
    assert again.conclusion == "failure"
    assert len(again.suites) == 2 and len(again.findings) == 1


def test_a_superseded_run_keeps_its_status_but_stores_its_results(session: Session, make: Factory) -> None:
    pr = make.pull_request(session)
    old = start_run(session, pr=pr, head_sha="1" * 40, base_sha="b" * 40).run
    start_run(session, pr=pr, head_sha="2" * 40, base_sha="b" * 40)
    finish(session, old)
    assert (old.status, old.conclusion) == ("superseded", "cancelled")
    assert old.summary is not None and len(old.findings) == 1


def test_fail_run_completes_it_action_required(session: Session, make: Factory) -> None:
    run = start_run(session, pr=make.pull_request(session), head_sha="1" * 40, base_sha="b" * 40).run
    failed = fail_run(session, run_id=run.id, error="no sandbox: bwrap missing")
    assert (failed.status, failed.conclusion) == ("failed", "action_required")
    assert failed.error == "no sandbox: bwrap missing"
    assert failed.finished_at is not None
    with pytest.raises(LookupError):
        fail_run(session, run_id=999_999, error="gone")


def test_acknowledge_blocking_findings(session: Session, make: Factory) -> None:
    run = start_run(session, pr=make.pull_request(session), head_sha="1" * 40, base_sha="b" * 40).run
    warning = Finding(kind="not_exercised", severity="warning", message="no suite reaches line 700")
    finish_run(session, run_id=run.id, conclusion="failure", summary={}, suites=[],
               findings=[FINDING.to_json(), warning.to_json()])
    reason = "flag removed in #2223"
    assert acknowledge_findings(session, run_id=run.id, actor="maintainer", reason=reason) == 1
    assert acknowledge_findings(session, run_id=run.id, actor="someone", reason="again") == 0
    detail = run_with_suites(session, run_id=run.id)
    assert detail is not None
    blocking, other = detail["findings"]
    assert (blocking["acknowledged_by"], blocking["ack_reason"]) == ("maintainer", reason)
    assert blocking["acknowledged_at"] is not None and other["acknowledged_by"] is None


def test_concurrent_starts_for_one_pull_request_leave_one_active_run(db: Engine, make: Factory) -> None:
    with session_scope(db) as session:
        pr_id = make.pull_request(session).id
    workers = 4
    start = threading.Barrier(workers)

    def begin(n: int) -> int:
        start.wait(10)
        with session_scope(db) as session:
            return start_run(session, pr=pr_id, head_sha=f"{n:040d}", base_sha="b" * 40).run.id

    with ThreadPoolExecutor(workers) as pool:
        run_ids = list(pool.map(begin, range(workers)))
    with session_scope(db, read_only=True) as session:
        statuses = {run_id: session.get_one(TriageRun, run_id).status for run_id in run_ids}
    assert sorted(statuses.values()) == ["queued"] + ["superseded"] * (workers - 1)
    assert statuses[max(run_ids)] == "queued"  # the last to start is the one that stays
