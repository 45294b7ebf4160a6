"""The repositories API and pages: each default branch's last health, its dead suites and their windows,
the matrix by script and the acceptance chart; written through app.store as the worker writes them, read
through the app in process, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from store.databases import PostgresDatabases

from app.store.health_checks import Breakage, HealthRecord, heal_dead_suite, open_dead_suite, record_health
from app.store.models import Repository
from app.store.queries import upsert_repository
from app.store.session import make_engine, session_scope

from .conftest import Client, seeded_database
from .seed import ENVIRONMENT, PRIVATE, PUBLIC, Seed

GOOD, BROKEN, BLIND, PROBE = "1" * 40, "2" * 40, "3" * 40, "4" * 40
POLICY = {"source": "builtin", "path": "policies/acme/widgets.yml", "repository": PUBLIC}
LORA = "tests/e2e/test_lora.py#2"


def outcomes(rejected: bool) -> dict[str, Any]:
    lora = ({"outcome": "rejected", "exception": "AssertionError", "message": "LoRA needs the backuper",
             "path": "miles/args.py", "line": 612} if rejected else {"outcome": "accepted"})
    return {"tests/e2e/test_lora.py": {"script": "tests/e2e/test_lora.py", "outcome": "accepted"},
            LORA: {"script": "tests/e2e/test_lora.py", **lora},
            "tests/e2e/test_dense.py": {"script": "tests/e2e/test_dense.py", "outcome": "accepted"}}


def record(sha: str, *, rejected: bool = False, blind: bool = False) -> HealthRecord:
    accepted = 0 if blind else 2 if rejected else 3
    return HealthRecord("main", sha, 3, accepted, not blind, "the base revision accepts …", POLICY,
                        {"considered": 2, "captured": 2, "partial": [], "failed": [], "no_entry": [],
                         "disabled": []}, outcomes(rejected))


def seed_health(url: str) -> dict[str, int]:
    """Three healths of acme/widgets' main (good, then broken, then a probe, then blind), one dead suite open
    and one healed; acme/vault never checked."""
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            repository = session.get(Repository, 11)
            assert repository is not None
            repository.default_branch = "main"
            now = repository.created_at
            record_health(session, repository_id=11, record=record(GOOD), at=now - timedelta(days=2))
            record_health(session, repository_id=11, record=record(BROKEN, rejected=True),
                          at=now - timedelta(days=1))
            record_health(session, repository_id=11, record=record(PROBE, rejected=True), probe=True,
                          at=now - timedelta(hours=20))
            breakage = Breakage(LORA, "tests/e2e/test_lora.py", "rejected", "AssertionError: LoRA needs the "
                                "backuper", "miles/args.py", 612, BROKEN)
            dead = open_dead_suite(session, repository_id=11, breakage=breakage, found_sha=BROKEN,
                                   at=now - timedelta(days=1))
            timeout = Breakage("tests/e2e/test_dense.py", "tests/e2e/test_dense.py", "error", "TimeoutError",
                               None, None, None)
            healed = open_dead_suite(session, repository_id=11, breakage=timeout, found_sha=GOOD,
                                     at=now - timedelta(days=3))
            heal_dead_suite(session, dead_suite_id=healed.id, sha=GOOD, reason="main 111: accepted again",
                            at=now - timedelta(days=2))
            record_health(session, repository_id=11, record=record(BLIND, blind=True),
                          at=now - timedelta(hours=1))
            return {"dead": dead.window_id, "healed": healed.window_id}
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def with_health(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Seed, dict[str, int]]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    else:
        databases: PostgresDatabases = request.getfixturevalue("postgres")
        url = databases.create()
    seeded = seeded_database(url)
    return url, seeded, seed_health(url)


def test_the_api_lists_every_repository_with_its_last_health_and_dead_suites(
        with_health: tuple[str, Seed, dict[str, int]], make_client: Callable[..., Client]) -> None:
    url, _, windows = with_health
    client = make_client(url)
    listed = client.get("/api/repositories").json()["items"]
    assert [item["repo"] for item in listed] == [PRIVATE, PUBLIC]  # by name
    vault, widgets = listed
    assert vault == {"repo": PRIVATE, "default_branch": None, "policy": None, "last_health": None,
                     "dead_suites": []}
    # a health stored without its analysis environment (before it was recorded) still answers, with null
    assert widgets["default_branch"] == "main" and widgets["policy"] == {**POLICY, "environment": None}
    # the last health is the blind one (probes are not the branch's health)
    assert {k: v for k, v in widgets["last_health"].items() if k != "at"} == {
        "sha": BLIND, "suites": 3, "accepted": 0, "could_analyse": False}
    assert widgets["dead_suites"] == [{"suite": LORA, "script": "tests/e2e/test_lora.py",
                                       "error": "AssertionError: LoRA needs the backuper",
                                       "path": "miles/args.py", "line": 612, "since_sha": BROKEN,
                                       "window_id": windows["dead"]}]
    one = client.get("/api/repositories/ACME/Widgets")
    assert one.status_code == 200 and one.json() == widgets
    missing = client.get("/api/repositories/acme/nothing")
    assert missing.status_code == 404 and missing.json() == {"detail": "no repository acme/nothing"}
    assert client.get("/api/repositories/acme/a%20b").status_code == 422


def test_a_dead_suite_is_a_risk_window_without_a_pull_request(
        with_health: tuple[str, Seed, dict[str, int]], make_client: Callable[..., Client]) -> None:
    url, _, windows = with_health
    client = make_client(url)
    window = client.get(f"/api/risk-windows/{windows['dead']}").json()
    assert (window["kind"], window["pr"], window["state"]) == ("dead_suite", None, "open")
    assert window["repo"] == PUBLIC
    assert "rejected CI suite tests/e2e/test_lora.py#2" in window["risk"]
    assert f"since {BROKEN[:12]}" in window["risk"]
    listed = client.get("/api/risk-windows?state=all&repo=acme/widgets&limit=200").json()["items"]
    kinds = {item["id"]: item["kind"] for item in listed}
    assert kinds[windows["dead"]] == kinds[windows["healed"]] == "dead_suite"
    assert "followup" in kinds.values()
    healed = client.get(f"/api/risk-windows/{windows['healed']}").json()
    assert (healed["state"], healed["close_reason"]) == ("closed", "main 111: accepted again")
    page = client.page(f"/windows/{windows['dead']}")
    assert "dead suite" in page.text
    home = client.page("/?repo=acme/widgets")
    assert "dead suite" in home.one("tr", data_window_id=str(windows["dead"])).text


def test_the_repository_page_shows_health_matrix_chart_dead_suites_windows_and_runs(
        with_health: tuple[str, Seed, dict[str, int]], make_client: Callable[..., Client]) -> None:
    url, seeded, windows = with_health
    client = make_client(url)
    page = client.page("/repositories/acme/widgets")
    assert "could not analyse" in page.one(id="last-health").text
    assert "builtin" in page.one(id="policy").text
    assert page.one(id="environment").text.startswith("not recorded")
    [dead] = page.one(id="dead-suites").find_all("tr", cls="dead-suite")
    assert dead["data-suite"] == LORA and BROKEN[:12] in dead.text and "miles/args.py:612" in dead.text
    assert dead.one("td", cls="window").one("a")["href"] == f"/windows/{windows['dead']}"
    assert dead.one("td", cls="suite").one("a")["href"] == "/repositories/acme/widgets/suites/" \
        "tests%2Fe2e%2Ftest_lora.py%232"
    rows = [[row.find_all("td")[0].find_all("code")[0].text] + [cell.text for cell in row.find_all("td")[1:]]
            for row in page.one(id="matrix").find_all("tr", cls="script-row")]
    # the matrix of the last health (blind: it judges no suite dead, yet shows what it saw)
    assert rows == [["tests/e2e/test_dense.py", "1", "1", "0", "0"],
                    ["tests/e2e/test_lora.py", "2", "2", "0", "0"]]
    chart = page.one("svg", id="chart-acceptance")
    bars = chart.find_all("rect")
    assert [bar["data-key"] for bar in bars] == [GOOD, BROKEN, BLIND]  # no probe
    assert [bar["data-value"] for bar in bars] == ["100", "67", "0"]
    assert "blind" in bars[-1].classes and "blind" not in bars[0].classes
    open_windows = page.one(id="open-windows").text
    assert f"#{windows['dead']}" in open_windows
    runs = page.one(id="recent-runs").find_all("a")
    assert runs[0]["href"] == f"/runs/{seeded.runs['incident']}"


def test_the_analysis_environment_of_the_last_health_is_in_the_api_and_on_the_page(
        with_health: tuple[str, Seed, dict[str, int]], make_client: Callable[..., Client]) -> None:
    url, _, _ = with_health
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:  # a health written as main health writes one now
            now = session.get(Repository, 11).created_at  # type: ignore[union-attr]
            recorded = replace(record(GOOD), policy={**POLICY, "environment": ENVIRONMENT})
            record_health(session, repository_id=11, record=recorded, at=now)
    finally:
        engine.dispose()
    client = make_client(url)
    assert client.get("/api/repositories/acme/widgets").json()["policy"] == {**POLICY,
                                                                             "environment": ENVIRONMENT}
    facts = client.page("/repositories/acme/widgets").one(id="environment")
    assert facts.text.startswith("Python 3.12.11 (the policy asks for 3.12 or 3.11); 4 requirements: "
                                 "torch==2.13.0+cpu, ")
    assert facts.one(id="stubs").text == ("every module it lacks is stubbed, and stubbed even though "
                                          "installed: apex, transformer_engine")
    installed = facts.one("details", id="installed")
    assert installed.one("summary").text == "7 distributions installed, real in the sandbox"
    assert "torch==2.13.0+cpu" in [item.text for item in installed.find_all("li")]


def test_the_repositories_page_and_the_home_page_link_to_them(
        with_health: tuple[str, Seed, dict[str, int]], make_client: Callable[..., Client]) -> None:
    url, seeded, _ = with_health
    client = make_client(url)
    listing = client.page("/repositories")
    rows = listing.one(id="repositories").find_all("tr", cls="repository")
    assert [row["data-repo"] for row in rows] == [PRIVATE, PUBLIC]
    assert "none yet" in rows[0].text and "could not analyse" in rows[1].text
    assert rows[1].one("td", cls="dead").text.strip() == "1"
    home = client.page("/")
    assert home.one(id="repositories-link")["href"] == "/repositories"
    recent = [a["href"] for a in home.one(id="recent-runs").find_all("a")]
    assert f"/runs/{seeded.runs['clean']}" in recent and f"/runs/{seeded.runs['incident']}" in recent
    assert client.page("/repositories/acme/nothing", status=404)
    assert client.page("/repositories/a%20b/c", status=404)


def test_an_empty_repository_page(make_client: Callable[..., Client], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    seeded_database(url)
    page = make_client(url).page("/repositories/acme/vault")
    assert "none yet" in page.one(id="last-health").text
    assert page.one(id="no-dead-suites")
    assert page.one("svg", id="chart-acceptance").find_all("rect") == []


def test_repositories_come_a_page_at_a_time_in_name_order(make_client: Callable[..., Client],
                                                          tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    seeded_database(url)
    names = ["acme/Beta", "acme/alpha", "Zeta/z", "acme/beta-2", "acme/gamma"]
    engine = make_engine(url)
    with session_scope(engine) as session:
        for offset, full_name in enumerate(names):
            upsert_repository(session, repository_id=100 + offset, full_name=full_name, private=False,
                              installation_id=1)
    engine.dispose()
    client = make_client(url)
    seen: list[str] = []
    params: dict[str, str | int] = {"limit": 3}
    pages = 0
    while True:
        body = client.get("/api/repositories", params=params).json()
        assert len(body["items"]) <= 3
        seen += [item["repo"] for item in body["items"]]
        pages += 1
        if body["next"] is None:
            break
        params["cursor"] = body["next"]
    expected = sorted([*names, PUBLIC, PRIVATE], key=str.lower)
    assert seen == expected and pages == 3
    assert len(client.get("/api/repositories").json()["items"]) == 7  # 50 a page by default
    assert client.get("/api/repositories?limit=0").status_code == 422
    first = client.page("/repositories?limit=3")
    assert [row["data-repo"] for row in first.find_all("tr", cls="repository")] == expected[:3]
    second = client.page(first.one("a", rel="next")["href"])
    assert [row["data-repo"] for row in second.find_all("tr", cls="repository")] == expected[3:6]
    assert second.one("a", rel="first")["href"] == "/repositories?limit=3"
    stale = client.page("/repositories?cursor=garbage", status=400)
    assert "cursor" in stale.one(id="problem").text and len(stale.find_all("tr", cls="repository")) == 7
