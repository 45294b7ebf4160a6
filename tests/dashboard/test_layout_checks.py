"""The page-by-page browser tests' checks (tests/dashboard/layout.py) can fail: each is shown a deliberately
broken page in the real browser, and the same page mended, and must tell them apart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .browser import chromium
from .layout import Watch, broken_words, cut_words, low_contrast, overflow

SHA = "0123456789abcdef0123456789abcdef01234567"
# The dashboard's own rule for long text, which is what breaks pills and shas that lack `nowrap`.
ANYWHERE = ("<style>body { margin: 0; font: 14px sans-serif } span, code, a { overflow-wrap: anywhere }"
            "</style>")


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with chromium() as browser:
        yield browser.new_page(viewport={"width": 390, "height": 600})


def test_a_page_wider_than_the_viewport_is_caught_with_its_widest_element(page: Any) -> None:
    page.set_content(ANYWHERE + "<p>fits</p><div><pre class='argv' style='width: 600px'>wide</pre></div>")
    found = overflow(page)
    assert found == ["scrollWidth 600 > innerWidth 390", "pre.argv: wide"]
    page.set_content(ANYWHERE + "<p>fits</p><div style='overflow-x: auto'><pre class='argv' style='width: "
                     "600px'>wide</pre></div>")
    assert overflow(page) == []


@pytest.mark.parametrize("pill", ["accepted", "could not analyse"])
def test_a_pill_that_wraps_is_caught_even_between_words(page: Any, pill: str) -> None:
    box = "<div style='width: 40px'><span class='badge'{}>{}</span></div>"
    page.set_content(ANYWHERE + box.format("", pill))
    assert broken_words(page) == [f"span.badge: {pill}"]
    page.set_content(ANYWHERE + box.format(" style='white-space: nowrap'", pill))
    assert broken_words(page) == []


def test_a_sha_or_an_id_broken_inside_a_word_is_caught_by_class_or_by_its_text(page: Any) -> None:
    page.set_content(ANYWHERE + f"<div style='width: 40px'><code>{SHA}</code> <a href='#'>#1234567</a>"
                     f"<span class='suite-id'>lora_e2e_suite</span></div>")
    assert sorted(broken_words(page)) == ["a.: #1234567", f"code.: {SHA}", "span.suite-id: lora_e2e_suite"]
    page.set_content(ANYWHERE + f"<div style='width: 60px; white-space: nowrap'><code>{SHA}</code></div>")
    assert broken_words(page) == []


def test_an_id_may_wrap_between_its_words(page: Any) -> None:
    """A suite id longer than a phone breaks at its separators ("tests/ e2e-lora"), never inside a word."""
    page.set_content("<div style='width: 70px; font: 14px monospace'><span class='suite-id'>tests/e2e lora-"
                     "dense</span></div>")
    assert page.evaluate("document.querySelector('.suite-id').getClientRects().length") > 1  # it does wrap
    assert broken_words(page) == []


def test_console_errors_page_errors_failed_and_refused_requests_are_caught(page: Any) -> None:
    page.route("http://assets.invalid/missing.css", lambda route: route.fulfill(status=404, body=""))
    page.route("http://assets.invalid/unreachable.png", lambda route: route.abort())
    watch = Watch(page)
    page.set_content("<link rel='stylesheet' href='http://assets.invalid/missing.css'>"
                     "<img src='http://assets.invalid/unreachable.png'>"
                     "<script>console.error('boom'); undefinedFunction();</script>")
    problems = "\n".join(watch.problems)
    for expected in ("404 for http://assets.invalid/missing.css", "request failed: http://assets.invalid/"
                     "unreachable.png", "console error: boom", "page error: ", "undefinedFunction"):
        assert expected in problems, (expected, watch.problems)
    page.unroute_all()
    quiet = Watch(page)
    page.set_content("<p>nothing wrong</p><script>console.log('fine')</script>")
    assert quiet.problems == []


def test_a_short_word_cut_anywhere_on_the_page_is_caught_a_long_token_is_not(page: Any) -> None:
    """"ti / meli / ne" in a squeezed table column; a 40-character path may wrap where it must."""
    page.set_content(ANYWHERE + "<table><tr><td style='width: 100%'>" + "words " * 60 + "</td><td>"
                     "<a href='#'>timeline</a></td></tr></table>")
    assert cut_words(page) == ["a.: timeline"]
    page.set_content(ANYWHERE + "<table><tr><td style='width: 100%'>" + "words " * 60 + "</td><td style="
                     "'white-space: nowrap'><a href='#'>timeline</a></td></tr></table>")
    assert cut_words(page) == []
    page.set_content(ANYWHERE + f"<div style='width: 60px'><span>tests/e2e/{SHA}</span> and some prose</div>")
    assert page.evaluate("document.querySelector('span').getClientRects().length") > 2  # cut, and allowed
    assert cut_words(page) == []


def test_text_that_does_not_contrast_with_the_background_behind_it_is_caught(page: Any) -> None:
    """The dark scheme's light text over a row that kept the light scheme's pink (an ancestor's)."""
    row = ("<table><tr style='background: {}'><td><span class='message'>AssertionError</span></td></tr>"
           "</table>")
    page.set_content(f"<body style='background: #0d1117; color: #e6edf3'>{row.format('#ffebe9')}</body>")
    assert low_contrast(page) == ["span.message: 1.03 AssertionError"]
    page.set_content(f"<body style='background: #0d1117; color: #e6edf3'>{row.format('#3d1d20')}</body>")
    assert low_contrast(page) == []
