"""Findings from two revisions' validation results: what the head newly rejects, crashes on or drops.

Pure: compares the SuiteResults of base and head suite by suite, maps head lines to base lines through the
diff, and groups suites that fail the same way into one finding each.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.analysis.core.model import (
    SEVERITY_ORDER,
    Event,
    Finding,
    Matrix,
    Outcome,
    Severity,
    Suite,
    SuiteResult,
)
from app.analysis.core.policy import Policy, path_matches
from app.analysis.verdict.diff import TreeDiff

MAX_MESSAGE = 1000
UNRECOGNIZED = "unrecognized arguments:"
Key = TypeVar("Key", bound=Hashable)


@dataclass(frozen=True)
class _Pair:
    """One suite and what each revision made of it."""

    suite: Suite
    base: SuiteResult
    head: SuiteResult

    @property
    def comparable(self) -> bool:
        """Both revisions ran the suite to an end, so their flags and learned attributes can be compared."""
        return self.base.outcome.outcome != "error" and self.head.outcome.outcome != "error"

    @property
    def rejected_at_both(self) -> bool:
        """Both revisions rejected the suite: the case record mode is for, where noise the harness causes
        (a missing file, absent upstream code) stops both early and only the events tell them apart. A
        suite accepted at either revision is judged by its outcomes, and the harness runs record mode
        only for suites it did not accept."""
        return self.base.outcome.outcome == "rejected" and self.head.outcome.outcome == "rejected"


class _Groups(Generic[Key]):
    """Suites collected under a key: every group becomes one finding."""

    def __init__(self) -> None:
        self._members: dict[Key, dict[str, str]] = {}

    def add(self, key: Key, suite: Suite) -> None:
        self._members.setdefault(key, {})[suite.id] = suite.script

    def __iter__(self) -> Iterator[tuple[Key, tuple[str, ...], tuple[str, ...]]]:
        for key, members in self._members.items():
            yield key, tuple(sorted(members)), tuple(sorted(set(members.values())))


def verdict(matrix: Matrix, base: Mapping[str, SuiteResult], head: Mapping[str, SuiteResult], diff: TreeDiff,
            policy: Policy, *, traced: Mapping[str, Iterable[int]] | None = None) -> list[Finding]:
    """Every finding, most severe first.

    `traced` names the changed head lines that could run (the lines the head was traced on); by default
    every changed line of a validation path.
    """
    pairs = [_Pair(s, base[s.id], head[s.id]) for s in matrix.suites if s.id in base and s.id in head]
    removed, removed_names, explained = _removed_flags(pairs, policy)
    rejections = _outcome_rejections(pairs, diff, policy, explained)
    reported = {(s, f.path, f.line) for f in rejections for s in f.suites}
    findings = [*removed, *rejections, *_new_events(pairs, diff, policy),
                *_learned_attributes(pairs, diff, policy, reported), *_newly_tolerated(pairs, removed_names),
                *_fixed(pairs), *_new_errors(pairs, diff, policy), *_capture_failures(matrix)]
    if traced is None:
        traced = {p: diff.changed_lines(p) for p in diff.changed_paths
                  if any(path_matches(p, g) for g in policy.validation.path_globs)}
    findings += _not_exercised(pairs, traced, findings)
    return sorted(findings, key=_order)


def _order(finding: Finding) -> tuple[int, str, int, str, str, tuple[str, ...]]:
    return (SEVERITY_ORDER[finding.severity], finding.path or "", finding.line or 0, finding.kind,
            finding.message, finding.suites)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


def _describe(exception: str | None, message: str | None) -> str:
    if exception and message:
        return _clip(f"{exception}: {message}")
    return _clip(exception or message or "no reason given")


def _unrecognized(outcome: Outcome) -> set[str]:
    """Option strings argparse named in an 'unrecognized arguments' rejection."""
    message = outcome.message or ""
    if outcome.outcome != "rejected" or UNRECOGNIZED not in message:
        return set()
    words = message.split(UNRECOGNIZED, 1)[1].split()
    return {w.split("=", 1)[0] for w in words if w.startswith("-")}


def _removed_flags(pairs: list[_Pair], policy: Policy) -> tuple[list[Finding], set[str], set[str]]:
    """Flags suites pass that base defined and head does not: findings, the flags, the suites they explain.

    A suite argparse rejects at head only for such flags is explained by them: it gets no second finding.
    """
    groups: _Groups[str] = _Groups()
    explained: set[str] = set()
    for pair in pairs:
        if not pair.comparable:
            continue
        rejected = _unrecognized(pair.head.outcome)
        # A flag one head parser defines is still there, though another one (the absent upstream parser's
        # stand-in, fed every word) tolerated it: slime parses its SGLang flags in a parser of their own.
        gone = (set(pair.base.known_flags) & (set(pair.head.tolerated_flags) | rejected)) \
            - set(pair.head.known_flags)
        for flag in gone:
            groups.add(flag, pair.suite)
        if rejected and rejected <= gone:
            explained.add(pair.suite.id)
    strict = policy.validation.unknown_flags == "error"
    severity: Severity = "blocking" if strict else "warning"
    effect = "the head rejects it" if strict else "unknown flags are ignored: it silently does nothing"
    findings = [Finding(kind="removed_flag", severity=severity, scripts=scripts, suites=suites,
                        message=f"{flag} is defined at base but not at head, and "
                                f"{_suites_pass(len(suites))} it: {effect}")
                for flag, suites, scripts in groups]
    return findings, {flag for flag, _, _ in groups}, explained


def _suites_pass(count: int) -> str:
    return "1 CI suite still passes" if count == 1 else f"{count} CI suites still pass"


def _outcome_rejections(pairs: list[_Pair], diff: TreeDiff, policy: Policy,
                        explained: set[str]) -> list[Finding]:
    """Suites the base accepts and the head rejects. One whose rejection rests on a value the harness
    assumed (an option a stubbed or replaced upstream parser may define) is its blindness: a warning."""
    groups: _Groups[tuple[str | None, int | None, str | None, tuple[str, ...]]] = _Groups()
    messages: dict[tuple[str | None, int | None, str | None, tuple[str, ...]], str] = {}
    for pair in pairs:
        head = pair.head.outcome
        if pair.base.outcome.outcome == "accepted" and head.outcome == "rejected" \
                and pair.suite.id not in explained:
            key = (head.path, head.line, head.exception, pair.head.rejection_assumes)
            messages.setdefault(key, _describe(head.exception, head.message))
            groups.add(key, pair.suite)
    return [Finding(kind="new_rejection",
                    severity="warning" if key[3] else policy.severities.new_rejection,
                    message=_clip(messages[key] + _rests_on(key[3])), scripts=scripts, suites=suites,
                    path=key[0], line=key[1], in_diff=diff.in_diff(key[0], key[1]))
            for key, suites, scripts in groups]


def _rests_on(assumed: tuple[str, ...]) -> str:
    if not assumed:
        return ""
    names = ", ".join(f"args.{name}" for name in assumed)
    return (f" (rests on the value the harness assumed for {names}, which a stubbed or replaced upstream "
            "parser may define: the harness's blindness, not blocking)")


def _is_new(event: Event, base_events: tuple[Event, ...], diff: TreeDiff) -> bool:
    """An event no base event of the same suite explains, by mapped line or by what failed."""
    base_line = diff.to_base(event.path, event.line)
    for old in base_events:
        same_place = (old.path == event.path and base_line is not None and old.line == base_line
                      and old.kind == event.kind and old.exception == event.exception)
        same_failure = (old.function == event.function and old.text == event.text
                        and old.message == event.message)
        if same_place or same_failure:
            return False
    return True


def _new_events(pairs: list[_Pair], diff: TreeDiff, policy: Policy) -> list[Finding]:
    """Record-mode events only the head has, for suites both revisions reject.

    A suite base accepts and head rejects is an outcome finding already (or a removed flag); one that
    either revision accepts has no events to compare (record mode did not run for it).
    """
    groups: _Groups[tuple[str, int, str, str]] = _Groups()
    first: dict[tuple[str, int, str, str], Event] = {}
    for pair in pairs:
        if not pair.rejected_at_both:
            continue
        for event in pair.head.events:
            if not _is_new(event, pair.base.events, diff):
                continue
            key = (event.path, event.line, event.kind, event.exception)
            first.setdefault(key, event)
            groups.add(key, pair.suite)
    return [_event_finding(first[key], suites, scripts, diff, policy) for key, suites, scripts in groups]


def _event_finding(event: Event, suites: tuple[str, ...], scripts: tuple[str, ...], diff: TreeDiff,
                   policy: Policy) -> Finding:
    in_diff = diff.in_diff(event.path, event.line)
    severity = policy.severities.new_rejection if event.kind != "error" or in_diff else "warning"
    text = event.text if len(event.text) <= 120 else event.text[:119] + "…"
    message = _clip(f"{_describe(event.exception, event.message)} (found in record mode, at `{text}`)")
    return Finding(kind="new_rejection", severity=severity, message=message, scripts=scripts,
                   suites=suites, path=event.path, line=event.line, in_diff=in_diff)


def _learned_attributes(pairs: list[_Pair], diff: TreeDiff, policy: Policy,
                        reported: set[tuple[str, str | None, int | None]]) -> list[Finding]:
    groups: _Groups[tuple[str, str | None, int | None]] = _Groups()
    for pair in pairs:
        if not pair.comparable:
            continue
        known = {a.name for a in pair.base.learned}
        for attribute in pair.head.learned:
            location = (attribute.path, attribute.line)
            if attribute.upstream:
                continue  # a stubbed or replaced parser may define it: blindness (health), no finding
            if attribute.name not in known and diff.in_diff(*location) \
                    and (pair.suite.id, *location) not in reported:
                groups.add((attribute.name, *location), pair.suite)
    return [Finding(kind="new_rejection", severity=policy.severities.new_rejection,
                    message=f"reads args.{name}, which no parser defines", scripts=scripts, suites=suites,
                    path=path, line=line, in_diff=True)
            for (name, path, line), suites, scripts in groups]


def _newly_tolerated(pairs: list[_Pair], removed: set[str]) -> list[Finding]:
    groups: _Groups[str] = _Groups()
    for pair in pairs:
        if not pair.comparable:
            continue
        before = set(pair.base.tolerated_flags) | set(pair.base.known_flags)
        for flag in set(pair.head.tolerated_flags) - before - removed:
            groups.add(flag, pair.suite)
    return [Finding(kind="newly_tolerated_flag", severity="info", scripts=scripts, suites=suites,
                    message=f"{flag} is set generically at head (no repository parser defines it), "
                            "but not at base")
            for flag, suites, scripts in groups]


def _fixed(pairs: list[_Pair]) -> list[Finding]:
    groups: _Groups[tuple[str | None, int | None, str]] = _Groups()
    for pair in pairs:
        base = pair.base.outcome
        if base.outcome == "rejected" and pair.head.outcome.outcome == "accepted":
            groups.add((base.path, base.line, _describe(base.exception, base.message)), pair.suite)
    return [Finding(kind="fixed", severity="info", scripts=scripts, suites=suites,
                    message=_clip(f"accepted at head; base rejected it at {path}:{line}: {reason}"))
            for (path, line, reason), suites, scripts in groups]


def _new_errors(pairs: list[_Pair], diff: TreeDiff, policy: Policy) -> list[Finding]:
    groups: _Groups[tuple[str | None, int | None, str]] = _Groups()
    for pair in pairs:
        head = pair.head.outcome
        if pair.base.outcome.outcome == "accepted" and head.outcome == "error":
            groups.add((head.path, head.line, _describe(head.exception, head.message)), pair.suite)
    return [Finding(kind="new_error", severity=policy.severities.new_error, scripts=scripts, suites=suites,
                    message=_clip(f"accepted at base, but validation at head did not finish: {reason}"),
                    path=path, line=line, in_diff=diff.in_diff(path, line))
            for (path, line, reason), suites, scripts in groups]


def _capture_failures(matrix: Matrix) -> list[Finding]:
    return [Finding(kind="capture_failed", severity="warning", scripts=(failure.script,),
                    message=_clip(f"no CI suite captured from {failure.script}: {failure.reason}"))
            for failure in matrix.failed]


def _not_exercised(pairs: list[_Pair], traced: Mapping[str, Iterable[int]],
                   findings: list[Finding]) -> list[Finding]:
    """Changed lines that no suite ran at head: a new check that nothing reaches proves nothing."""
    ran = [p.head for p in pairs if p.head.outcome.outcome != "error"]
    if not ran:
        return []  # nothing ran to the end: the errors already say so
    blocking = {(f.path, f.line) for f in findings if f.severity == "blocking"}
    result = []
    for path, lines in sorted(traced.items()):
        hit = {line for r in ran for line in r.lines_hit.get(path, ())}
        missing = sorted(line for line in set(lines) - hit if (path, line) not in blocking)
        if missing:
            pronoun = "it" if len(missing) == 1 else "them"
            result.append(Finding(kind="not_exercised", severity="info", path=path, line=missing[0],
                                  in_diff=True, message=f"{_line_ranges(missing)} of {path} changed; "
                                                        f"no CI suite reaches {pronoun}"))
    return result


def _line_ranges(lines: list[int]) -> str:
    """[12, 13, 14, 20] -> 'lines 12-14, 20'."""
    spans: list[list[int]] = []
    for line in lines:
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    text = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)
    return f"line {text}" if len(lines) == 1 else f"lines {text}"
