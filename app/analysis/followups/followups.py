"""What each reference in a PR's text means: prerequisite, promised follow-up, revert, closing keyword or a
plain mention, decided from the sentence it is written in.

Pure. The phrasings are regular expressions over the sentence in which the reference being classified is
replaced by REF and every other reference by OTHER, so one sentence can hold several roles ("Fixes #1;
follow-up #2 will add tests"). A trigger phrase negated just before it ("does not depend on #N", "no need
to wait for #N") or put in the past ("was blocked by #N") does not count.

Decisions the table in tests/test_followups.py pins down:
- "follow-up to/of/on #N" names the PR this one follows up: a mention, not a promise.
- "supersedes/replaces #N", "see #N", "as discussed in #N", backports and re-lands are mentions.
- "tracked in #N" is a promise: the work is left to that issue or PR.
- Closing keywords are read as GitHub reads them: the keyword, an optional colon, then the reference.
- One reference per target: the strongest role found anywhere wins (revert, prerequisite, follow-up,
  closes, mention), with the first sentence that gave it.
- Another change being done as a condition ("stays red until #N lands", "until other/repo#N merges, pin
  the fork", "remove once #N is fixed") is a prerequisite; "after #N landed" is history, a mention.
- A TODO naming a reference ("TODO(#N)", "TODO: drop after #N") is a follow-up, unless it cites its cause
  ("due to #N", "as in #N"); so are pointers ("pending #N", "proper fix in #N", "see #N for tracking").
- A stack list (ghstack, Sapling, stack-pr: one PR per item, this one marked `__->__`): the entries below
  the marker are prerequisites, those above mentions.
- A link to a comment (`#issuecomment-...`) cites what was said: never a prerequisite or a follow-up.
- A series (`(k/N)`, `part k` in the title): a reference marked as an earlier part is a prerequisite, a
  later part a follow-up, the same part a mention (series.py); a revert's title has no position.

Measured on labelled real histories: `scripts/eval_followups.py`, `benchmarks/followups/GUIDE.md`.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from app.analysis.followups.references import Mention, Source, Text, find_mentions, target_of
from app.analysis.followups.series import Position, place_of, title_position

ReferenceKind = Literal["prerequisite", "followup", "revert", "closes", "mention"]  # = the store's vocabulary
PRIORITY: dict[ReferenceKind, int] = {"revert": 0, "prerequisite": 1, "followup": 2, "closes": 3,
                                      "mention": 4}

REF, OTHER = "\u27e6ref\u27e7", "\u27e6other\u27e7"  # ⟦ref⟧ ⟦other⟧: cannot occur in what we match against
CUT = "\u27e6cut\u27e7 "  # starts a window that is not the sentence's start: no "^Revert" there
WINDOW_BEFORE, WINDOW_AFTER = 300, 150  # characters of the sentence a reference is classified by

# "the pytorch/pytorch PR #5": a repository before the number is written too
_NOUN = (r"(?:(?:the|this|that|my|our|a|an)\s+)?(?:[\w.-]+/[\w.-]+\s+)?"
         r"(?:(?:pr|pull\s+request|pull|issue|ticket|change|patch)s?\s+)?")
_LIST = rf"(?:\[?{OTHER}\]?\s*(?:,|and|&|or|\+|/)?\s*)*"  # earlier members of "#1, #2 and #3"
_LINK = r"(?:\[[^\]\n]{0,120}\]\(\s*)?"  # the text of a Markdown link whose URL is the reference
_T = rf"{_NOUN}{_LIST}[(\[*_]{{0,3}}\s*{_LINK}{REF}"  # the reference after its trigger phrase
_S = r"(?:\s*:\s*|\s+)"  # between the two: "Depends on #1", "Depends on: #1"
# Another change being done, to come: not "landed", "after #5 landed, ..." tells what happened.
_LANDS = (r"(?:lands|has\s+landed|merges|has\s+merged|has\s+been\s+merged|goes\s+in|is\s+in"
          r"|gets\s+(?:merged|landed|fixed|in)|is\s+(?:merged|landed|fixed|resolved|released|available|in|done))")
_DONE = r"(?:\w+ed|done|made|taken|built|written|split|set|put|redone|rewritten|undone)"
_LATER = r"(?:separate|later|future|subsequent|next|upcoming|second|dedicated)"
_CHANGE = r"(?:pr|pull\s+request|change|patch|commit|issue)"

_TAGS = r"(?:\[[^\]]{0,40}\]\s*|[\w-]{1,20}(?:\([^)]{0,40}\))?!?:\s*|\(\d+/\w+\)\s*)*"  # "[rl] ", "ci: "
_REVERT = (  # GitHub's title first: Revert "<the reverted PR's title, ending in (#N)>", free words
    # around; the quoted title may hold quotes of its own
    rf"^\W*{_TAGS}revert\b[^\"“]{{0,40}}[\"“].{{0,300}}?\(\s*{_LIST}{REF}\s*\)\s*(?:[\"”]|$)",
    rf"^\W*{_TAGS}revert\b[^\"“]*[\"“][^\"”]*[\"”]\s*\(?\s*{REF}",  # after it: Revert "Add X" (#N)
    rf"^\W*{_TAGS}revert\b[^\"“.]{{0,150}}?\(\s*{_LIST}{REF}\s*[,)]",  # a free one: Revert the cache (#N)
    rf"^\W*revert(?:\([^)]{{0,40}}\))?!?:\s*[^.]{{0,150}}?\(\s*{_LIST}{REF}\s*[,)]",  # "revert: add X (#N)"
    rf"\b(?:reverts?|reverting|(?:is|as)\s+an?\s+(?:partial\s+)?revert\s+of|rolls?\s+back|rolling\s+back"
    rf"|backs?\s+out|backing\s+out)\s+(?:commit\s+|the\s+changes\s+(?:of|from|in)\s+)?{_T}",
)
_OFF = (r"(?:disabl\w*|skip(?:s|ped|ping)?|xfail\w*|mut(?:e|es|ed|ing)|quarantin\w*|turn(?:s|ed|ing)?\s+off"
        r"|switch(?:es|ed|ing)?\s+off)")
_BACK_ON = (r"(?:re-?enabl\w*|un-?skip\w*|un-?mut\w*|(?:turn|switch)(?:s|ed|ing)?\s+(?:\w+\s+){0,3}?back\s+on"
            r"|bring\w*\s+(?:\w+\s+){0,3}?back)")
_DISABLED_TEST = (  # a test turned off pending other work promises to turn it back on: work left to it
    rf"\b{_BACK_ON}\b[^.;{REF[0]}]{{0,80}}?\b(?:after|until|till|once|when|with|pending){_S}{_T}",
    rf"\b{_OFF}\b[^.;{REF[0]}]{{0,80}}?\b(?:until|till|pending|while\s+waiting\s+for){_S}{_T}",
    rf"{REF}\s*[:;,\u2013\u2014-]+\s*[^.;{REF[0]}]{{0,60}}?\b{_BACK_ON}\b[^.;{REF[0]}]{{0,60}}?"
    rf"\b(?:after|until|once|when)\s+(?:that|it|this|they)\b",  # "#5 — re-enable once that lands"
)
# A line the PR adds saying a feature relies on work proposed in another project: a dependency to track
# (a window when this merges while it is unmerged), not a prerequisite that blocks.
_PROPOSED_UPSTREAM = (
    rf"\brel(?:y|ies|ied|ying)\s+on\b[^.;{REF[0]}]{{0,120}}?\bproposed\s+upstream\b[^.;{REF[0]}]{{0,60}}?{REF}",
    rf"\bproposed\s+upstream\s*(?:in|at|as|via|:|-)?{_S}{_T}",
    rf"\brel(?:y|ies|ied|ying)\s+on{_S}{_T}\s*\)?\s*[(,-]?\s*(?:\w+\s+){{0,2}}?proposed\s+upstream\b",
)
_CONDITION = (  # another change being done as a condition: looked at before TODOs and mentions
    rf"\b(?:after|until|till|once|when)\s+{_T}\s*(?:\([^)]{{0,60}}\)\s*)?\)?\s*[*_]{{0,2}}{_LANDS}",
    rf"{REF}\s*[:;,\u2013\u2014-]+\s*[^.;{REF[0]}]{{0,60}}?\b(?:after|until|once|when)\s+(?:that|it|this|they)\s+"
    rf"{_LANDS}",  # "#5: re-enable once it lands"
)
# "will fail in #5" tells where something breaks, not where work is done
_NOT_FAILURE = r"(?!(?:errors?|fail\w*|crash\w*|hang\w*|break\w*|issues?|problems?|bugs?)\b)"
_NOT_CITING = (r"(?!\b(?:due\s+to|because\s+of|caused\s+by|as\s+in|like\s+in|introduced\s+(?:in|by)"
               r"|triggered\s+by)\b)")  # a TODO explaining itself by a reference does not leave work to it
_TODO_MARK = r"(?:^|[\s(\[*])@?(?:todo|fixme)\b\s*(?:\([^)]{0,40}\))?\s*:"  # "TODO:", "FIXME(@me):"
_TODO = (  # a TODO naming the reference as its own leaves the work to it
    rf"\b(?:todo|fixme)\s*[(:\[]?\s*{_LIST}{REF}",
    rf"{_TODO_MARK}[^{REF[0]}]{{0,200}}?\(\s*see\s+{_NOUN}{REF}\s*\)",  # "TODO: drop X (see issue #5)"
)
_MENTION = (  # looked at before prerequisites and follow-ups: these name what came before
    rf"\bfollow[-\s]?ups?\s+(?:(?:fix|pr|change|patch|commit|work)\s+)?(?:to|of|on|for|from){_S}{_T}",
    rf"\bpull\s+request\s+resolved\s*:\s*{_T}",  # ghstack's and Phabricator's trailer: this PR itself
    rf"\b(?:triggered|caused|introduced|broken|regressed)\s+(?:by|in)\b[^{REF[0]}.;]{{0,60}}?"
    rf"{_LINK}{REF}",
    rf"\b(?:supersede[sd]?|replace[sd]?|obsoletes?|re-?lands?|re-?applies|backports?|backport\s+of"
    rf"|cherry[-\s]?pick(?:ed|s)?(?:\s+(?:of|from))?|split\s+(?:out\s+)?(?:from|of)){_S}{_T}",
    rf"\b(?:discuss(?:ed|ion)|mentioned|described|explained|reported|suggested|proposed|noted|shown|seen"
    rf"|asked)\b[^{REF[0]}]{{0,40}}?\b(?:in|at|on|by){_S}{_T}",
    rf"\b(?:see|similar\s+to|like(?:\s+in)?|as\s+in|cf\.?|related(?:\s+to)?:?|refs?:?|context:?){_S}{_T}"
    rf"(?![)\s]*for\s+(?:the\s+)?(?:tracking|progress|status)\b)",
)
# "#5 or >= 2.18", "#5 (abc123) or lib >= 2.18": what is installed, not what merges first
_VERSION_ALTERNATIVE = r"(?!\s*\)?\s*(?:\([^)]{0,80}\)\s*)?or\s+(?:[\w.-]+\s+)?(?:>|newer|later|above|v?\d))"
_PREREQUISITE = (
    # "depends on TorchAO (#5)", "depends on pytorch PR #5"
    rf"\bdepend(?:s|ing|ent)?\s+(?:up)?on{_S}(?:(?-i:[A-Z][\w.-]*)\s+|[\w.-]+\s+(?=(?:pr|pull\s+request)\b))?{_T}",
    rf"\bdependenc(?:y|ies)\s*(?::|-|\bis\b|\bare\b)\s*{_T}",
    rf"\bblocked\s+(?:by|on){_S}{_T}",
    rf"\brequires?{_S}{_T}{_VERSION_ALTERNATIVE}",
    rf"\b(?:requires?|needs?|needed)\s+(?:[\w.+-]+\s+){{0,2}}?(?:fix(?:es)?|changes?|prs?|patch(?:es)?"
    rf"|pull\s+requests?)\s*:?\s*{_LIST}[(\[*_]{{0,3}}\s*{_LINK}{REF}{_VERSION_ALTERNATIVE}",
    rf"(?:^|[:;]\s*)[^\w(]*needs?\b\s*:?\s*{_T}",  # "Need #12 and a newer driver"; not an aside "(Need #12)"
    rf"\bstacked\s+(?:on(?:\s+top\s+of)?|onto|upon|above){_S}{_T}",
    rf"\bon\s+top\s+of{_S}{_T}",
    rf"\bbuilds?\s+(?:up)?on{_S}{_T}",
    rf"\bbased\s+on{_S}{_T}(?=\s*(?:$|[,.;:)!]|(?:and|which|so|first)\b))",
    rf"\bneeds?{_S}{_T}\s*\)?\s+(?:first|merged|landed|in\s+first|to\s+(?:land|merge|be\s+merged|go\s+in))",
    rf"\b(?:after|until){_S}{_T}\s*\)?\s+{_LANDS}",
    rf"\b(?:merge|land|review|rebase)\s+(?:this\s+(?:pr\s+)?|it\s+)?(?:only\s+)?(?:after|once){_S}{_T}",
    rf"\b(?:do\s+not|don't|cannot|can't)\s+(?:be\s+)?(?:merged?|land(?:ed)?)[*_]{{0,2}}\s+(?:before|until|without)"
    rf"{_S}{_T}",
    rf"\bwait(?:s|ing)?\s+(?:for|on){_S}{_T}",
    rf"\bprereq(?:uisite)?s?\b\s*(?::|-|\bis\b|\bare\b)?\s*(?:(?:ensure|make\s+sure|check)\s+(?:that\s+)?)?{_T}",
    rf"{REF}\s*\)?\s+(?:is|are|must\s+be)\s+(?:required|needed|a\s+prerequisite)",
    rf"{REF}\s*\)?\s+(?:must|has\s+to|needs\s+to)\s+(?:land|merge|be\s+[*_]{{0,2}}merged|go\s+in)\b[^.;]{{0,60}}?"
    rf"\b(?:first|before)",
)
_FOLLOWUP = (
    rf"\bfollow[-\s]?ups?\b\s*(?:{_CHANGE}s?\b|work\b)?\s*(?::|-|,|\bis\b|\bin\b|\bat\b|\bas\b|\bvia\b"
    rf"|\bwill\s+be\b|\bwould\s+be\b)?\s*{_LIST}[(\[]?\s*{REF}",
    rf"\bfollow[-\s]?ups?\b(?!\s+(?:to|of|on|for|from)\b)[^{REF[0]}.;]{{0,100}}?\(\s*{_LIST}{REF}\s*\)",
    rf"\b{_LATER}\s+{_CHANGE}\s*[,:(-]*\s*{_LIST}{REF}",
    rf"\b(?:will|shall|is\s+going\s+to|are\s+going\s+to|to|is\s+being|are\s+being|gets?)\s+be\s+(?:\w+ly\s+)?"
    rf"{_DONE}(?:\s+(?:up|out|back|separately|later|properly|there))?\s+(?:in|by|via|with){_S}{_T}",
    rf"(?:\bwill|'ll|\bshall|\bgoing\s+to|\bplan\s+to|\bintend\s+to)\s+(?:{_NOT_FAILURE}[\w'-]+\s+){{1,6}}?(?:in|via)"
    rf"{_S}{_T}",
    rf"\bpending\s+{_T}",  # "skipped, pending #12"
    rf"\b(?:real|proper|actual|full|permanent|complete|long[-\s]term|better|upstream|separate)\s+fix\s+"
    rf"(?:is\s+|will\s+be\s+|comes\s+|lands\s+)?(?:in|via)\s+{_T}",  # "proper fix in #12"
    rf"(?:^|[;:(\u2013\u2014-]\s*)fix\s+(?:will\s+(?:be|come|land)\s+)?in\s+{_T}",  # "...; fix in #12"
    rf"\bfix\s+will\s+(?:be|come|land)\s+(?:in|via)\s+{_T}",
    rf"{_TODO_MARK}(?:{_NOT_CITING}[^{REF[0]}]){{0,200}}?{REF}",  # "TODO: remove after #12", not "due to #12"
    rf"\bbeing\s+(?:addressed|worked\s+on|handled|fixed|tracked|investigated)\b\s*(?:here|upstream)?\s*:?\s*"
    rf"(?:in|at|by|via|under)?\s*{_T}",
    rf"\b(?:see|refer\s+to|follow)\s+{_T}[)\s]*for\s+(?:the\s+)?(?:tracking|progress|status)\b",
    rf"\bto\s+track\s+(?:the\s+)?(?:progress|status|work)\b[^{REF[0]}.;]{{0,100}}?{REF}",
    rf"{REF}\s*\)?\s+to\s+track\b",  # "opened #12 to track this"
    rf"\bpart\s+(?:[2-9]|\d{{2,}}|two|three|ii|iii)\b(?:\s+of\s+\w+)?\s*"
    rf"(?:(?:is|will\s+be|comes|lands|follows|goes)\s+)?(?:in|at|:|-|,)?\s*{_T}",
    rf"\b(?:rest|remainder|remaining\s+(?:work|changes|parts?)|second\s+half)\s+(?:(?:is|are|will\s+be|comes?"
    rf"|lands?|goes)\s+)?(?:in|at|:|-)\s*{_T}",
    rf"\btrack(?:ed|ing)\s+(?:in|by|at|with|via|under){_S}{_T}",
    # "Tracking issue: #5", not "reports go to the tracking issue (#5)", a place, not work left to it
    rf"(?<!\bon\sthe\s)(?<!\bto\sthe\s)(?<!\bin\sthe\s)\btracking\s+(?:issue|pr|ticket)\s*(?::|-|\bis\b)?\s*{_T}",
    rf"\b(?:todo|fixme)\b[^{REF[0]}.;]{{0,40}}?\btrack(?:ing|ed)\s+(?:here|in|at|by)?\s*:?\s*{_T}",
    rf"\b(?:under\s+(?:active\s+)?development|in\s+progress|being\s+developed)\s+(?:in|at|via){_S}"
    rf"(?:(?:an?\s+|the\s+)?(?:open|draft|pending)\s+)?{_T}",  # "under development in open PR #5"
    rf"\b(?:deferred|postponed|punted|left|moved|split\s+out|pushed)\s+(?:to|for|into|until){_S}{_T}",
    rf"\b(?:comes?|coming|lands?|landing)\s+(?:later\s+|separately\s+|next\s+)?in{_S}{_T}",
    rf"{REF}\s+(?:will|shall|is\s+going\s+to|should)\b(?!\s+(?:not|never|have)\b)",
    rf"{REF}\s+(?:adds|introduces|implements|reintroduces|restores)\b",
    rf"{REF}\s*\)?\s+(?:is|will\s+be)\s+(?:the|a|our)\s+(?:planned\s+|promised\s+|proper\s+)?"
    rf"follow[-\s]?up\b",
)
_CLOSES = (rf"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+{REF}",)


def _compiled(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(pattern, re.I) for pattern in patterns)


# (kind, patterns, whether a negation before the trigger cancels it); the first rule that holds wins.
RULES: tuple[tuple[ReferenceKind, tuple[re.Pattern[str], ...], bool], ...] = (
    ("revert", _compiled(_REVERT), True),
    ("followup", _compiled(_DISABLED_TEST + _PROPOSED_UPSTREAM), True),
    ("prerequisite", _compiled(_CONDITION), True),
    ("followup", _compiled(_TODO), True),
    ("mention", _compiled(_MENTION), False),
    ("prerequisite", _compiled(_PREREQUISITE), True),
    ("followup", _compiled(_FOLLOWUP), True),
    ("closes", _compiled(_CLOSES), False),  # GitHub closes "does not fix #N" all the same
)
_SERIES_KIND: dict[str, ReferenceKind] = {"earlier": "prerequisite", "same": "mention", "later": "followup"}
_CLAUSE_END = re.compile(r"[,;:.!?()\u2013\u2014]|\b(?:but|however|although|though|while|whereas)\b", re.I)
_NEGATION = re.compile(r"\b(?:not|no|never|without|nor|neither|none|nothing|independent(?:ly)?|unrelated"
                       r"|cannot)\b|n't\b", re.I)
_PAST = re.compile(r"\b(?:was|were|used\s+to|previously|formerly|had(?:\s+been)?|originally)\s*$", re.I)
_COMMENT_LINK = re.compile(r"#(?:issuecomment|pullrequestreview|discussion_r)", re.I)
_NEGATION_WORDS = 6  # how far back a negation reaches within its clause


@dataclass(frozen=True)
class TextReference:
    """A classified reference: what the PR's text says about owner/repo#number (or a reverted commit)."""

    kind: ReferenceKind
    owner: str
    repo: str
    number: int | None  # None for a reverted commit
    sha: str | None
    sentence: str
    source: Source
    local: bool  # in the PR's own repository
    url: str | None = None
    context: str = ""  # the sentence before, for a terse one
    path: str | None = None  # for source "diff": where the head revision says it
    line: int | None = None

    @property
    def where(self) -> str:
        """`path:line` of a reference in the lines the PR adds; "" for one in its texts."""
        return f"{self.path}:{self.line}" if self.path is not None else ""

    @property
    def target(self) -> str:
        """`owner/repo#N` (`owner/repo@sha` for a commit): the key resolutions are looked up by."""
        return target_of(self.owner, self.repo, self.number, self.sha)

    @property
    def label(self) -> str:
        """How a comment names it: `#N` in the PR's repository, `owner/repo#N` elsewhere."""
        if self.sha is not None:
            return f"commit {self.sha[:12]}"
        return f"#{self.number}" if self.local else f"{self.owner}/{self.repo}#{self.number}"


def find_references(texts: Iterable[Text], *, owner: str, repo: str, number: int,
                    web_hosts: Iterable[str] = ()) -> list[TextReference]:
    """The references of a PR's texts, classified, one per target, in order of first appearance."""
    texts = list(texts)
    mentions = find_mentions(texts, owner=owner, repo=repo, number=number, web_hosts=web_hosts)
    series = next((title_position(text.text) for text in texts if text.source == "title"), None)
    sentences: dict[tuple[Source, str], list[Mention]] = {}
    for mention in mentions:
        sentences.setdefault((mention.source, mention.sentence), []).append(mention)
    for listed in sentences.values():
        listed.sort(key=lambda m: m.start)  # a sentence written twice lists its references twice
    best: dict[str, TextReference] = {}  # by target, lower-cased: GitHub names ignore case
    for mention in mentions:
        kind = classify(mention, sentences[(mention.source, mention.sentence)], series=series)
        found = _reference(mention, kind, owner, repo)
        known = best.setdefault(found.target.lower(), found)
        if PRIORITY[found.kind] < PRIORITY[known.kind]:
            best[found.target.lower()] = found
    return list(best.values())


def classify(mention: Mention, same_sentence: Sequence[Mention] = (), *,
             series: Position | None = None) -> ReferenceKind:
    """The role of MENTION in its sentence; SAME_SENTENCE are all references written in that sentence, in
    order of `start`; SERIES is this PR's place in a series of parts, from its title."""
    if mention.stack:  # an entry of a stack list: its place says it, whatever the lead-in's words
        return "prerequisite" if mention.stack == "below" else "mention"
    kind = _by_rules(_marked(mention, same_sentence), series)
    if kind in ("prerequisite", "followup") and mention.url and _COMMENT_LINK.search(mention.url):
        return "mention"  # a link to a comment cites what was said there
    return kind


@functools.lru_cache(maxsize=4096)  # a sentence of the same reference again and again is classified once
def _by_rules(marked: str, series: Position | None) -> ReferenceKind:
    for index, (kind, patterns, negatable) in enumerate(RULES):
        # after the revert's grammar and a disabled test's promise, a part of this PR's series says where it
        # stands
        if index == 2:
            place = place_of(marked, REF, OTHER, series)
            if place is not None:
                return _SERIES_KIND[place]
        for pattern in patterns:
            if any(not (negatable and _negated(marked, hit.start())) for hit in pattern.finditer(marked)):
                return kind
    return "mention"


def _marked(mention: Mention, same_sentence: Sequence[Mention]) -> str:
    """The sentence around MENTION with it as REF and the others as OTHER. Only a window around it: every
    phrase is local, and a hostile 60 kB "sentence" of 3000 references must not cost minutes."""
    low, high = max(mention.start - WINDOW_BEFORE, 0), mention.end + WINDOW_AFTER
    first = bisect.bisect_left(same_sentence, low, key=lambda m: m.start)
    near = itertools.takewhile(lambda m: m.start < high, itertools.islice(same_sentence, first, None))
    spans = {(m.start, m.end): OTHER for m in near if m.end <= high}
    spans[(mention.start, mention.end)] = REF
    text, cursor = ["" if low == 0 else CUT], low
    for (start, end), token in sorted(spans.items()):
        if start < cursor:
            continue  # the same reference listed twice (identical sentences): once is enough
        text += [mention.sentence[cursor:start], token]
        cursor = end
    return "".join([*text, mention.sentence[cursor:max(high, cursor)]])


def _negated(marked: str, trigger: int) -> bool:
    before = marked[:trigger]
    clause = before[max((m.end() for m in _CLAUSE_END.finditer(before)), default=0):]
    near = " ".join(clause.split()[-_NEGATION_WORDS:])
    return bool(_NEGATION.search(near) or _PAST.search(before))


def _reference(mention: Mention, kind: ReferenceKind, owner: str, repo: str) -> TextReference:
    local = (mention.owner.lower(), mention.repo.lower()) == (owner.lower(), repo.lower())
    if kind in ("closes", "revert") and mention.source == "diff":
        # a file's content closes nothing on GitHub ("fixes #N" there describes code), and a PR says what
        # it reverts in its title, body or commits: "reverts #N's change" in a comment must close no window
        kind = "mention"
    return TextReference(kind=kind, owner=mention.owner, repo=mention.repo, number=mention.number,
                         sha=mention.sha, sentence=mention.sentence, source=mention.source, local=local,
                         url=mention.url, context=mention.previous, path=mention.path, line=mention.line)
