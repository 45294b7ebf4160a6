"""Finding the pull requests, issues and reverted commits a PR's own text names, each with its sentence.

Pure: texts in (title, body, commit messages, the author's comments, and the prose of the lines the PR
adds: diffrefs.py), `Mention`s out. What a mention means
(prerequisite, follow-up, revert ...) is decided from its sentence by followups.py.

Only prose counts: fenced code, inline code, quoted lines (`> ...`, usually someone else's words) and HTML
comments (PR templates' hidden instructions) are skipped. Indented code blocks are not recognised: in PR
bodies four spaces far more often continue a list item than start code.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

Source = Literal["title", "body", "commit", "comment", "diff"]
StackPlace = Literal["", "above", "self", "below"]
MAX_MENTIONS = 500  # of the PR's texts, and as many again of its diff (each its own budget)
MAX_TEXT_CHARS = 65_536  # of one text: GitHub's own limit for a PR's body or a comment
MAX_READ_CHARS = 1_048_576  # of the PR's texts, and as many again of its diff (each its own budget)
MAX_NUMBER = 2**31 - 1  # GitHub numbers fit a 32-bit integer; anything longer is not a reference

_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_QUOTE = re.compile(r" {0,3}>")
_ALERT = re.compile(r" {0,3}>\s*\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]", re.I)  # GitHub's: the author's
_STACK_ENTRY = re.compile(r"(__->__\s*)?(?:[\w.-]+/[\w.-]+)?#\d+|(__->__\s*)?https?://\S+/pull/\d+/?")
_LINK_TEXT_MAX = 200
_LINK_TEXT = re.compile(rf"\[[^\[\]\n]{{0,{_LINK_TEXT_MAX - 10}}}\]\(\s*\Z")  # the text before "](URL"
_QUOTE_MARKS = re.compile("[\"\u201c\u201d\n]")
_QUOTED_MAX = 300  # characters between the quotes: a title, not a page
_BLOCK_START = re.compile(r"\s*(?:[-*+]\s|\d{1,3}[.)]\s|\|)")  # list item, table row
_ITEM = re.compile(r"\s*(?:[-*+]|\d{1,3}[.)])\s")
_HEADING = re.compile(r" {0,3}#{1,6}\s")
_RULE = re.compile(r" {0,3}([-*_])(?:\s*\1){2,}\s*$")  # a thematic break ends a block, as a blank line
_LEAD_WORDS = 8  # a lead-in longer than this is a sentence of its own, not a list's label
_LIST_MARK = re.compile(r"^(?:[-*+]\s+(?:\[[ xX]\]\s+)?|\d{1,3}[.)]\s+|#{1,6}\s+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|resp|fig)\.$", re.I)
_BACKTICKS = re.compile(r"`+")
# A link ends at whitespace, or at a ")" or "]" it did not open: "[#1](url1)、[#2](url2)" is two links.
_ANY_URL = re.compile(r"https?://[^\s<>\"'`()\[\]]+(?:\([^\s<>\"'`()]*\)[^\s<>\"'`()\[\]]*)*", re.I)
_SLUG = r"(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/(?P<repo>[A-Za-z0-9_.-]{1,100})"
_CROSS = re.compile(rf"(?<![\w./@-]){_SLUG}#(?P<number>\d{{1,10}})(?![\w-])")
_LOCAL = re.compile(r"(?<![\w&/#-])#(?P<number>\d{1,10})(?![\w-])")
_ARROW = re.compile(r"\s*(?:-{1,2}>|=>|\u2192|\u21d2|\u27f6)\s*")  # ->, -->, =>, →, ⇒, ⟶
_GH = re.compile(r"(?<![\w/-])GH-(?P<number>\d{1,10})(?![\w-])", re.I)
_REVERTED_COMMIT = re.compile(r"\breverts\s+commit\s+(?P<sha>[0-9a-f]{7,64})\b", re.I)


@dataclass(frozen=True)
class Text:
    """One text of the PR and where it came from."""

    source: Source
    text: str
    path: str | None = None  # for source "diff": the file and line of the head revision
    line: int | None = None


@dataclass(frozen=True)
class Mention:
    """`owner/repo#number` (or the commit `sha`, for "This reverts commit ...") inside one sentence."""

    owner: str
    repo: str
    number: int | None  # None for a commit
    sha: str | None
    source: Source
    sentence: str  # whitespace collapsed, list markers dropped
    start: int  # where the reference is written in the sentence
    end: int
    url: str | None = None  # the link as written, when the reference was a URL
    previous: str = ""  # the sentence before in the paragraph: context for a terse one ("Follow-up: #9")
    stack: StackPlace = ""  # an entry of a stack list (ghstack's): where it is from the `__->__` one
    path: str | None = None  # where a "diff" mention is written in the head revision
    line: int | None = None

    @property
    def target(self) -> str:
        return target_of(self.owner, self.repo, self.number, self.sha)


def target_of(owner: str, repo: str, number: int | None, sha: str | None = None) -> str:
    """`owner/repo#N`, or `owner/repo@sha` for a commit: how references and their resolutions are keyed."""
    return f"{owner}/{repo}#{number}" if sha is None else f"{owner}/{repo}@{sha}"


def pull_texts(*, title: str, body: str, commits: Iterable[str], comments: Iterable[tuple[str, str]],
               author: str) -> list[Text]:
    """The texts whose promises are the PR author's: title, body, commit messages, and of the comments
    (author login, body) only the author's own. Reviewers' comments suggest; they do not promise."""
    texts = [Text("title", title), Text("body", body)]
    texts += [Text("commit", message) for message in commits]
    texts += [Text("comment", text) for login, text in comments if login.lower() == author.lower()]
    return texts


@dataclass(frozen=True)
class Reading:
    """The texts a PR's references are read from, within the budgets, and what the budgets left out."""

    texts: list[Text]
    cut: int = 0  # texts longer than MAX_TEXT_CHARS, read up to it
    skipped: int = 0  # texts not read at all: their budget of MAX_READ_CHARS was spent

    @property
    def note(self) -> str:
        """What was not read, in a sentence; "" when everything was."""
        parts = []
        if self.cut:
            parts.append(f"{self.cut} text(s) longer than {MAX_TEXT_CHARS:,} characters read up to that")
        if self.skipped:
            parts.append(f"{self.skipped} text(s) not read, past {MAX_READ_CHARS:,} characters")
        return "; ".join(parts)


def within_budget(texts: Iterable[Text]) -> Reading:
    """TEXTS as they are read: each up to MAX_TEXT_CHARS, and MAX_READ_CHARS of the PR's texts (and as
    many of its diff) in all, so that one triage's reading is bounded whatever the PR's author writes."""
    kept: list[Text] = []
    spent = {False: 0, True: 0}  # by whether from the diff
    cut = skipped = 0
    for text in texts:
        from_diff = text.source == "diff"
        if spent[from_diff] + min(len(text.text), MAX_TEXT_CHARS) > MAX_READ_CHARS:
            skipped += 1
            continue
        if len(text.text) > MAX_TEXT_CHARS:
            cut += 1
            text = dataclasses.replace(text, text=text.text[:MAX_TEXT_CHARS])
        spent[from_diff] += len(text.text)
        kept.append(text)
    return Reading(kept, cut, skipped)


def find_mentions(texts: Iterable[Text], *, owner: str, repo: str, number: int,
                  web_hosts: Iterable[str] = ()) -> list[Mention]:
    """Every reference in TEXTS, in order, except to the PR itself (owner/repo#number).

    `#N` and `GH-N` are in owner/repo. Links count on github.com and on WEB_HOSTS (a GitHub Enterprise
    host, e.g. `ghe.example`, from the API URL). The first MAX_MENTIONS of the PR's texts and of its diff
    only: classifying costs a few regular expressions each, and a release PR listing 3000 changes must not
    hold a worker for seconds; nor may a diff full of links crowd out what the description promises. The
    texts are read within their budgets (`within_budget`), and reading is linear in their length.
    """
    url = _url_pattern(["github.com", *web_hosts])
    own = (owner.lower(), repo.lower(), number)
    found: list[Mention] = []
    counts = {False: 0, True: 0}  # by whether from the diff
    for text in within_budget(texts).texts:
        from_diff = text.source == "diff"
        if counts[from_diff] == MAX_MENTIONS:
            continue
        for previous, sentence, stack in _sentences(text.text):
            for mention in _mentions_in(sentence, text.source, owner, repo, url, previous, stack):
                if (mention.owner.lower(), mention.repo.lower(), mention.number) != own:
                    found.append(dataclasses.replace(mention, path=text.path, line=text.line)
                                 if from_diff else mention)
                    counts[from_diff] += 1
                if counts[from_diff] == MAX_MENTIONS:
                    break
            if counts[from_diff] == MAX_MENTIONS:
                break
    return found


def _url_pattern(hosts: Iterable[str]) -> re.Pattern[str]:
    names = "|".join(sorted({re.escape(h.strip().lower().removeprefix("www.")) for h in hosts if h.strip()}))
    return re.compile(rf"https?://(?:www\.)?(?:{names})/{_SLUG}/(?:pull|pulls|issues)/(?P<number>\d{{1,10}})"
                      r"(?![\d])", re.I)


def _prose(text: str) -> str:
    """TEXT with code fences, quoted lines and HTML comments blanked out (a block as an empty line: it
    ends a paragraph; a comment inside a line as a space). A GitHub alert is kept, its `>` dropped."""
    lines: list[str] = []
    fence: str | None = None
    alert = False  # inside a GitHub alert ("> [!WARNING]"): quoted, but the author's own words
    uncommented = _HTML_COMMENT.sub(lambda m: "\n" if "\n" in m.group() else " ", text.replace("\r\n", "\n"))
    for line in uncommented.split("\n"):
        opening = _FENCE.match(line)
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                fence = None
            lines.append("")
        elif opening:
            fence = opening.group(1)
            lines.append("")
        elif _ALERT.match(line):
            alert = True
            lines.append("")
        else:
            alert = alert and bool(_QUOTE.match(line))
            lines.append(_QUOTE.sub("", line, count=1) if alert else "" if _QUOTE.match(line) else line)
    return "\n".join(lines)


def _blocks(text: str) -> Iterator[tuple[str, str]]:
    """("heading" | "item" | "prose", text) of TEXT's prose: blank lines separate blocks, a list item or
    table row starts one, a heading is one line. Hard-wrapped lines (commit messages) join back."""
    block: list[str] = []
    for line in _prose(text).split("\n"):
        line = "" if _RULE.match(line) else line
        if block and (not line.strip() or _BLOCK_START.match(line) or _HEADING.match(line)):
            yield _block(" ".join(block))
            block = []
        if _HEADING.match(line):
            yield "heading", _clean(line)
        elif line.strip():
            block.append(line.strip())
    if block:
        yield _block(" ".join(block))


def _block(text: str) -> tuple[str, str]:
    return ("item" if _ITEM.match(text) else "prose"), _clean(text)


def _clean(text: str) -> str:
    return _LIST_MARK.sub("", " ".join(text.split()))


def _sentences(text: str) -> Iterator[tuple[str, str, StackPlace]]:
    """(previous sentence or "", sentence, place in a stack list) for every sentence of TEXT's prose.

    A list under a short lead-in ("Depends on:", "## Follow-ups") reads as one sentence per item, lead-in
    first ("Depends on: #12"): that is how such lists are meant.
    """
    lead = ""
    blocks = list(_blocks(text))
    places = _stack_places(blocks)
    for (kind, block), place in zip(blocks, places, strict=True):
        previous = lead if kind == "item" else ""
        for index, sentence in enumerate(_split_sentences(block)):
            if index == 0 and kind == "item" and lead:
                sentence = f"{lead} {sentence}"
            yield previous, sentence, place
            previous = sentence
        if kind == "heading":
            lead = f"{block.rstrip(':')}:" if len(block.split()) <= _LEAD_WORDS else ""
        elif kind == "prose":
            lead = block if block.endswith(":") and len(block.split()) <= _LEAD_WORDS else ""


def _stack_places(blocks: list[tuple[str, str]]) -> list[StackPlace]:
    """Where each block is in a stack list: a run of list items that are each one PR, one of them marked
    `__->__` (this PR), as ghstack, Sapling and stack-pr write them, newest first. The entries below the
    marker are older PRs of the stack, which this one is built on; those above are built on it."""
    places: list[StackPlace] = [""] * len(blocks)
    start = 0
    while start < len(blocks):
        end = start
        while end < len(blocks) and blocks[end][0] == "item" and _STACK_ENTRY.fullmatch(blocks[end][1]):
            end += 1
        marked = [i for i in range(start, end) if blocks[i][1].startswith("__->__")]
        if len(marked) == 1:
            for i in range(start, end):
                places[i] = "self" if i == marked[0] else "above" if i < marked[0] else "below"
        start = end + 1 if end == start else end
    return places


def _split_sentences(paragraph: str) -> Iterator[str]:
    """At ". ", "! ", "? ": not after "e.g." and the like, nor inside inline code (`a. b`) or double
    quotes (`Revert "Load lazily. (#12)"`)."""
    code = _merged(sorted(_code_spans(paragraph) + _quoted_spans(paragraph)))  # a quoted title: not split
    start = 0
    for end in _SENTENCE_END.finditer(paragraph):
        head = paragraph[max(start, end.start() - 12):end.start()].rstrip("\"')]")  # the last word
        before = bisect.bisect_left(code, (end.start(),)) - 1  # the last code span starting before it
        if _ABBREVIATION.search(head) or (before >= 0 and code[before][1] > end.start()):
            continue
        if paragraph[start:end.start()].strip():
            yield paragraph[start:end.start()].strip()
        start = end.end()
    if paragraph[start:].strip():
        yield paragraph[start:].strip()


def _code_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each inline code span of TEXT, as CommonMark reads them: a run of backticks opens a
    span that the next run of exactly as many backticks closes; a run no such run follows is plain text.

    One pass over the runs, each taken from its queue once: linear whatever the runs. (A regular
    expression with a backreference tries every run against the rest of the text: a 64 KiB body of runs
    that never close took a minute.)
    """
    runs = [(run.start(), run.end()) for run in _BACKTICKS.finditer(text)]
    later: dict[int, deque[int]] = {}  # by length: the runs of that length, in order
    for index, (start, end) in enumerate(runs):
        later.setdefault(end - start, deque()).append(index)
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        same = later[end - start]
        while same and same[0] <= index:
            same.popleft()
        if same:
            closing = same.popleft()
            spans.append((start, runs[closing][1]))
            index = closing + 1
        else:
            index += 1
    return spans


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each "..." or \u201c...\u201d of TEXT: at most _QUOTED_MAX characters on one line,
    left to right, none inside another. Found from the quote marks alone (a pattern trying 300 characters
    after each of 64 Ki opening quotes held the GIL for 0.2 s in one call)."""
    marks: dict[str, list[int]] = {mark: [] for mark in "\"\u201c\u201d\n"}
    for mark in _QUOTE_MARKS.finditer(text):
        marks[mark.group()].append(mark.start())
    spans: list[tuple[int, int]] = []
    after = 0
    for start in sorted(marks["\""] + marks["\u201c"]):
        if start < after:
            continue
        close = _next(marks["\"" if text[start] == "\"" else "\u201d"], start + 1)
        line_end = _next(marks["\n"], start + 1)
        if close is not None and close - start - 1 <= _QUOTED_MAX and (line_end is None or line_end > close):
            spans.append((start, close + 1))
            after = close + 1
    return spans


def _next(positions: list[int], at: int) -> int | None:
    """The first of the sorted POSITIONS at or after AT."""
    index = bisect.bisect_left(positions, at)
    return positions[index] if index < len(positions) else None


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted SPANS with the overlapping ones joined: disjoint and in order, for bisect."""
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _mentions_in(sentence: str, source: Source, owner: str, repo: str, url: re.Pattern[str],
                 previous: str, stack: StackPlace = "") -> Iterator[Mention]:
    taken = bytearray(len(sentence))  # 1 where code, a link or a reference already is

    def take(start: int, end: int) -> None:
        taken[start:end] = b"\1" * (end - start)

    def free(start: int, end: int) -> bool:
        return not any(taken[start:end])

    for start, end in _code_spans(sentence):
        take(start, end)

    def mention(target_owner: str, target_repo: str, match: re.Match[str], group: int | str = 0,
                **extra: str | None) -> Mention:
        raw = match.groupdict().get("number")
        return Mention(target_owner, target_repo, int(raw) if raw else None, extra.get("sha"), source,
                       sentence, match.start(group), match.end(group), extra.get("url"), previous, stack)

    found: list[Mention] = []
    for link in _ANY_URL.finditer(sentence):  # links first: nothing inside a URL is another reference
        if not free(link.start(), link.end()):
            continue
        take(link.start(), link.end())
        parsed = url.match(sentence, link.start(), link.end())
        if parsed and _number_ok(parsed) and _repo_ok(parsed):
            found.append(mention(parsed["owner"], parsed["repo"], parsed, url=link.group().rstrip(".,;:)")))
            text = _LINK_TEXT.search(sentence, max(link.start() - _LINK_TEXT_MAX, 0), link.start())
            if text:  # "[#5](https://github.com/other/repo/pull/5)": the link is the reference, not its text
                take(text.start(), text.end())
    for match in _REVERTED_COMMIT.finditer(sentence):
        if free(match.start("sha"), match.end("sha")):
            found.append(mention(owner, repo, match, "sha", sha=match["sha"].lower()))
    for pattern in (_CROSS, _LOCAL, _GH):
        for match in pattern.finditer(sentence):
            if free(match.start(), match.end()) and _number_ok(match) and _repo_ok(match):
                take(match.start(), match.end())
                slug = match.groupdict()
                found.append(mention(slug.get("owner") or owner, slug.get("repo") or repo, match))
    yield from _arrows_keep_repository(sorted(found, key=lambda m: m.start), owner, repo)


def _arrows_keep_repository(found: list[Mention], owner: str, repo: str) -> list[Mention]:
    """`sgl-project/sglang#31625 -> #31927`: a bare number an arrow leads to from another repository's
    reference is that repository's (one PR replaced by the next there), not this one's."""
    kept: list[Mention] = []
    for mention in found:
        before = kept[-1] if kept else None
        bare = mention.sentence[mention.start:mention.end].startswith("#")
        if (before is not None and bare and (before.owner, before.repo) != (owner, repo)
                and before.number is not None
                and _ARROW.fullmatch(mention.sentence, before.end, mention.start)):
            mention = dataclasses.replace(mention, owner=before.owner, repo=before.repo)
        kept.append(mention)
    return kept


def _number_ok(match: re.Match[str]) -> bool:
    return 0 < int(match["number"]) <= MAX_NUMBER


def _repo_ok(match: re.Match[str]) -> bool:
    return match.groupdict().get("repo") not in (".", "..")  # a path, not a repository
