"""What the page-by-page browser tests check on a page Playwright has open: it does not scroll sideways,
no pill, id or sha wraps inside a word, no short word anywhere is cut, all text contrasts with what is behind
it, and the page logged no error and lost no request.

Each check returns what it found wrong (empty: fine), so that a failure names the element and its text;
tests/dashboard/test_layout_checks.py shows every check catching a deliberately broken page.
"""

from __future__ import annotations

from typing import Any

# Pills (badges) never wrap at all: "accepte / d" and "could not / analyse" both read as broken.
PILLS = ".badge"
# Ids and shas by their class; a sha or a "#123" id without a class is found by its text (SHAPED below).
IDS = "code.sha, .sha, .suite-id, .run-id, .window-id, td.suite code"
# Text that is a sha (7 to 40 hex digits) or an id ("#123", "run #123"), whatever its element.
SHAPED = r"^(?:[0-9a-f]{7,40}|(?:run )?#\d+)$"

_OVERFLOW = """() => {
  const width = window.innerWidth;
  const wide = [...document.body.querySelectorAll('*')]
    .filter(e => e.getBoundingClientRect().right > width + 0.5)
    .filter(e => ![...e.children].some(c => c.getBoundingClientRect().right > width + 0.5))
    .slice(0, 5).map(e => `${e.tagName.toLowerCase()}.${e.className}: ${e.textContent.trim().slice(0, 60)}`);
  return {scrollWidth: document.scrollingElement.scrollWidth, innerWidth: width, wide};
}"""

# One rectangle per character of each text node: a character below the one before it starts a new line.
# A line break inside a pill, or between two letters or digits of an id or a sha, is a broken one; after a
# separator (/ _ . - #) it is where a long path or id may wrap.
_BROKEN = """([pills, ids, shaped]) => {
  const word = /[\\p{L}\\p{N}]/u, shape = new RegExp(shaped), range = document.createRange();
  const brokenIn = (element, pill) => {
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    let before = null, space = false;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.data.length; i++) {
        const char = node.data[i];
        if (/\\s/.test(char)) { space = true; continue; }
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getBoundingClientRect();
        if (rect.width === 0 && rect.height === 0) continue;
        const newLine = before !== null && rect.top >= before.rect.top + before.rect.height / 2;
        if (newLine && (pill || (!space && word.test(before.char) && word.test(char)))) return true;
        before = {rect, char}; space = false;
      }
    }
    return false;
  };
  const marked = new Set(document.querySelectorAll(`${pills}, ${ids}`));
  for (const e of document.body.querySelectorAll('code, a, span, td, dd, time')) {
    if (shape.test(e.textContent.trim())) marked.add(e);
  }
  return [...marked].filter(e => brokenIn(e, e.matches(pills)))
    .map(e => `${e.tagName.toLowerCase()}.${e.className}: ${e.textContent.trim()}`);
}"""


# Any text on the page: a token (characters between spaces) of at most SHORT characters cut between two
# letters or digits ("ti / meli / ne" in a squeezed column, "Assertion / Error"). Longer tokens (a path, a
# command line) may be cut anywhere: the stylesheet lets them, so that they do not push the page sideways.
SHORT = 20
_CUT = """(short) => {
  const word = /[\\p{L}\\p{N}]/u, range = document.createRange(), cut = [];
  const skip = node => node.parentElement.closest('script, style, svg, [hidden]');
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode: node =>
    skip(node) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.data.matchAll(/\\S+/g)) {
      if (match[0].length > short) continue;
      let before = null;
      for (let i = match.index; i < match.index + match[0].length; i++) {
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getBoundingClientRect();
        if (rect.width === 0 && rect.height === 0) continue;
        if (before && rect.top >= before.rect.top + before.rect.height / 2 && word.test(before.char)
            && word.test(node.data[i])) {
          const parent = node.parentElement;
          cut.push(`${parent.tagName.toLowerCase()}.${parent.className}: ${match[0]}`);
          break;
        }
        before = {rect, char: node.data[i]};
      }
    }
  }
  return cut;
}"""


# Each element with text of its own: its colour against the first background behind it (its own or an
# ancestor's, the page's white when none), as WCAG computes contrast. Below MIN_CONTRAST: unreadable, such
# as the light scheme's background left under the dark scheme's text.
MIN_CONTRAST = 4.5
_CONTRAST = """(minimum) => {
  const rgba = text => (text.match(/[\\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const linear = v => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
  };
  const behind = element => {
    for (let e = element; e; e = e.parentElement) {
      const color = rgba(getComputedStyle(e).backgroundColor);
      if (color.length === 3 || color[3] > 0) return color;
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const e of document.body.querySelectorAll('*')) {
    if (e.closest('svg') || ![...e.childNodes].some(n => n.nodeType === 3 && n.data.trim())) continue;
    if (!e.getClientRects().length) continue;
    const [a, b] = [luminance(rgba(getComputedStyle(e).color)), luminance(behind(e))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const text = e.textContent.trim().slice(0, 40);
    if (ratio < minimum) low.push(`${e.tagName.toLowerCase()}.${e.className}: ${ratio.toFixed(2)} ${text}`);
  }
  return low;
}"""


def overflow(page: Any) -> list[str]:
    """Empty when the page is no wider than the viewport; else the widths and the widest elements."""
    found = page.evaluate(_OVERFLOW)
    if found["scrollWidth"] <= found["innerWidth"]:
        return []
    return [f"scrollWidth {found['scrollWidth']} > innerWidth {found['innerWidth']}", *found["wide"]]


def broken_words(page: Any) -> list[str]:
    """The pills that wrap, and the ids and shas that wrap inside a word (class, text)."""
    broken: list[str] = page.evaluate(_BROKEN, [PILLS, IDS, SHAPED])
    return broken


def cut_words(page: Any) -> list[str]:
    """The short tokens anywhere on the page that a line break cuts between two letters or digits."""
    cut: list[str] = page.evaluate(_CUT, SHORT)
    return cut


def low_contrast(page: Any) -> list[str]:
    """The elements whose text contrasts less than MIN_CONTRAST with the background behind it."""
    low: list[str] = page.evaluate(_CONTRAST, MIN_CONTRAST)
    return low


class Watch:
    """Everything that went wrong while PAGE loaded: console errors, uncaught exceptions, requests that
    failed or were answered 400 or above. Attach before the first goto."""

    def __init__(self, page: Any) -> None:
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("requestfailed", lambda request: self.problems.append(
            f"request failed: {request.url} ({request.failure})"))
        page.on("response", self._response)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.problems.append(f"console error: {message.text}")

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            self.problems.append(f"{response.status} for {response.url}")
