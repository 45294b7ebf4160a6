"""The dashboard's run list: newest first with findings, filters by repository and PR, keyset pages."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from sqlalchemy.orm import Session

from app.analysis.core.model import Finding
from app.store.models import TriageRun
from app.store.queries import finish_run, list_runs, run_with_suites, runs_over_time, start_run

from .factories import Factory

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BLOCKING = Finding(kind="new_rejection", severity="blocking", message="rejects 5 suites", suites=("lora",))


def run_at(session: Session, make: Factory, number: int, minutes: int,
           repo: str = "acme/widgets") -> TriageRun:
    pr = make.pull_request(session, number, repo=repo)
    run = start_run(session, pr=pr, head_sha=f"{minutes:040d}", base_sha="b" * 40).run
    run.created_at = T0 + timedelta(minutes=minutes)  # distinct, known times
    return run


def test_runs_newest_first_with_their_findings(session: Session, make: Factory) -> None:
    old = run_at(session, make, 1, 0)
    new = run_at(session, make, 2, 10)
    finish_run(session, run_id=old.id, conclusion="failure", summary={}, suites=[],
               findings=[BLOCKING.to_json()])
    items, cursor = list_runs(session)
    assert cursor is None
    assert [i["id"] for i in items] == [new.id, old.id]
    assert items[0]["findings"] == []
    assert [f["message"] for f in items[1]["findings"]] == ["rejects 5 suites"]
    assert items[1]["pr"]["number"] == 1 and items[1]["repo"] == "acme/widgets"
    detail = run_with_suites(session, run_id=old.id)
    assert detail is not None and set(detail) == {*items[1], "summary", "timing", "suites", "acknowledged_by",
                                                  "ack_reason", "acknowledged_at", "events"}
    assert run_with_suites(session, run_id=new.id + 1000) is None


def test_filters_by_repository_and_pull_request(session: Session, make: Factory) -> None:
    first = run_at(session, make, 1, 0)
    second = run_at(session, make, 1, 5)  # supersedes the first
    other_pr = run_at(session, make, 2, 10)
    other_repo = run_at(session, make, 1, 15, repo="acme/gadgets")
    assert [i["id"] for i in list_runs(session, repo="acme/widgets")[0]] == [other_pr.id, second.id, first.id]
    assert [i["id"] for i in list_runs(session, repo="acme/widgets", pr=1)[0]] == [second.id, first.id]
    assert [i["id"] for i in list_runs(session, repo="ACME/gadgets")[0]] == [other_repo.id]
    assert list_runs(session, repo="acme/widgets", pr=1)[0][1]["status"] == "superseded"


def test_a_name_two_repositories_had_lists_the_runs_of_both(session: Session, make: Factory) -> None:
    old = run_at(session, make, 1, 0, repo="acme/Widgets")  # a repository deleted, its name taken again
    new = run_at(session, make, 1, 5)
    run_at(session, make, 1, 10, repo="acme/gadgets")
    assert old.repository_id != new.repository_id  # each run names its own pull request's repository
    assert [new.repository_id, old.repository_id] == [make.pull_request(session, 1).repository_id,
                                                      make.pull_request(session, 1, repo="acme/Widgets")
                                                      .repository_id]
    assert [i["id"] for i in list_runs(session, repo="acme/widgets")[0]] == [new.id, old.id]
    assert list_runs(session, repo="acme/nothing") == ([], None)


def test_run_pages_are_stable(session: Session, make: Factory) -> None:
    runs = [run_at(session, make, n, n // 2) for n in range(11)]  # pairs share a creation time
    expected = [r.id for r in sorted(runs, key=lambda r: (r.created_at, r.id), reverse=True)]
    seen: list[int] = []
    cursor: str | None = None
    while True:
        items, cursor = list_runs(session, cursor=cursor, limit=4)
        seen += [i["id"] for i in items]
        if cursor is None:
            break
    assert seen == expected


def test_runs_over_time_count_each_utc_day_by_outcome(session: Session, make: Factory) -> None:
    blocked = run_at(session, make, 1, 0)  # March 1st, 12:00
    passed = run_at(session, make, 2, 60)
    finish_run(session, run_id=blocked.id, conclusion="failure", summary={}, suites=[], findings=[])
    finish_run(session, run_id=passed.id, conclusion="success", summary={}, suites=[], findings=[])
    late = run_at(session, make, 3, 0)  # 23:30 at UTC-2 on March 2nd is 01:30 UTC on the 3rd
    late.created_at = datetime(2026, 3, 2, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    queued = run_at(session, make, 4, 0)
    queued.created_at = datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    run_at(session, make, 5, 0).created_at = datetime(2026, 3, 5, tzinfo=UTC)  # after the chart
    elsewhere = run_at(session, make, 6, 0, repo="acme/gadgets")
    finish_run(session, run_id=elsewhere.id, conclusion="failure", summary={}, suites=[], findings=[])
    session.flush()
    chart = runs_over_time(session, start=date(2026, 3, 1), end=date(2026, 3, 3), repo="acme/widgets")
    assert chart == [{"day": date(2026, 3, 1), "outcomes": {"failure": 1, "success": 1}},
                     {"day": date(2026, 3, 2), "outcomes": {}},
                     {"day": date(2026, 3, 3), "outcomes": {"queued": 2}}]
    everywhere = runs_over_time(session, start=date(2026, 3, 1), end=date(2026, 3, 1))
    assert everywhere == [{"day": date(2026, 3, 1), "outcomes": {"failure": 2, "success": 1}}]
    with pytest.raises(ValueError):
        runs_over_time(session, start=date(2026, 3, 3), end=date(2026, 3, 1))
