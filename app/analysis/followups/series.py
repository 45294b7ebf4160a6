"""A series of pull requests written as parts, `(k/N)`: which part this PR is, and which part a reference is.

Pure. A PR titled "Split the loader (2/3)" that lists "(1/3) #10" and "(3/3) #12" is built on #10 (an
earlier part: a prerequisite) and leaves the rest to #12 (a later part: a follow-up). Only written
positions count: "(k/N)", "[k/N]", "k/N:" at the title's start, "part k", "part k of N", "part k/N". A
reference's part is read right next to it (before it, after it, or closing a list item that names it); a
part without this PR's own position, or of a series of another length, decides nothing (`mention` by the
other rules): ambiguity leans to mention.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

MAX_PARTS = 99  # "(2/3)"; "(2/300)" is a ratio, not a series
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
          "i": 1, "ii": 2, "iii": 3, "iv": 4, "v": 5}
_NUMBER = r"(?:\d{1,2}|one|two|three|four|five|six|seven|eight|nine|iv|v|i{1,3})"
_TOTAL = r"(?:\d{1,2}|n)"
# "(1/3)", "[part 1/3]", "(part 2 of 3)", "[part 2]"
_BRACKETED = (rf"[(\[]\s*(?:part\s+)?(?P<j>{_NUMBER})\s*(?:/|\s+of\s+)\s*(?P<n>{_TOTAL})\s*[)\]]"
              rf"|[(\[]\s*part\s+(?P<jw>{_NUMBER})\s*[)\]]")
_PART_WORD = rf"\bpart\s+(?P<jp>{_NUMBER})\b(?:\s*(?:/|\s+of\s+)\s*(?P<np>{_TOTAL})\b)?"
_TITLE = re.compile(rf"{_BRACKETED}|{_PART_WORD}|^\W*(?P<js>\d{{1,2}})\s*/\s*(?P<ns>{_TOTAL})\s*:", re.I)
_REVERT_TITLE = re.compile(r"^\W*(?:\[[^\]]{0,40}\]\s*|[\w-]{1,20}(?:\([^)]{0,40}\))?!?:\s*)*revert", re.I)
_CONNECT = (r"\s*(?:(?:is|was|are|lands|landed|merged|comes|goes|will\s+be|in|at|:|-|\u2013|\u2014|,|\()\s*)"
            r"{0,3}")
_NOUN = r"(?:(?:pr|pull\s+request|change|patch)\s+)?"

Place = Literal["earlier", "same", "later"]


@dataclass(frozen=True)
class Position:
    """Part `part` of a series of `total` parts (None: "N", or not written)."""

    part: int
    total: int | None


def title_position(title: str) -> Position | None:
    """This PR's place in its series, from its title; None when the title gives none, or is a revert (the
    part there is the reverted PR's)."""
    if _REVERT_TITLE.match(title):
        return None
    match = _TITLE.search(title)
    return _position(match) if match else None


def place_of(marked: str, ref: str, other: str, own: Position | None) -> Place | None:
    """Where the reference written as REF in MARKED (other references as OTHER) is in this PR's series:
    None when the sentence gives it no part next to it, or this PR has no position, or the totals differ."""
    if own is None:
        return None
    for pattern in _patterns(ref, other[0]):
        match = pattern.search(marked)
        theirs = _position(match) if match else None
        if theirs is None:
            continue
        if theirs.total is not None and own.total is not None and theirs.total != own.total:
            return None  # another series
        return "earlier" if theirs.part < own.part else "later" if theirs.part > own.part else "same"
    return None


@functools.cache
def _patterns(ref: str, token_start: str) -> tuple[re.Pattern[str], ...]:
    ref = re.escape(ref)
    not_ref = f"[^{re.escape(token_start)}]"
    return tuple(re.compile(pattern, re.I) for pattern in (
        rf"(?:{_BRACKETED}|{_PART_WORD}|^\W*(?P<js>\d{{1,2}})\s*/\s*(?P<ns>{_TOTAL})\b){_CONNECT}{_NOUN}"
        rf"[(\[]?{ref}",  # "(1/3) #10", "Part 1: #10", "part 1 landed in #10", "1/3: #10"
        # "#10 (1/3)", "#10, part 1"
        rf"{ref}\s*[)\]]?\s*(?:[:,\u2013\u2014-]\s*)?(?:{_BRACKETED}|{_PART_WORD})",
        rf"{ref}{not_ref}{{0,150}}?(?:{_BRACKETED})\W*$",  # a list item: "#10 Add the loader (1/3)"
    ))


def _position(match: re.Match[str]) -> Position | None:
    groups = match.groupdict()
    raw = next((groups[g] for g in ("j", "jw", "jp", "js") if groups.get(g)), None)
    total_raw = next((groups[g] for g in ("n", "np", "ns") if groups.get(g)), None)
    if raw is None:
        return None
    part = int(raw) if raw.isdigit() else _WORDS.get(raw.lower())
    total = int(total_raw) if total_raw and total_raw.isdigit() else None
    if part is None or not 1 <= part <= MAX_PARTS or (total is not None and not part <= total <= MAX_PARTS):
        return None
    return Position(part, total)
