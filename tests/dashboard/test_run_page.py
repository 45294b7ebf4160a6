"""A run's page says what the PR comment says: the health line, capture counts and timing, from the report
the run stored; a run stored before they were kept shows none of them and no error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.store.queries import (
    finish_run,
    start_run,
    upsert_installation,
    upsert_pull_request,
    upsert_repository,
)
from app.store.session import make_engine, session_scope

from .conftest import Client, seeded_database
from .seed import PUBLIC

SUMMARY = {
    "health": {"could_analyse": True, "reason": "the base revision accepts 57 of 59 CI suites (96.6%)",
               "suites": 59, "base": {"accepted": 57, "rejected": 2, "error": 0, "accepted_share": 0.966}},
    "capture": {"scripts": 75, "captured": 46, "cached": True, "failed": [{"script": "a.py", "reason": "x"}],
                "disabled": ["b.py", "c.py"], "no_entry": [], "partial": []},
}
TIMING = {"capture_s": 12.345, "base_s": 0.2, "head_s": 30.05, "total_s": 43.0, "base_cached": True}


def stored_run(url: str, *, summary: dict[str, object], timing: dict[str, object]) -> int:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            upsert_installation(session, installation_id=1, account_login="acme")
            upsert_repository(session, repository_id=11, full_name=PUBLIC, private=False, installation_id=1)
            pr = upsert_pull_request(session, repository_id=11, number=77, title="Tighten the checks",
                                     author="octocat", url=f"https://github.com/{PUBLIC}/pull/77",
                                     head_sha="e" * 40, base_sha="b" * 40, base_ref="main", state="open")
            run = start_run(session, pr=pr, head_sha="e" * 40, base_sha="b" * 40).run
            finish_run(session, run_id=run.id, conclusion="success", summary=summary, suites=[], findings=[],
                       timing=timing)
            return run.id
    finally:
        engine.dispose()


def test_the_run_page_shows_health_capture_and_timing(make_client: Callable[..., Client],
                                                      tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    seeded_database(url)
    run_id = stored_run(url, summary=SUMMARY, timing=TIMING)
    page = make_client(url).page(f"/runs/{run_id}")
    assert page.one(id="health-line").text == (
        "the base revision accepts 57 of 59 CI suites (96.6%) (base accepts 57 of 59, rejects 2, errors 0)")
    assert page.one(id="capture-counts").text == (
        "46 of 75 CI scripts captured, 1 failed, 2 disabled (matrix from the cache)")
    assert page.one(id="timing").text == "capture 12.3 s, base 0.2 s (cached), head 30.1 s, total 43.0 s"


def test_a_blind_run_says_so_and_an_old_run_shows_no_line(make_client: Callable[..., Client],
                                                          tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    seeded = seeded_database(url)
    blind = {"health": {**SUMMARY["health"], "could_analyse": False, "reason": "no CI suite was captured"}}
    run_id = stored_run(url, summary=blind, timing={})
    client = make_client(url)
    assert "could not analyse" in client.page(f"/runs/{run_id}").one(id="health-line").text
    old = client.page(f"/runs/{seeded.runs['incident']}")  # summary {"suites": 2}, timing {"total": 1.5}
    for line in ("health-line", "timing", "capture-counts"):
        assert old.find_all(id=line) == []
