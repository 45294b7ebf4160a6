"""A run's page says what the PR comment says: the health line, capture counts and timing, from the report
the run stored (a run stored before they were kept shows none of them and no error); each blocking finding
with the arguments its suites are rejected for and its line at the head; the suites grouped by CI script."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.store.queries import (
    finish_run,
    start_run,
    upsert_installation,
    upsert_pull_request,
    upsert_repository,
)
from app.store.session import make_engine, session_scope

from .conftest import Client, seeded_database
from .seed import PUBLIC, Seed

SUMMARY = {
    "health": {"could_analyse": True, "reason": "the base revision accepts 57 of 59 CI suites (96.6%)",
               "suites": 59, "base": {"accepted": 57, "rejected": 2, "error": 0, "accepted_share": 0.966}},
    "capture": {"scripts": 75, "captured": 46, "cached": True, "failed": [{"script": "a.py", "reason": "x"}],
                "disabled": ["b.py", "c.py"], "no_entry": [], "partial": []},
}
TIMING = {"capture_s": 12.345, "base_s": 0.2, "head_s": 30.05, "total_s": 43.0, "base_cached": True}


def stored_run(url: str, *, summary: dict[str, object], timing: dict[str, object],
               suites: Sequence[dict[str, Any]] = (), findings: Sequence[dict[str, Any]] = (),
               number: int = 77) -> int:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            upsert_installation(session, installation_id=1, account_login="acme")
            upsert_repository(session, repository_id=11, full_name=PUBLIC, private=False, installation_id=1)
            pr = upsert_pull_request(session, repository_id=11, number=number, title="Tighten the checks",
                                     author="octocat", url=f"https://github.com/{PUBLIC}/pull/{number}",
                                     head_sha="e" * 40, base_sha="b" * 40, base_ref="main", state="open")
            run = start_run(session, pr=pr, head_sha="e" * 40, base_sha="b" * 40).run
            finish_run(session, run_id=run.id, conclusion="failure" if findings else "success",
                       summary=summary, suites=suites, findings=findings, timing=timing)
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


LORA_SCRIPT, DENSE_SCRIPT = "tests/e2e/test_lora.py", "tests/e2e/test_dense.py"
ACCEPTED = {"outcome": "accepted", "exception": None, "message": None, "path": None, "line": None}
REJECTED = {"outcome": "rejected", "exception": "AssertionError",
            "message": "backuper required with colocate", "path": "miles/args.py", "line": 612}
ARGV = ["python3", "train.py", "--colocate", "--disable-weights-backuper", "--lora-rank", "8", "--seed", "1"]
EXPLAINED_SUITES = [
    {"id": DENSE_SCRIPT, "script": DENSE_SCRIPT, "argv": ["python3", "train.py"], "base": ACCEPTED,
     "head": ACCEPTED},
    {"id": f"{LORA_SCRIPT}#1", "script": LORA_SCRIPT, "argv": ARGV, "base": ACCEPTED, "head": REJECTED},
    {"id": f"{LORA_SCRIPT}#2", "script": LORA_SCRIPT, "argv": ARGV[:6], "base": ACCEPTED, "head": REJECTED},
]
BLOCKING = {"kind": "new_rejection", "severity": "blocking", "path": "miles/args.py", "line": 612,
            "in_diff": True, "message": "head rejects 2 suites that base accepts",
            "suites": [f"{LORA_SCRIPT}#1", f"{LORA_SCRIPT}#2"], "scripts": [LORA_SCRIPT]}
WARNING = {"kind": "capture_failed", "severity": "warning", "path": None, "line": None, "in_diff": False,
           "message": "a CI script yielded no command line", "suites": [], "scripts": ["x.sh"]}
MINIMAL = {"args": ["--colocate", "--disable-weights-backuper"], "count": 2, "of": 3,
           "suite": f"{LORA_SCRIPT}#2", "complete": False, "every_suite_passes": True}


def test_a_blocking_finding_says_its_minimal_arguments_and_links_its_line(
        make_client: Callable[..., Client], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    seeded_database(url)
    summary = {"findings": [{**WARNING, "minimal_args": None}, {**BLOCKING, "minimal_args": MINIMAL}]}
    run_id = stored_run(url, summary=summary, timing={}, suites=EXPLAINED_SUITES,
                        findings=[WARNING, BLOCKING])
    page = make_client(url).page(f"/runs/{run_id}")
    first, second = page.one(id="findings").find_all("li", cls="finding")
    assert "severity-blocking" in first.classes and "severity-warning" in second.classes  # blocking first
    assert first.one(cls="minimal").text == (
        "Rejected because of --colocate --disable-weights-backuper, 2 of 3 arguments; every listed suite "
        "passes these (the search was cut short: the smallest set it saw rejected).")
    line = first.one(cls="diff-line")
    assert line.one("a")["href"] == f"https://github.com/{PUBLIC}/blob/{'e' * 40}/miles/args.py#L612"
    assert line.text == "at miles/args.py:612 in this diff"
    assert [a["href"] for a in first.one(cls="suites").find_all("a")] == [
        "/repositories/acme/widgets/suites/tests%2Fe2e%2Ftest_lora.py%231",
        "/repositories/acme/widgets/suites/tests%2Fe2e%2Ftest_lora.py%232"]
    assert not second.find_all(cls="minimal") and not second.find_all(cls="diff-line")


def test_suites_are_grouped_by_script_with_a_new_rejection_first(make_client: Callable[..., Client],
                                                                 tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    seeded_database(url)
    run_id = stored_run(url, summary={}, timing={}, suites=EXPLAINED_SUITES, findings=[BLOCKING])
    page = make_client(url).page(f"/runs/{run_id}")
    groups = page.one(id="suites").find_all("tbody", cls="script-group")
    assert [group["data-script"] for group in groups] == [LORA_SCRIPT, DENSE_SCRIPT]
    lora, dense = groups
    assert lora.one("tr", cls="script-heading").text == f"{LORA_SCRIPT} 2 suites, 2 new, 2 failing at head"
    names = [row.one("a", cls="suite-id").text for row in lora.find_all("tr", cls="suite")]
    assert names == ["#1", "#2"]  # the heading says the script: the suite is named by what its id adds
    assert all("regressed" in row.classes for row in lora.find_all("tr", cls="suite"))
    [whole] = dense.find_all("tr", cls="suite")
    assert whole.one("a", cls="suite-id").text == DENSE_SCRIPT and "regressed" not in whole.classes
    cells = {cell["data-label"] for cell in whole.find_all("td")}
    assert cells == {"Suite", "Command line", "Base", "Head"}  # the labels of the cards on a phone


def test_a_run_stored_before_minimal_arguments_shows_its_findings_without(
        reader: Client, seeded: Seed) -> None:
    page = reader.page(f"/runs/{seeded.runs['incident']}")  # its summary has no findings
    [finding] = page.one(id="findings").find_all("li", cls="finding")
    assert not finding.find_all(cls="minimal")
    assert "miles/args.py:612" in finding.one(cls="diff-line").text
