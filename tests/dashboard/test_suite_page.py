"""A CI suite's page: how the default branch's healths judged it (blind checks apart), when main broke it
and healed it, and the pull requests whose head rejected it; reached from the repository's matrix, its dead
suites, a dead-suite window and a run, whatever characters the suite's id holds. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.dashboard.views import suite_url
from app.store.health_checks import HealthRecord, record_health
from app.store.session import make_engine, session_scope

from .conftest import Client
from .seed import PUBLIC, Seed
from .test_repositories import BROKEN, GOOD, LORA
from .test_repositories import with_health as with_health_fixture
from .test_run_page import ACCEPTED, REJECTED, stored_run

with_health = with_health_fixture  # the repository pages' data: healths of acme/widgets, a dead suite

ODD = 'tests/odd "quoted" dir/../run me.sh?x=1&y=%20#3'  # every character a URL or a JSON path treats apart


def test_a_dead_suite_shows_when_main_broke_it_and_links_back(
        with_health: tuple[str, Seed, dict[str, int]], make_client: Callable[..., Client]) -> None:
    url, _, windows = with_health
    client = make_client(url)
    href = client.page(f"/windows/{windows['dead']}").one("a", id="suite-link")["href"]
    assert href == suite_url(PUBLIC, LORA)
    assert href == "/repositories/acme/widgets/suites/tests%2Fe2e%2Ftest_lora.py%232"
    matrix = client.page("/repositories/acme/widgets").one(id="matrix")
    assert href in [a["href"] for a in matrix.find_all("a")]
    page = client.page(href)
    assert page.one("code", cls="suite-id").text == LORA
    plain = client.page("/repositories/acme/widgets/suites/tests/e2e/test_lora.py%232")  # slashes as typed
    assert plain.one("code", cls="suite-id").text == LORA
    assert "tests/e2e/test_lora.py" in page.one(id="facts").text
    spans = page.one(id="spans").find_all("tr", cls="span")
    # newest first: the blind health judges nothing, main rejected it at BROKEN, accepted it at GOOD
    assert [span["data-outcome"] for span in spans] == ["blind", "rejected", "accepted"]
    assert BROKEN[:12] in spans[1].text and "miles/args.py:612" in spans[1].text
    assert GOOD[:12] in spans[2].text
    assert page.one(id="now").text.endswith(f"; the last check that could see: rejected at {BROKEN[:12]}")
    [dead] = page.one(id="dead-records").find_all("tr", cls="dead-record")
    assert dead.one("td", cls="window").one("a")["href"] == f"/windows/{windows['dead']}"
    assert BROKEN[:12] in dead.one("td", cls="since").text and "still dead" in dead.text
    assert page.one(id="never-rejected") and "0 triage runs" in page.one(id="run-counts").text
    # a suite that was dead and healed shows when it healed
    healed = client.page(suite_url(PUBLIC, "tests/e2e/test_dense.py")).one(id="dead-records")
    assert GOOD[:12] in healed.one("td", cls="healed").text


def test_the_pull_requests_whose_head_rejected_it(
        with_health: tuple[str, Seed, dict[str, int]], make_client: Callable[..., Client]) -> None:
    url, seeded, _ = with_health
    client = make_client(url)
    run_page = client.page(f"/runs/{seeded.runs['incident']}")
    href = run_page.one("tr", data_suite_id="lora-e2e").one("a", cls="suite-id")["href"]
    page = client.page(href)
    [row] = page.one(id="rejected-by").find_all("tr", cls="rejecting-run")
    assert row["data-run-id"] == str(seeded.runs["incident"]) and "regressed" in row.classes
    assert row.one("td", cls="base").text == "accepted"
    assert row.one("td", cls="head").text.startswith("rejected AssertionError")
    assert "#10" in row.one("td", cls="pr").text
    assert page.one(id="run-counts").text == "1 triage run validated it; the head rejected it or errored in 1"
    assert page.one(id="no-spans") and page.one(id="never-dead")  # main never listed it
    accepted_only = client.page(suite_url(PUBLIC, "dense-e2e"))
    assert accepted_only.one(id="never-rejected")
    assert "1 triage run" in accepted_only.one(id="run-counts").text


def test_any_suite_id_reaches_its_page(with_health: tuple[str, Seed, dict[str, int]],
                                       make_client: Callable[..., Client]) -> None:
    url, _, _ = with_health
    engine = make_engine(url)
    with session_scope(engine) as session:
        outcomes: dict[str, Any] = {ODD: {"script": "tests/odd.sh", **REJECTED}}
        record_health(session, repository_id=11,
                      record=HealthRecord("main", "5" * 40, 1, 0, True, "…", {}, {}, outcomes))
    engine.dispose()
    odd_suite = {"id": ODD, "script": "tests/odd.sh", "argv": ["x"], "base": ACCEPTED, "head": REJECTED}
    stored_run(url, summary={}, timing={}, number=78, suites=[odd_suite])
    client = make_client(url)
    href = suite_url(PUBLIC, ODD)
    assert "/" not in href.removeprefix("/repositories/acme/widgets/suites/")
    page = client.page(href)
    assert page.one("code", cls="suite-id").text == ODD
    # main rejects it now; before, a blind health judged nothing, and older ones did not list it
    outcomes_seen = [span["data-outcome"] for span in page.one(id="spans").find_all("tr", cls="span")]
    assert outcomes_seen == ["rejected", "blind", "absent"]
    assert len(page.one(id="rejected-by").find_all("tr", cls="rejecting-run")) == 1


def test_an_unknown_suite_or_repository_is_a_404(reader: Client) -> None:
    assert "no CI suite" in reader.page(suite_url(PUBLIC, "nothing#1"), status=404).text
    assert reader.page(suite_url("acme/nothing", "lora-e2e"), status=404)
    assert reader.page("/repositories/acme/widgets/suites/", status=404)
    assert reader.page(f"/repositories/acme/widgets/suites/{'x' * 300}", status=404)


def test_the_api_twin_of_a_suite_page(with_health: tuple[str, Seed, dict[str, int]],
                                      make_client: Callable[..., Client]) -> None:
    url, seeded, windows = with_health
    client = make_client(url)
    body = client.get("/api" + suite_url(PUBLIC, LORA)).json()
    assert (body["repo"], body["suite"], body["script"]) == (PUBLIC, LORA, "tests/e2e/test_lora.py")
    assert [(span["outcome"], span["last_sha"], span["checks"]) for span in body["spans"]] == [
        ("blind", "3" * 40, 1), ("rejected", BROKEN, 1), ("accepted", GOOD, 1)]
    assert body["spans"][1]["detail"]["line"] == 612 and body["spans"][2]["detail"]["outcome"] == "accepted"
    [dead] = body["dead"]
    assert (dead["window_id"], dead["since_sha"], dead["healed_sha"]) == (windows["dead"], BROKEN, None)
    assert (body["runs"], body["rejected"], body["rejected_by"]) == (0, 0, [])
    rejected = client.get("/api" + suite_url(PUBLIC, "lora-e2e")).json()
    [run] = rejected["rejected_by"]
    assert (run["run_id"], run["number"], run["base"]["outcome"], run["head"]["outcome"]) == (
        seeded.runs["incident"], 10, "accepted", "rejected")
    missing = client.get("/api" + suite_url(PUBLIC, "nothing"))
    assert missing.status_code == 404
    assert missing.json() == {"detail": "no CI suite 'nothing' in acme/widgets"}
