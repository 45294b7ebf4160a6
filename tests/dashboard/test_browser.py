"""The real page in a real browser: Debian's chromium driven by Playwright against the app served by
uvicorn on a loopback port (tests/dashboard/browser.py), with seeded data. Log in, read the rows, filter,
see the charts, screenshot.

Chromium or Playwright missing: a skip with the reason, except under CI=true, where it is a failure.
PRTRIAGE_DOCS_SCREENSHOT=1 also writes docs/dashboard.png (the README's picture).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .browser import served
from .conftest import TOKEN, build_app
from .seed import PRIVATE, PRIVATE_TITLE, Seed

DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"


@pytest.fixture
def live_url(seeded_sqlite: tuple[str, Seed], tmp_path: Path) -> Iterator[str]:
    """The protected dashboard served on a loopback port."""
    with served(build_app(seeded_sqlite[0], tmp_path / "data", token=TOKEN)) as url:
        yield url


def test_log_in_read_filter_and_see_the_charts(browser: Any, live_url: str, seeded: Seed,
                                               tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    problems: list[str] = []  # console errors: a CSP violation or a failed load shows here

    def console(message: Any) -> None:
        if message.type == "error":
            problems.append(message.text)

    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(str(error)))

    page.goto(live_url + "/")
    assert page.url.startswith(live_url + "/login")  # no data before the login
    page.fill("#token", TOKEN)
    page.click("form.login button[type=submit]")
    page.wait_for_url(live_url + "/")

    rows = page.locator("tr.window")
    assert rows.count() == 4
    expected = [seeded.windows[role] for role in ("oldest", "private", "cross", "fresh")]
    assert [int(rows.nth(i).get_attribute("data-window-id")) for i in range(4)] == expected
    for chart in ("#chart-open-over-time", "#chart-ages"):
        assert page.locator(chart).is_visible()
        box = page.locator(chart).bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 50
    tallest = page.locator("#chart-ages rect.age").first.bounding_box()
    assert tallest is not None and tallest["height"] > 10  # drawn, not just present
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    if os.environ.get("PRTRIAGE_DOCS_SCREENSHOT") == "1":
        page.screenshot(path=str(DOCS_SCREENSHOT), full_page=True)

    page.fill("#repo", PRIVATE)
    page.click("form.filters button[type=submit]")
    page.wait_for_url(f"**/?repo={PRIVATE.replace('/', '%2F')}&state=open")
    assert rows.count() == 1 and PRIVATE_TITLE in rows.first.inner_text()
    assert page.locator("#chart-ages").is_visible()
    page.screenshot(path=str(tmp_path / "filtered.png"))
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000
    assert problems == []


def page_urls(seeded: Seed) -> list[str]:
    """Every kind of page a person opens, a bad query among them."""
    return ["/", "/?state=all", "/runs", f"/runs/{seeded.runs['incident']}", f"/runs/{seeded.runs['clean']}",
            f"/windows/{seeded.windows['oldest']}", f"/windows/{seeded.windows['closed']}", "/docs",
            "/?state=bogus&limit=abc", "/windows/abc", "/login", "/repositories",
            "/repositories/acme/widgets"]


@pytest.mark.parametrize("width", [1360, 390])
def test_no_page_scrolls_sideways_on_a_desktop_or_a_phone(browser: Any, live_url: str, seeded: Seed,
                                                          width: int, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    elsewhere: list[str] = []  # every request the pages make must stay on this origin: no CDN
    page.on("request", lambda request: elsewhere.append(request.url)
            if not request.url.startswith(live_url) else None)
    page.goto(live_url + "/login")
    page.fill("#token", TOKEN)
    page.click("form.login button[type=submit]")
    page.wait_for_url(live_url + "/")
    for url in page_urls(seeded):
        page.goto(live_url + url)
        scroll_width, inner_width = page.evaluate(
            "[document.scrollingElement.scrollWidth, window.innerWidth]")
        if scroll_width > inner_width:
            page.screenshot(path=str(tmp_path / "overflow.png"), full_page=True)
        assert scroll_width <= inner_width == width, (url, scroll_width, inner_width)
        # a pill or a sha broken over two lines ("accepte / d") is taller than one line of its text
        broken = page.evaluate("[...document.querySelectorAll('.badge, code.sha')]"
                               ".filter(e => e.getBoundingClientRect().height > 26).map(e => e.textContent)")
        assert broken == [], (url, width, broken)
    assert elsewhere == []
    page.goto(live_url + "/")
    page.screenshot(path=str(tmp_path / f"windows-{width}.png"), full_page=True)
    risk = page.locator("tr.window td.risk").first.bounding_box()  # the card's text is on the screen
    assert risk is not None and risk["x"] >= 0 and risk["x"] + risk["width"] <= width
    page.goto(live_url + "/docs")
    assert page.locator("section.operation").count() >= 5
    assert page.locator("script").count() == 0
    context.close()
