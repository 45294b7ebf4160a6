"""The pages, rendered in-process and parsed: what a reader sees of risk windows and triage runs."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import parse_qs, urlparse

from .conftest import Client
from .html import Node
from .seed import FAIL_FAST_RISK, LORA_ARGV, PRIVATE, PRIVATE_TITLE, PUBLIC, Seed


def window_rows(page: Node) -> list[Node]:
    return page.find_all("tr", cls="window")


def row_ids(page: Node) -> list[int]:
    return [int(row["data-window-id"]) for row in window_rows(page)]


def test_open_windows_oldest_first_with_what_they_await(reader: Client, seeded: Seed) -> None:
    page = reader.page("/")
    windows = seeded.windows
    assert row_ids(page) == [windows["oldest"], windows["private"], windows["cross"], windows["fresh"]]
    opened = [datetime.fromisoformat(row.one("time")["datetime"]) for row in window_rows(page)]
    assert opened == sorted(opened)
    oldest = page.one("tr", data_window_id=str(windows["oldest"]))
    assert oldest.one("td", cls="repo").text == PUBLIC
    pr_link = oldest.one("td", cls="pr").find_all("a")[0]
    assert pr_link["href"] == f"https://github.com/{PUBLIC}/pull/10" and pr_link.text == "#10"
    assert "Revert the over-broad assert in validate_args" in oldest.one("td", cls="pr").text
    assert "by octocat" in oldest.one("td", cls="pr").text
    awaited = oldest.one("span", cls="awaited")
    assert awaited.one("a")["href"] == f"https://github.com/{PUBLIC}/pull/2204"
    assert awaited.one("a").text == f"{PUBLIC}#2204" and "followup" in awaited.text
    assert awaited.one("span", cls="badge").text == "open"
    assert oldest.one("td", cls="age").text == "40 days"
    assert oldest.one("td", cls="risk").text == FAIL_FAST_RISK
    private = page.one("tr", data_window_id=str(windows["private"]))
    assert private.one("span", cls="ref-closed_unmerged").text == "closed unmerged"
    assert "a blocking finding" in page.one("tr", data_window_id=str(windows["fresh"])).text
    assert page.one("tr", data_window_id=str(windows["fresh"])).one("td", cls="age").text == "2 h"


def test_titles_are_escaped_not_markup(reader: Client, seeded: Seed) -> None:
    response = reader.get("/")
    assert "Make &lt;Quant&gt; config &amp; flags stricter" in response.text
    page = reader.page("/")
    row = page.one("tr", data_window_id=str(seeded.windows["cross"]))
    assert "Make <Quant> config & flags stricter" in row.text and not page.find_all("quant")


def test_filters_by_repository_and_state(reader: Client, seeded: Seed) -> None:
    windows = seeded.windows
    assert row_ids(reader.page(f"/?repo={PRIVATE}")) == [windows["private"]]
    assert row_ids(reader.page("/?repo=ACME/Vault")) == [windows["private"]]
    closed = reader.page("/?state=closed")
    assert row_ids(closed) == [windows["closed"]]
    assert "closed: superseded by #2223" in closed.one("tr", cls="window").text
    assert row_ids(reader.page("/?state=all"))[0] == windows["closed"]  # the oldest of all
    assert len(row_ids(reader.page("/?state=all"))) == 5
    empty = reader.page("/?repo=acme/nothing")
    assert window_rows(empty) == [] and "No open risk windows in acme/nothing" in empty.one(id="empty").text
    form = reader.page(f"/?repo={PUBLIC}&state=all").one("form", cls="filters")
    assert form.one("input", name="repo")["value"] == PUBLIC
    assert form.one("option", value="all").get("selected") is not None


def test_a_blank_filter_means_no_filter_and_a_bad_one_is_the_page_with_a_message(reader: Client) -> None:
    assert len(row_ids(reader.page("/?repo=&state=open&cursor="))) == 4
    page = reader.page("/?repo=not%20a%20repo", status=400)
    assert "not a repository name" in page.one(id="problem").text
    assert len(row_ids(page)) == 4  # the page, unfiltered, under the message
    page = reader.page("/?cursor=garbage", status=400)
    assert "not a cursor" in page.one(id="problem").text and len(row_ids(page)) == 4


def test_bad_query_values_are_html_pages_with_every_problem_said(reader: Client) -> None:
    response = reader.get("/?state=bogus&limit=0")
    assert response.status_code == 400 and response.headers["content-type"].startswith("text/html")
    page = reader.page("/?state=bogus&limit=abc", status=400)
    problems = [paragraph.text for paragraph in page.one(id="problem").find_all("p")]
    assert problems == ["state: 'bogus' is not one of open, closed, all; showing open",
                        "limit: 'abc' is not a number from 1 to 200; showing 50 a page"]
    assert len(row_ids(page)) == 4
    assert page.one("option", value="open").get("selected") is not None
    runs = reader.page("/runs?pr=abc&limit=999", status=400)
    assert "not a pull request number: 'abc'" in runs.one(id="problem").text
    assert runs.find_all("tr", cls="run")
    for pr in ("99999999999999999999999", "2147483648", "²", "1" * 5000):
        huge = reader.page(f"/runs?pr={pr}", status=400)
        assert "not a pull request number" in huge.one(id="problem").text, pr
    for url in ("/windows/abc", "/runs/0", "/windows/-1", "/runs/99999999999999999999999"):
        answer = reader.get(url)
        assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html"), url
        assert reader.page(url, status=404).one(id="problem").text
    assert reader.get("/api/risk-windows?state=bogus").status_code == 422  # the API stays JSON


def test_pages_follow_the_cursor_and_keep_the_filters(reader: Client, seeded: Seed) -> None:
    seen: list[int] = []
    url: str | None = f"/?state=all&repo={PUBLIC}&limit=2"
    while url:
        page = reader.page(url)
        seen += row_ids(page)
        following = page.find_all("a", rel="next")
        url = following[0]["href"] if following else None
        if url:
            query = parse_qs(urlparse(url).query)
            assert query["state"] == ["all"] and query["repo"] == [PUBLIC] and query["limit"] == ["2"]
    windows = seeded.windows
    assert seen == [windows["closed"], windows["oldest"], windows["cross"], windows["fresh"]]
    assert reader.page(f"/?repo={PUBLIC}&limit=2").find_all("a", rel="first") == []


def test_the_two_charts_are_drawn_from_the_data(reader: Client) -> None:
    page = reader.page("/")
    over_time = page.one("svg", id="chart-open-over-time")
    days = over_time.find_all("rect", cls="day")
    assert len(days) == 90
    # Open at the end of each day: the closed window (opened 60 days ago, closed 10 days ago) counted too.
    values = [int(day["data-value"]) for day in days]
    assert values[0] == 0 and values[59] == 2 and values[-1] == 4 == max(values)  # 30 days ago: two open
    assert int(over_time["data-max"]) == 4
    assert float(days[-1]["height"]) == 2 * float(days[59]["height"]) > 0 == float(days[0]["height"])
    assert days[-1].one("title").text.endswith(": 4 open")
    ages = page.one("svg", id="chart-ages").find_all("rect", cls="age")
    assert {age["data-key"]: int(age["data-value"]) for age in ages} == {
        "under 1 day": 1, "1-7 days": 1, "7-30 days": 1, "30-90 days": 1, "over 90 days": 0}
    assert page.one("svg", id="chart-ages").one("title", id="chart-ages-title").text


def test_charts_follow_the_repository_filter(reader: Client) -> None:
    ages = reader.page(f"/?repo={PRIVATE}").one("svg", id="chart-ages").find_all("rect", cls="age")
    assert sum(int(age["data-value"]) for age in ages) == 1


def test_window_timeline(reader: Client, seeded: Seed) -> None:
    page = reader.page(f"/windows/{seeded.windows['closed']}")
    assert page.one(id="window-state").text == "closed"
    assert page.one(id="close-reason").text == "superseded by #2223"
    events = page.one("ol", id="timeline").find_all("li", cls="event")
    assert [event.one("span", cls="what").text for event in events] == [
        f"opened, awaiting {PUBLIC}#2100 (followup)", "closed: superseded by #2223"]
    assert [event.one("span", cls="actor").text for event in events] == ["prtriage", "maintainer"]
    stamps = [datetime.fromisoformat(event.one("time")["datetime"]) for event in events]
    assert stamps == sorted(stamps)
    assert page.find_all("form", id="close-form") == []  # closed already


def test_an_unprotected_dashboard_is_read_only(reader: Client, seeded: Seed) -> None:
    page = reader.page(f"/windows/{seeded.windows['oldest']}")
    assert page.find_all("form", id="close-form") == []
    assert "needs DASHBOARD_TOKEN" in page.one("p", cls="note").text
    response = reader.post(f"/windows/{seeded.windows['oldest']}/close", data={"reason": "done"})
    assert response.status_code == 403


def test_unknown_window_and_run_are_404_pages(reader: Client) -> None:
    assert "no risk window 9999" in reader.page("/windows/9999", status=404).one(id="problem").text
    assert "no triage run 9999" in reader.page("/runs/9999", status=404).one(id="problem").text


def test_runs_newest_first_with_findings(reader: Client, seeded: Seed) -> None:
    page = reader.page("/runs")
    rows = page.find_all("tr", cls="run")
    assert [int(row["data-run-id"]) for row in rows] == [seeded.runs["clean"], seeded.runs["incident"]]
    incident = rows[1]
    finding = incident.one("div", cls="finding")
    assert "severity-blocking" in finding.classes and "head rejects 1 suite" in finding.text
    assert incident.one("span", cls="run-failure").text == "failure"
    assert rows[0].one("td", cls="findings").text == "none"
    assert PRIVATE_TITLE in rows[0].text
    filtered = reader.page(f"/runs?repo={PUBLIC}&pr=10").find_all("tr", cls="run")
    assert [int(row["data-run-id"]) for row in filtered] == [seeded.runs["incident"]]
    # outcomes over time: the month's runs stacked by outcome, a legend naming each outcome drawn
    segments = page.one("svg", id="chart-runs-over-time").find_all("rect", cls="seg")
    assert sum(int(seg["data-value"]) for seg in segments) == 2
    drawn = [seg["data-outcome"] for seg in segments]
    assert "failure" in drawn and "run-failure" in segments[drawn.index("failure")].classes
    legend = [item.text for item in page.one("ul", id="run-outcomes").find_all("li")]
    assert sorted(legend) == sorted(set(drawn))
    public = reader.page(f"/runs?repo={PUBLIC}").one("svg", id="chart-runs-over-time")
    assert [seg["data-outcome"] for seg in public.find_all("rect", cls="seg")] == ["failure"]
    assert reader.page(f"/runs?repo={PUBLIC}&pr=11").one(id="empty")


def test_one_run_shows_every_suite_with_argv_and_both_outcomes(reader: Client, seeded: Seed) -> None:
    page = reader.page(f"/runs/{seeded.runs['incident']}")
    suites = page.one("table", id="suites").find_all("tr", cls="suite")
    assert [suite["data-suite-id"] for suite in suites] == ["lora-e2e", "dense-e2e"]
    lora = suites[0]
    assert "regressed" in lora.classes and "regressed" not in suites[1].classes
    assert lora.one("td", cls="argv").text == " ".join(LORA_ARGV)
    assert lora.one("td", cls="base").one("span", cls="badge").text == "accepted"
    head = lora.one("td", cls="head")
    assert head.one("span", cls="badge").text == "rejected"
    assert "AssertionError" in head.text and "miles/args.py:612" in head.text
    assert "head rejects 1 suite" in page.one("ul", id="findings").text


def test_pages_forbid_caching_and_framing(reader: Client) -> None:
    headers = reader.get("/").headers
    assert headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["referrer-policy"] == "no-referrer"
    css = reader.get("/static/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert reader.get("/static/..%2Fauth.py").status_code == 404
