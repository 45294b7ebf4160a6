"""Findings for the check and comment, what a risk window awaits, and its risk sentence: from a PR's
classified references (followups.py) and the state GitHub reports for each (app/github/reference_states.py).

Pure. States are the store's vocabulary: a pull request is open, draft, merged or closed_unmerged; an issue
is open, completed or not_planned; either can be not_found or no_access.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from app.analysis.core.model import Finding, FindingKind
from app.analysis.core.policy import Followups
from app.analysis.followups.followups import TextReference

ReferenceState = Literal["open", "draft", "merged", "closed_unmerged", "not_found", "no_access", "completed",
                         "not_planned"]
SETTLED: frozenset[ReferenceState] = frozenset({"merged", "completed"})
UNKNOWN: frozenset[ReferenceState] = frozenset({"not_found", "no_access"})
ABANDONED: frozenset[ReferenceState] = frozenset({"closed_unmerged", "not_planned"})
RISK_CHARS = 200
QUOTE_CHARS = 160
_TERSE_WORDS = 5  # a sentence this short ("Follow-up: #2204") says nothing of the risk by itself

_WORDS: dict[ReferenceState, str] = {
    "open": "open", "draft": "a draft", "merged": "merged", "closed_unmerged": "closed without being merged",
    "not_found": "not found (or not visible to the App)", "no_access": "not accessible to the App",
    "completed": "closed as completed", "not_planned": "closed as not planned",
}


@dataclass(frozen=True)
class Resolution:
    """What GitHub says of a referenced pull request or issue now."""

    state: ReferenceState
    is_pull_request: bool = True
    merged_at: datetime | None = None
    url: str | None = None  # the page a person opens; None when not found

    @property
    def settled(self) -> bool:
        """The promise is kept: the PR merged, or the issue was closed as completed."""
        return self.state in SETTLED

    @property
    def words(self) -> str:
        """The state as a comment says it ("a draft", "closed as not planned", "an open issue")."""
        if self.state == "open":
            return "open" if self.is_pull_request else "an open issue"
        return _WORDS[self.state]


def followup_findings(references: Iterable[TextReference], resolutions: Mapping[str, Resolution],
                      levels: Followups) -> list[Finding]:
    """A finding for each prerequisite and promised follow-up that is not settled, at the policy's levels;
    one written in a line the PR adds is placed there (path and line), so the check annotates that line.

    RESOLUTIONS are keyed by `TextReference.target` (case does not matter); a reference not resolved yet
    gets no finding rather than a guess.
    """
    by_target = {target.lower(): resolution for target, resolution in resolutions.items()}
    findings: list[Finding] = []
    for reference in references:
        resolution = by_target.get(reference.target.lower())
        if reference.kind not in ("prerequisite", "followup") or resolution is None or resolution.settled:
            continue
        if resolution.state in UNKNOWN:
            finding = _unknown(reference, resolution)
        elif reference.kind == "prerequisite":
            finding = _prerequisite(reference, resolution, levels)
        else:
            finding = _followup(reference, resolution, levels)
        findings.append(_placed(finding, reference))
    return findings


def _placed(finding: Finding, reference: TextReference) -> Finding:
    if reference.path is None:
        return finding
    return dataclasses.replace(finding, path=reference.path, line=reference.line, in_diff=True)


def _prerequisite(reference: TextReference, resolution: Resolution, levels: Followups) -> Finding:
    advice = "it will not merge as it is" if resolution.state in ABANDONED else "merge it first"
    return Finding(kind="unmerged_prerequisite", severity=levels.prerequisite_unmerged,
                   message=f"Prerequisite {reference.label} {_status(resolution)}; this PR depends on it "
                           f"({_quote(reference.sentence)}): {advice}.")


def _followup(reference: TextReference, resolution: Resolution, levels: Followups) -> Finding:
    if resolution.state in ABANDONED:
        return Finding(kind="abandoned_followup", severity=levels.followup_abandoned,
                       message=f"Promised follow-up {reference.label} {_status(resolution)}: the promise was "
                               f"abandoned, and what it was to fix is still open "
                               f"({_quote(reference.sentence)}).")
    return Finding(kind="pending_followup", severity=levels.followup_pending,
                   message=f"Promised follow-up {reference.label} {_status(resolution)} "
                           f"({_quote(reference.sentence)}).")


def _status(resolution: Resolution) -> str:
    if resolution.state in ABANDONED:
        return f"was {resolution.words}"
    if resolution.is_pull_request:
        return f"is {resolution.words}, not merged yet"
    return f"is {resolution.words}"


def _unknown(reference: TextReference, resolution: Resolution) -> Finding:
    role = "prerequisite" if reference.kind == "prerequisite" else "promised follow-up"
    kind: FindingKind = "unmerged_prerequisite" if reference.kind == "prerequisite" else "pending_followup"
    return Finding(kind=kind, severity="info",
                   message=f"Could not check {role} {reference.label}: {resolution.words}.")


def awaited(references: Iterable[TextReference], resolutions: Mapping[str, Resolution],
            ) -> list[TextReference]:
    """What a risk window opened at merge awaits: every prerequisite and promised follow-up not settled.

    One that could not be seen, or is not resolved yet, is awaited too: an unknown risk stays visible
    until it lands or a maintainer closes the window.
    """
    by_target = {target.lower(): resolution for target, resolution in resolutions.items()}
    kept = []
    for reference in references:
        resolution = by_target.get(reference.target.lower())
        if reference.kind in ("prerequisite", "followup") and not (resolution and resolution.settled):
            kept.append(reference)
    return kept


def risk_sentence(references: Iterable[TextReference], *, limit: int = RISK_CHARS) -> str:
    """The risk of a window in one sentence of the PR: the first promised follow-up's (else the first
    prerequisite's), with the sentence before it when it alone is terse, after its `path:line` when the
    PR wrote it in a line it adds; "" when there is neither."""
    listed = list(references)
    chosen = next((r for r in listed if r.kind == "followup"), None) or next(
        (r for r in listed if r.kind == "prerequisite"), None)
    if chosen is None:
        return ""
    text = chosen.sentence
    if chosen.context and len(text.split()) < _TERSE_WORDS:
        text = f"{chosen.context} {text}"
    return trim(f"{chosen.where}: {text}" if chosen.where else text, limit)


def trim(text: str, limit: int) -> str:
    """TEXT on one line, cut at a word boundary to at most LIMIT characters, with an ellipsis when cut."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "…"


def _quote(sentence: str) -> str:
    return f"“{trim(sentence, QUOTE_CHARS)}”"
