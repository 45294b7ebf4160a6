"""How much of the repository the analysis really saw: the base's acceptance of the suites CI starts.

Every suite GPU CI starts passes the base revision's validation, so a suite the base rejects (or errors on)
is the harness's own blindness, not the repository's, unless the head accepts it: then the harness saw it,
and the base is really broken (a revert's base). Past the policy's share of blind suites, or when the
changed lines ran for no suite because every suite died before them, the answer is "could not analyse",
never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from app.analysis.core.model import CaptureFailure, Matrix, Outcome, SuiteResult

DEFAULT_MAX_BASE_FAILURES = 0.10
NOT_VALIDATED = Outcome("error", message="not validated")


@dataclass(frozen=True)
class ErrorGroup:
    """Suites the base failed on in the same way: one exception at one line (or with one message)."""

    example: Outcome  # the first suite's; others at the same line may differ in their values
    count: int

    def to_json(self) -> dict[str, Any]:
        return {**self.example.to_json(), "count": self.count}


def where(outcome: Outcome) -> str:
    if outcome.path is None:
        return ""
    return outcome.path if outcome.line is None else f"{outcome.path}:{outcome.line}"


def describe(outcome: Outcome) -> str:
    """'FileNotFoundError: [Errno 2] … at pkg/arguments.py:7'."""
    what = ": ".join(part for part in (outcome.exception, outcome.message) if part) or outcome.outcome
    return f"{what} at {where(outcome)}" if where(outcome) else what


@dataclass(frozen=True)
class BaseFailure:
    """One suite the base rejects or errors on, and how."""

    suite: str
    outcome: Outcome

    def to_json(self) -> dict[str, Any]:
        return {"suite": self.suite, **self.outcome.to_json()}


@dataclass(frozen=True)
class Assumed:
    """An option no parser defined, read where a stubbed or replaced upstream parser parsed: the harness
    gave it the neutral value of its name's shape, in this many suites of each revision."""

    name: str
    value: Any
    base_suites: int
    head_suites: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return f"{self.name}={self.value!r}"


@dataclass(frozen=True)
class Health:
    suites: int
    scripts: int  # considered by capture (disabled ones excluded)
    captured: int  # yielded at least one suite (partial ones included)
    partial: tuple[CaptureFailure, ...]
    no_entry: tuple[CaptureFailure, ...]
    failed: tuple[CaptureFailure, ...]
    disabled: tuple[str, ...]
    not_considered: tuple[str, ...]  # what CI may run and the policy leaves out (a scope it does not list)
    base_accepted: int
    base_rejected: int
    base_errors: int
    errors: tuple[ErrorGroup, ...]  # the base's failures grouped, most common first
    base_failures: tuple[BaseFailure, ...]  # every suite the base rejects or errors on
    fixed_at_head: int  # base failures the head accepts: seen by the harness, the base's own breakage
    suspect_base: bool  # the base fails every suite with one error, which the head "fixes": the harness's
    lines_changed: bool  # changed validation statements were traced
    lines_reached: bool  # some suite ran one of them at the head
    stubbed_parser_reads: tuple[str, ...]  # args the head reads that a stubbed or replaced parser may define
    drift: tuple[str, ...]  # replacement targets the base lacks, skipped
    assumed: tuple[Assumed, ...]  # options a stubbed upstream parser may define, given a neutral value
    assumed_rejections: tuple[str, ...]  # suites the head newly rejects for an assumed value: blindness
    max_base_failures: float
    fail_open: bool  # the App's check run when blind: neutral (true) or action_required (false)
    could_analyse: bool
    reason: str

    @property
    def accepted_share(self) -> float:
        return self.base_accepted / self.suites if self.suites else 0.0

    @property
    def failure_share(self) -> float:
        """The share of suites the harness could not see: failing at base, not accepted at head (at a
        suspect base, failing at base)."""
        fixed = 0 if self.suspect_base else self.fixed_at_head
        blind = self.base_rejected + self.base_errors - fixed
        return blind / self.suites if self.suites else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "could_analyse": self.could_analyse, "reason": self.reason, "suites": self.suites,
            "scripts": {"considered": self.scripts, "captured": self.captured,
                        "partial": [asdict(f) for f in self.partial],
                        "no_entry": [asdict(f) for f in self.no_entry],
                        "failed": [asdict(f) for f in self.failed], "disabled": list(self.disabled),
                        "not_considered": list(self.not_considered)},
            "base": {"accepted": self.base_accepted, "rejected": self.base_rejected,
                     "error": self.base_errors, "accepted_share": round(self.accepted_share, 4)},
            "max_base_failures": self.max_base_failures, "fail_open": self.fail_open,
            "errors": [group.to_json() for group in self.errors],
            "base_failures": [failure.to_json() for failure in self.base_failures],
            "fixed_at_head": self.fixed_at_head, "suspect_base": self.suspect_base,
            "lines_changed": self.lines_changed, "lines_reached": self.lines_reached,
            "stubbed_parser_reads": list(self.stubbed_parser_reads), "drift": list(self.drift),
            "assumed": [each.to_json() for each in self.assumed],
            "assumed_rejections": list(self.assumed_rejections),
        }


def assess(matrix: Matrix, base: Mapping[str, SuiteResult], head: Mapping[str, SuiteResult],
           traced: Mapping[str, Sequence[int]], *,
           max_base_failures: float = DEFAULT_MAX_BASE_FAILURES, fail_open: bool = False) -> Health:
    """The health of one analysis; HEAD and TRACED empty when one revision alone was validated (doctor)."""
    outcomes = {s.id: _outcome(base, s.id) for s in matrix.suites}
    failures = tuple(BaseFailure(suite, outcome) for suite, outcome in outcomes.items()
                     if outcome.outcome != "accepted")
    lines_changed = any(traced.values())
    lines_reached = any(result.lines_hit for result in head.values())
    died_before = bool(head) and all(_outcome(head, s.id).outcome != "accepted" for s in matrix.suites)
    measured = Health(
        suites=len(matrix.suites), scripts=matrix.scripts, captured=matrix.captured, partial=matrix.partial,
        no_entry=matrix.no_entry, failed=matrix.failed, disabled=matrix.disabled,
        not_considered=matrix.not_considered,
        base_accepted=len(outcomes) - len(failures),
        base_rejected=sum(1 for f in failures if f.outcome.outcome == "rejected"),
        base_errors=sum(1 for f in failures if f.outcome.outcome == "error"),
        errors=group_errors(failures), base_failures=failures,
        fixed_at_head=sum(1 for f in failures if _outcome(head, f.suite).outcome == "accepted"),
        suspect_base=_suspect(failures, len(outcomes), head), lines_changed=lines_changed,
        lines_reached=lines_reached, stubbed_parser_reads=_stubbed_parser_reads(base, head),
        drift=tuple(dict.fromkeys(item for result in base.values() for item in result.drift)),
        assumed=_assumed(base, head), assumed_rejections=_assumed_rejections(base, head),
        max_base_failures=max_base_failures, fail_open=fail_open,
        could_analyse=True, reason="")
    blind = _blindness(measured, unexercised=lines_changed and not lines_reached and died_before)
    if blind is None:
        return replace(measured, reason=_seen(measured))
    return replace(measured, could_analyse=False, reason=blind)


def _suspect(failures: Sequence[BaseFailure], suites: int, head: Mapping[str, SuiteResult]) -> bool:
    """The base fails every suite (more than one) with one error, and the head accepts them all: the same
    error everywhere is the harness's environment (a stub, a missing package), not the base's own
    breakage, so what the head "fixes" it did not fix for CI."""
    return (len(failures) == suites > 1 and len(group_errors(failures)) == 1
            and all(_outcome(head, f.suite).outcome == "accepted" for f in failures))


def _stubbed_parser_reads(base: Mapping[str, SuiteResult],
                          head: Mapping[str, SuiteResult]) -> tuple[str, ...]:
    """Attributes the head reads, no parser defines and the base never read, in runs where a stubbed or
    replaced upstream parser parsed: it may define them, so they are no finding, but the harness is blind
    there."""
    names: dict[str, None] = {}
    for suite_id, result in head.items():
        before = {a.name for a in base[suite_id].learned} if suite_id in base else set()
        names.update((a.name, None) for a in result.learned if a.upstream and a.name not in before)
    return tuple(names)


def _assumed(base: Mapping[str, SuiteResult], head: Mapping[str, SuiteResult]) -> tuple[Assumed, ...]:
    """Every option the harness assumed a neutral value for, at either revision, with its suites' counts."""
    values: dict[str, Any] = {}
    counts: dict[str, list[int]] = {}
    for side, results in enumerate((base, head)):
        for result in results.values():
            for attribute in result.learned:
                if attribute.assumed:
                    values.setdefault(attribute.name, attribute.value)
                    counts.setdefault(attribute.name, [0, 0])[side] += 1
    return tuple(Assumed(name, values[name], *counts[name]) for name in values)


def _assumed_rejections(base: Mapping[str, SuiteResult],
                        head: Mapping[str, SuiteResult]) -> tuple[str, ...]:
    """Suites the base accepts whose head rejection rests on an assumed value (no finding blocks there)."""
    return tuple(suite for suite, result in head.items() if result.rejection_assumes
                 and result.outcome.outcome == "rejected" and _outcome(base, suite).outcome == "accepted")


def _outcome(results: Mapping[str, SuiteResult], suite_id: str) -> Outcome:
    result = results.get(suite_id)
    return result.outcome if result is not None else NOT_VALIDATED


def group_errors(failures: Sequence[BaseFailure]) -> tuple[ErrorGroup, ...]:
    """Failures grouped by exception and line (by message when no line is known), most common first."""
    groups: dict[tuple[Any, ...], list[Outcome]] = {}
    for failure in failures:
        outcome = failure.outcome
        place = (outcome.path, outcome.line) if outcome.path is not None else (None, outcome.message)
        groups.setdefault((outcome.outcome, outcome.exception, *place), []).append(outcome)
    ranked = sorted(groups.values(), key=len, reverse=True)  # stable: ties keep the suites' order
    return tuple(ErrorGroup(members[0], len(members)) for members in ranked)


def _percent(share: float) -> str:
    return f"{share * 100:.1f}%".replace(".0%", "%")


def _blindness(health: Health, *, unexercised: bool) -> str | None:
    """Why the analysis could not see, or None when it could."""
    if not health.suites:
        return "no CI suite was captured, so nothing could be replayed"
    if health.suspect_base:
        return (f"the base revision fails every one of the {health.suites} CI suites with the same error "
                f"({describe(health.errors[0].example)}), which the head \"fixes\": the same error at "
                "every suite is the harness's environment, not the repository's, so the head's acceptance "
                "says nothing about CI")
    if health.failure_share > health.max_base_failures:
        failing = health.base_rejected + health.base_errors - health.fixed_at_head
        common = f"; most common base error: {describe(health.errors[0].example)}" if health.errors else ""
        fixed = f" (and {health.fixed_at_head} the head accepts)" if health.fixed_at_head else ""
        return (f"the base revision rejects or errors on {failing} of {health.suites} CI suites{fixed} "
                f"({_percent(health.failure_share)}, more than the policy's "
                f"{_percent(health.max_base_failures)}), yet CI runs them: the harness does not see this "
                f"repository's validation as CI does{common}")
    if unexercised:
        return ("the changed validation lines ran for no suite: every suite was rejected or errored at "
                "the head before reaching them, so the change was never exercised")
    return None


def _seen(health: Health) -> str:
    return (f"the base revision accepts {health.base_accepted} of {health.suites} CI suites "
            f"({_percent(health.accepted_share)})")


def assumed_line(health: Health) -> str:
    """'assumed 3 options a stubbed or replaced upstream parser may define (…): sglang_dp_size=1, …'."""
    count = len(health.assumed)
    names = ", ".join(each.describe() for each in health.assumed)
    rejections = len(health.assumed_rejections)
    rest = "1 head rejection rests" if rejections == 1 else f"{rejections} head rejections rest"
    resting = f"; {rest} on them: not blocking, the harness is blind there" if rejections else ""
    return (f"assumed {count} option{'' if count == 1 else 's'} a stubbed or replaced upstream parser may "
            f"define (no parser here does; neutral by name): {names}{resting}")


def not_considered_line(health: Health, listed: int = 5) -> str:
    """'not considered: 12 cases CI may run, which the policy leaves out: a (scope x), … and 7 more'."""
    count = len(health.not_considered)
    names = ", ".join(health.not_considered[:listed])
    more = f" and {count - listed} more" if count > listed else ""
    cases = "1 case" if count == 1 else f"{count} cases"
    return f"not considered: {cases} CI may run, which the policy leaves out (never replayed): {names}{more}"


def notes(health: Health) -> list[str]:
    """The lines under the health line: what the harness assumed, what the policy leaves out."""
    return [*([assumed_line(health)] if health.assumed else []),
            *([not_considered_line(health)] if health.not_considered else [])]


def summary_line(health: Health) -> str:
    """'59 suites from 46 of 75 scripts (13 disabled, …); base accepts 57/59 (96.6%), rejects 2, errors 0'."""
    counts = [(len(health.disabled), "disabled"), (len(health.no_entry), "launch no entry"),
              (len(health.failed), "failed"), (len(health.partial), "partial"),
              (len(health.not_considered), "not considered")]
    kinds = ", ".join(f"{count} {word}" for count, word in counts if count)
    total = health.scripts + len(health.disabled) + len(health.not_considered)
    kinds = f" ({kinds})" if kinds else ""
    return (f"{health.suites} suites from {health.captured} of {total} scripts{kinds}"
            f"; base accepts {health.base_accepted}/{health.suites} ({_percent(health.accepted_share)}), "
            f"rejects {health.base_rejected}, errors {health.base_errors}")
