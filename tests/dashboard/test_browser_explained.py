"""The charts, a run's page and a suite's page in a real browser at 1360 and 390 px: every axis label at
11 px or more as drawn (an SVG's text shrinks with the chart) and none cut by the chart's edge, the last date
under the acceptance chart included; the pages never scroll sideways, pills stay on one line, and on a phone
a run's suites are cards. Chromium and Playwright as in tests/dashboard/browser.py (missing: a skip, a
failure under CI=true)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .browser import served
from .conftest import build_app, seeded_database
from .test_repositories import LORA, seed_health
from .test_run_page import BLOCKING, EXPLAINED_SUITES, MINIMAL, stored_run

# Each axis text as drawn: its font size times the chart's scale, and its box against the chart's box.
MEASURE = """() => [...document.querySelectorAll('svg.chart')].flatMap(svg => {
  const chart = svg.getBoundingClientRect();
  const scale = chart.width / svg.viewBox.baseVal.width;
  return [...svg.querySelectorAll('text.axis')].map(text => {
    const box = text.getBoundingClientRect();
    return {chart: svg.id, text: text.textContent, px: parseFloat(getComputedStyle(text).fontSize) * scale,
            left: box.left - chart.left, right: chart.right - box.right, bottom: chart.bottom - box.bottom};
  });
})"""


@pytest.fixture
def charts_url(tmp_path: Path) -> Iterator[str]:
    """An unprotected dashboard (loopback) whose repository acme/widgets has healths to chart and a run
    with a finding explained and suites of two scripts."""
    url = f"sqlite:///{tmp_path / 'prtriage.db'}"
    seeded_database(url)
    seed_health(url)
    summary = {"findings": [{**BLOCKING, "minimal_args": MINIMAL}]}
    stored_run(url, summary=summary, timing={}, suites=EXPLAINED_SUITES, findings=[BLOCKING], number=90)
    with served(build_app(url, tmp_path / "data")) as served_url:
        yield served_url


@pytest.mark.parametrize("width", [1360, 390])
def test_axis_text_is_legible_and_whole(browser: Any, charts_url: str, width: int, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    measured: list[dict[str, Any]] = []
    for path in ("/", "/repositories/acme/widgets"):
        page.goto(charts_url + path)
        page.screenshot(path=str(tmp_path / f"charts-{width}{path.replace('/', '-')}.png"), full_page=True)
        measured += page.evaluate(MEASURE)
    context.close()
    charts = {text["chart"] for text in measured}
    assert charts == {"chart-open-over-time", "chart-ages", "chart-acceptance"}
    small = [(t["chart"], t["text"], round(t["px"], 1)) for t in measured if t["px"] < 11]
    assert small == []
    cut = [(t["chart"], t["text"]) for t in measured if min(t["left"], t["right"], t["bottom"]) < -0.5]
    assert cut == []
    last_date = [t for t in measured if t["chart"] == "chart-acceptance"][-1]
    assert last_date["right"] >= -0.5 and last_date["text"][:3].isalpha()  # e.g. "Dec 03", whole


@pytest.mark.parametrize("width", [1360, 390])
def test_run_and_suite_pages_fit_and_pills_stay_whole(browser: Any, charts_url: str, width: int,
                                                      tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(charts_url + "/runs?repo=acme/widgets&pr=90")
    page.click("tr.run td.id a")
    run_url = page.url
    suite_href = page.locator(f"tr.suite[data-suite-id='{EXPLAINED_SUITES[1]['id']}'] a.suite-id")
    suite_href.click()
    suite_url = page.url
    for url in (run_url, suite_url, charts_url + "/repositories/acme/widgets/suites/" +
                LORA.replace("/", "%2F").replace("#", "%23")):
        page.goto(url)
        page.screenshot(path=str(tmp_path / f"page-{width}-{len(url)}.png"), full_page=True)
        scroll_width = page.evaluate("document.scrollingElement.scrollWidth")
        assert scroll_width <= width, (url, scroll_width)
        broken = page.evaluate("[...document.querySelectorAll('.badge, code.sha')]"
                               ".filter(e => e.getBoundingClientRect().height > 26).map(e => e.textContent)")
        assert broken == [], (url, broken)
    page.goto(run_url)
    display = page.evaluate("getComputedStyle(document.querySelector('tr.suite')).display")
    assert display == ("block" if width == 390 else "table-row")  # one card per suite on a phone
    context.close()
    assert errors == []
