"""Every page of the dashboard in a real browser, at 1360 px (a laptop) and 390 px (a phone), in the light
and the dark colour scheme: it does not scroll sideways, no pill wraps, no id or sha wraps inside a word, no
short word anywhere is cut, all text contrasts with its background (4.5:1), and it logs no console error,
throws nothing and loses no request
(tests/dashboard/layout.py; each of these checks is shown to fail on a broken page in
tests/dashboard/test_layout_checks.py).

Each case saves a full-page screenshot, `<page>-<width>-<scheme>.png`, in the test's own output directory
(pytest's `tmp_path`: `<basetemp>/test_<page>_<width>_<scheme>0/`; `pytest --basetemp=DIR` fixes where),
or in the directory named by `PRTRIAGE_SCREENSHOTS` when set, to look at them side by side.

One chromium and one uvicorn server (tests/dashboard/browser.py: on a loopback port, a database seeded by
seed_pages: long names, a dead suite, a run with its minimal arguments) serve the whole module. Chromium or
Playwright missing: a skip with the reason, except under CI=true, where it is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.dashboard.views import suite_url
from app.store.migrate import upgrade
from app.store.session import make_engine, session_scope

from .browser import chromium, served
from .conftest import TOKEN, build_app
from .layout import Watch, broken_words, cut_words, low_contrast, overflow
from .seed import LONG_REPO, LONG_SUITE, PagesSeed, seed_pages

WIDTHS = (1360, 390)
SCHEMES = ("light", "dark")
PAGES: dict[str, Callable[[PagesSeed], str]] = {
    "home": lambda seed: "/",
    "window": lambda seed: f"/windows/{seed.base.windows['oldest']}",
    "dead-suite-window": lambda seed: f"/windows/{seed.dead_window}",
    "runs": lambda seed: "/runs",
    "run": lambda seed: f"/runs/{seed.explained_run}",
    "repositories": lambda seed: "/repositories",
    "repository": lambda seed: f"/repositories/{LONG_REPO}",
    "login": lambda seed: "/login",
    "api-docs": lambda seed: "/docs",
    "suite": lambda seed: suite_url(LONG_REPO, LONG_SUITE),
}


@pytest.fixture(scope="module")
def seeded_pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, PagesSeed]:
    url = f"sqlite:///{tmp_path_factory.mktemp('pages') / 'prtriage.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            return url, seed_pages(session)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def server(seeded_pages: tuple[str, PagesSeed], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The protected dashboard on a loopback port, for every case of the module."""
    with served(build_app(seeded_pages[0], tmp_path_factory.mktemp("pages-data"), token=TOKEN)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def logged_in(browser: Any, server: str) -> dict[str, Any]:
    """The cookies of one login through the form, reused by every case that is not the login page."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(server + "/login")
    page.fill("#token", TOKEN)
    page.click("form.login button[type=submit]")
    page.wait_for_url(server + "/")
    state: dict[str, Any] = context.storage_state()
    context.close()
    return state


def screenshot_dir(tmp_path: Path) -> Path:
    named = os.environ.get("PRTRIAGE_SCREENSHOTS")
    if not named:
        return tmp_path
    Path(named).mkdir(parents=True, exist_ok=True)
    return Path(named)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_page(browser: Any, server: str, logged_in: dict[str, Any], seeded_pages: tuple[str, PagesSeed],
              name: str, width: int, scheme: str, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": width, "height": 844}, color_scheme=scheme,
                                   storage_state=None if name == "login" else logged_in)
    try:
        page = context.new_page()
        watch = Watch(page)
        response = page.goto(server + PAGES[name](seeded_pages[1]), wait_until="load")
        page.screenshot(path=str(screenshot_dir(tmp_path) / f"{name}-{width}-{scheme}.png"), full_page=True)
        assert response is not None and response.status == 200, (name, response and response.status)
        assert page.url.startswith(server + ("/login" if name == "login" else PAGES[name](seeded_pages[1])))
        assert page.evaluate("window.innerWidth") == width
        found = {"sideways": overflow(page), "broken": broken_words(page), "cut": cut_words(page),
                 "contrast": low_contrast(page), "problems": watch.problems}
        assert found == {"sideways": [], "broken": [], "cut": [], "contrast": [], "problems": []}, "\n".join(
            f"{name} {width} {scheme} {check}: {item}" for check, items in found.items() for item in items)
    finally:
        context.close()
