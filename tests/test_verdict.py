"""verdict(): every rule, on hand-built results of two revisions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
import yaml

from app.analysis.core.model import (
    CaptureFailure,
    Event,
    Finding,
    LearnedAttribute,
    Matrix,
    Outcome,
    Suite,
    SuiteResult,
)
from app.analysis.core.policy import Policy, parse_policy
from app.analysis.verdict.diff import TreeDiff, diff_trees
from app.analysis.verdict.verdict import verdict

ARGS = "pkg/arguments.py"
BASE_SOURCE = "".join(f"line {n}\n" for n in range(1, 21))
# head: two lines inserted after base line 5, so base lines 6.. are head lines 8..; base line 10 changed
HEAD_LINES = [f"line {n}" for n in range(1, 21)]
HEAD_LINES[9] = "line 10 changed"
HEAD_LINES[5:5] = ["new a", "new b"]
HEAD_SOURCE = "\n".join(HEAD_LINES) + "\n"
DIFF = diff_trees({ARGS: BASE_SOURCE}, {ARGS: HEAD_SOURCE})
NO_DIFF = TreeDiff()

ACCEPTED = Outcome("accepted")


def make_policy(**overrides: Any) -> Policy:
    validation = {"paths": ["pkg/arguments.py"], "entry": "pkg.arguments:parse_args",
                  **overrides.pop("validation", {})}
    raw = {"validation": validation, "matrix": {"sources": [{"kind": "static", "suites": []}]}, **overrides}
    return parse_policy(yaml.safe_dump(raw), "test-policy.yml")


POLICY = make_policy()


def suites(count: int, script: str = "tests/test_a.py") -> list[Suite]:
    return [Suite(id=f"{script}#{i}", script=script, argv=("--x", str(i))) for i in range(count)]


def matrix(*groups: Iterable[Suite], failed: tuple[CaptureFailure, ...] = ()) -> Matrix:
    all_suites = tuple(s for group in groups for s in group)
    return Matrix(suites=all_suites, scripts=len({s.script for s in all_suites}) + len(failed),
                  captured=len({s.script for s in all_suites}), failed=failed)


def rejected(line: int, message: str = "bad combination", exception: str = "AssertionError",
             path: str = ARGS) -> Outcome:
    return Outcome("rejected", exception, message, path, line)


def event(line: int, *, kind: str = "assert", function: str = "validate", text: str = "assert args.a",
          message: str = "a is required", exception: str = "AssertionError", path: str = ARGS) -> Event:
    return Event(kind=kind, path=path, line=line, function=function, text=text,  # type: ignore[arg-type]
                 exception=exception, message=message)


def results(suite_list: Iterable[Suite], outcome: Outcome, **fields: Any) -> dict[str, SuiteResult]:
    return {s.id: SuiteResult(s.id, outcome, **fields) for s in suite_list}


def judge(*args: Any, **kwargs: Any) -> list[Finding]:
    """verdict() with no line traced: the test is about another rule than not_exercised."""
    return verdict(*args, traced={}, **kwargs)


def kinds(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.kind, f.severity) for f in findings]


# --- outcome mode -------------------------------------------------------------------------------------

def test_suites_rejected_at_one_place_make_one_finding() -> None:
    lora, other = suites(3, "tests/test_lora.py"), suites(2, "tests/test_other.py")
    head = results(lora, rejected(6, "colocate needs the backuper")) | results(other, ACCEPTED)
    findings = judge(matrix(lora, other), results(lora + other, ACCEPTED), head, DIFF, POLICY)
    assert len(findings) == 1
    finding = findings[0]
    assert (finding.kind, finding.severity) == ("new_rejection", "blocking")
    assert finding.suites == tuple(s.id for s in lora)
    assert finding.scripts == ("tests/test_lora.py",)
    assert (finding.path, finding.line, finding.in_diff) == (ARGS, 6, True)
    assert finding.message == "AssertionError: colocate needs the backuper"


def test_rejections_at_different_places_are_separate_and_located_in_or_out_of_the_diff() -> None:
    first, second = suites(1, "tests/test_a.py"), suites(1, "tests/test_b.py")
    head = results(first, rejected(6)) | results(second, rejected(15, exception="ValueError"))
    findings = judge(matrix(first, second), results(first + second, ACCEPTED), head, DIFF, POLICY)
    assert [(f.line, f.in_diff, f.message) for f in findings] == [
        (6, True, "AssertionError: bad combination"), (15, False, "ValueError: bad combination")]


def test_a_suite_rejected_at_both_revisions_is_no_new_rejection() -> None:
    group = suites(2)
    findings = judge(matrix(group), results(group, rejected(3)), results(group, rejected(3)), DIFF, POLICY)
    assert findings == []


def test_policy_severity_applies_to_new_rejections() -> None:
    group = suites(1)
    policy = make_policy(severities={"new_rejection": "warning"})
    findings = judge(matrix(group), results(group, ACCEPTED), results(group, rejected(6)), DIFF, policy)
    assert kinds(findings) == [("new_rejection", "warning")]


def test_a_rejection_resting_on_an_assumed_value_is_a_warning_apart_from_the_same_line_s_own() -> None:
    assumed, own = suites(2, "tests/test_sglang.py"), suites(1, "tests/test_plain.py")
    head = results(assumed, rejected(6, "dp"), rejection_assumes=("sglang_dp_size",)) \
        | results(own, rejected(6, "dp"))
    findings = judge(matrix(assumed, own), results(assumed + own, ACCEPTED), head, DIFF, POLICY)
    assert [(f.severity, f.suites, f.message) for f in findings] == [
        ("blocking", tuple(s.id for s in own), "AssertionError: dp"),
        ("warning", tuple(s.id for s in assumed),
         "AssertionError: dp (rests on the value the harness assumed for args.sglang_dp_size, which a "
         "stubbed or replaced upstream parser may define: the harness's blindness, not blocking)")]
    # what the harness sends survives the protocol's JSON
    [result] = results(assumed[:1], rejected(6), rejection_assumes=("sglang_dp_size",)).values()
    assert SuiteResult.from_json(result.to_json()) == result


def test_fixed_suites_are_info() -> None:
    group = suites(2)
    findings = judge(matrix(group), results(group, rejected(3, "old check")), results(group, ACCEPTED),
                       DIFF, POLICY)
    assert kinds(findings) == [("fixed", "info")]
    assert findings[0].suites == tuple(s.id for s in group)
    assert "AssertionError: old check" in findings[0].message


def test_a_head_error_on_an_accepted_suite_is_a_new_error_with_its_reason() -> None:
    group = suites(2)
    head = results(group, Outcome("error", message="timed out after 60 s"))
    findings = judge(matrix(group), results(group, ACCEPTED), head, DIFF, POLICY)
    assert kinds(findings) == [("new_error", "blocking")]
    assert "timed out after 60 s" in findings[0].message


def test_new_error_severity_comes_from_the_policy() -> None:
    group = suites(1)
    policy = make_policy(severities={"new_error": "warning"})
    head = results(group, Outcome("error", "MemoryError", "killed"))
    findings = judge(matrix(group), results(group, ACCEPTED), head, DIFF, policy)
    assert kinds(findings) == [("new_error", "warning")]


def test_errors_at_both_revisions_are_not_findings() -> None:
    group = suites(2)
    crashed = Outcome("error", message="harness died")
    noisy = (event(3),)
    assert judge(matrix(group), results(group, crashed), results(group, crashed, events=noisy),
                   DIFF, POLICY) == []


# --- every pair of outcomes ---------------------------------------------------------------------------
# What each (base, head) pair of outcomes gives, alone: a suite the base did not run to an end (error) is
# one the base says nothing about, so no head outcome makes it new, fixed or newly broken (README, "Finding
# kinds"; the health check counts it against what the analysis could see).

HEAD_REJECTS = rejected(6, "no colocate")
BASE_REJECTS = rejected(3, "old check", "ValueError")
HEAD_ERRS = Outcome("error", "TimeoutError", "timed out after 60 s", ARGS, 7)
BASE_ERRS = Outcome("error", "MemoryError", "killed", ARGS, 3)
OUTCOMES = {"accepted": (ACCEPTED, ACCEPTED), "rejected": (BASE_REJECTS, HEAD_REJECTS),
            "error": (BASE_ERRS, HEAD_ERRS)}
PAIRS: list[tuple[str, str, list[tuple[str, str, int | None, str]]]] = [
    ("accepted", "accepted", []),
    ("accepted", "rejected", [("new_rejection", "blocking", 6, "AssertionError: no colocate")]),
    ("accepted", "error", [("new_error", "blocking", 7, "accepted at base, but validation at head did not "
                                                         "finish: TimeoutError: timed out after 60 s")]),
    ("rejected", "accepted", [("fixed", "info", None,
                               f"accepted at head; base rejected it at {ARGS}:3: ValueError: old check")]),
    ("rejected", "rejected", []),
    ("rejected", "error", []),
    ("error", "accepted", []),
    ("error", "rejected", []),
    ("error", "error", []),
]


@pytest.mark.parametrize(("at_base", "at_head", "expected"), PAIRS, ids=[f"{b}-{h}" for b, h, _ in PAIRS])
def test_each_pair_of_outcomes_gives_its_finding(at_base: str, at_head: str,
                                                 expected: list[tuple[str, str, int | None, str]]) -> None:
    group = suites(2)
    base = results(group, OUTCOMES[at_base][0])
    head = results(group, OUTCOMES[at_head][1])
    findings = judge(matrix(group), base, head, DIFF, POLICY)
    assert [(f.kind, f.severity, f.line, f.message) for f in findings] == expected
    assert all(f.suites == tuple(s.id for s in group) for f in findings)


def test_every_pair_of_outcomes_is_in_the_table() -> None:
    assert {(b, h) for b, h, _ in PAIRS} == {(b, h) for b in OUTCOMES for h in OUTCOMES}


@pytest.mark.parametrize(("at_base", "at_head"), [(b, h) for b, h, _ in PAIRS if "error" in (b, h)])
def test_a_revision_that_errors_is_judged_by_its_outcome_alone(at_base: str, at_head: str) -> None:
    # everything the other rules would report, were both revisions run to an end: a flag gone, a flag newly
    # tolerated, a new read of an undefined attribute, a new record-mode event
    group = suites(1)
    base = results(group, OUTCOMES[at_base][0], known_flags=("--colocate",))
    head = results(group, OUTCOMES[at_head][1], tolerated_flags=("--colocate", "--sglang-x"),
                   learned=(LearnedAttribute("offload_train", ARGS, 7),),
                   events=(event(6, message="no colocate"),))
    findings = judge(matrix(group), base, head, DIFF, POLICY)
    expected = next(e for b, h, e in PAIRS if (b, h) == (at_base, at_head))
    assert [f.kind for f in findings] == [kind for kind, *_ in expected]


def test_outcomes_of_different_suites_are_judged_each_on_its_own() -> None:
    # one suite per pair, in one verdict: each gives its own finding and none leaks into another's
    groups = {(b, h): suites(1, f"tests/test_{b}_{h}.py") for b, h, _ in PAIRS}
    base = {k: v for (b, _), group in groups.items() for k, v in results(group, OUTCOMES[b][0]).items()}
    head = {k: v for (_, h), group in groups.items() for k, v in results(group, OUTCOMES[h][1]).items()}
    findings = judge(matrix(*groups.values()), base, head, DIFF, POLICY)
    assert sorted((f.kind, f.scripts) for f in findings) == [
        ("fixed", ("tests/test_rejected_accepted.py",)), ("new_error", ("tests/test_accepted_error.py",)),
        ("new_rejection", ("tests/test_accepted_rejected.py",))]


def test_a_suite_one_revision_has_no_result_for_is_not_judged() -> None:
    ran, missing = suites(1, "tests/test_a.py"), suites(1, "tests/test_b.py")
    base = results(ran + missing, ACCEPTED)
    findings = judge(matrix(ran, missing), base, results(ran, rejected(6)), DIFF, POLICY)
    assert [(f.kind, f.suites) for f in findings] == [("new_rejection", (ran[0].id,))]
    assert judge(matrix(ran, missing), results(ran, ACCEPTED), results(ran + missing, rejected(6)), DIFF,
                 POLICY)[0].suites == (ran[0].id,)


@pytest.mark.parametrize(("exception", "message", "reason"), [
    ("MemoryError", "killed", "MemoryError: killed"), ("MemoryError", None, "MemoryError"),
    (None, "timed out after 60 s", "timed out after 60 s"), (None, None, "no reason given")])
def test_a_reason_says_what_is_known(exception: str | None, message: str | None, reason: str) -> None:
    group = suites(1)
    head = results(group, Outcome("error", exception, message))
    [finding] = judge(matrix(group), results(group, ACCEPTED), head, DIFF, POLICY)
    assert finding.message == f"accepted at base, but validation at head did not finish: {reason}"


def test_a_message_is_clipped_at_1000_characters() -> None:
    group = suites(1)
    prefix = "AssertionError: "

    def message_of(length: int) -> str:
        head = results(group, rejected(6, "x" * (length - len(prefix))))
        return judge(matrix(group), results(group, ACCEPTED), head, DIFF, POLICY)[0].message

    assert message_of(1000) == prefix + "x" * (1000 - len(prefix))
    assert message_of(1001) == prefix + "x" * (999 - len(prefix)) + "…"


# --- record mode --------------------------------------------------------------------------------------
# Events are compared for suites both revisions reject (harness noise stops both early); the harness runs
# record mode only for suites it did not accept.

NOISE = rejected(1, "missing file", exception="FileNotFoundError")

def test_a_new_assert_is_found_even_when_both_revisions_fail_early() -> None:
    group = suites(2)
    base = results(group, NOISE, events=(event(3),))
    head = results(group, NOISE, events=(event(3), event(6, text="assert not args.colocate",
                                                         message="no colocate")))
    findings = judge(matrix(group), base, head, DIFF, POLICY)
    assert kinds(findings) == [("new_rejection", "blocking")]
    assert (findings[0].line, findings[0].in_diff) == (6, True)
    assert findings[0].message.startswith("AssertionError: no colocate")
    assert "assert not args.colocate" in findings[0].message


def test_events_at_shifted_lines_match_their_base_event() -> None:
    group = suites(1)
    # base line 12 is head line 14 (two lines inserted above); the message differs, the place does not
    base = results(group, NOISE, events=(event(12, message="value 1"),))
    head = results(group, NOISE, events=(event(14, message="value 2"),))
    assert judge(matrix(group), base, head, DIFF, POLICY) == []


def test_an_event_at_a_shifted_line_of_another_kind_is_new() -> None:
    group = suites(1)
    base = results(group, NOISE, events=(event(12, message="value 1"),))
    head = results(group, NOISE, events=(event(14, kind="raise", exception="ValueError",
                                               text="raise ValueError(x)", message="x"),))
    assert kinds(judge(matrix(group), base, head, DIFF, POLICY)) == [("new_rejection", "blocking")]


def test_an_event_on_a_changed_line_matches_by_function_text_and_message() -> None:
    group = suites(1)
    # head line 12 (base line 10) was edited: no line mapping, but the same statement failed the same way
    base = results(group, NOISE, events=(event(10, text="assert args.a", message="a is required"),))
    head = results(group, NOISE, events=(event(12, text="assert args.a", message="a is required"),))
    assert DIFF.to_base(ARGS, 12) is None
    assert judge(matrix(group), base, head, DIFF, POLICY) == []


def test_a_duplicated_helper_call_is_not_a_new_event() -> None:
    group = suites(1)
    # the PR copied an existing check into the two new lines 6-7: the copy fails exactly like the original
    original = event(3, function="validate", text="assert_positive(args.lr)", message="lr must be > 0")
    copy = event(7, function="validate", text="assert_positive(args.lr)", message="lr must be > 0")
    base = results(group, NOISE, events=(original,))
    head = results(group, NOISE, events=(original, copy))
    assert DIFF.in_diff(ARGS, 7)
    assert judge(matrix(group), base, head, DIFF, POLICY) == []


def test_the_same_text_with_another_message_is_new() -> None:
    group = suites(1)
    base = results(group, NOISE, events=(event(3, message="lr must be > 0"),))
    head = results(group, NOISE, events=(event(3, message="lr must be > 0"),
                                          event(7, message="lr must be < 1")))
    assert [f.line for f in judge(matrix(group), base, head, DIFF, POLICY)] == [7]


def test_a_new_error_event_blocks_only_in_the_diff() -> None:
    group = suites(1)
    errors = (event(6, kind="error", exception="TypeError", text="x = args.a + 1", message="bad operand"),
              event(16, kind="error", exception="KeyError", text="d[k]", message="'k'"))
    findings = judge(matrix(group), results(group, NOISE), results(group, NOISE, events=errors),
                     DIFF, POLICY)
    assert [(f.line, f.severity, f.in_diff) for f in findings] == [(6, "blocking", True),
                                                                   (16, "warning", False)]


def test_suites_with_the_same_new_event_are_grouped() -> None:
    first, second = suites(2, "tests/test_a.py"), suites(1, "tests/test_b.py")
    head = results(first + second, NOISE, events=(event(6, message="m"),))
    findings = judge(matrix(first, second), results(first + second, NOISE), head, DIFF, POLICY)
    assert len(findings) == 1
    assert findings[0].suites == tuple(s.id for s in first + second)
    assert findings[0].scripts == ("tests/test_a.py", "tests/test_b.py")


def test_a_suite_reported_by_outcome_is_not_reported_again_from_its_event() -> None:
    first, second = suites(1, "tests/test_a.py"), suites(1, "tests/test_b.py")
    new_assert = event(6, text="assert not args.colocate", message="no colocate")
    base = results(first + second, ACCEPTED) | results(second, rejected(1, "noise", "OSError"))
    # first: newly rejected at line 6 (outcome); second: failed early at both, the same assert recorded
    head = results(first, rejected(6, "no colocate"), events=(new_assert,)) \
        | results(second, rejected(1, "noise", "OSError"), events=(new_assert,))
    findings = judge(matrix(first, second), base, head, DIFF, POLICY)
    by_origin = sorted((f.suites, "record mode" in f.message) for f in findings)
    assert by_origin == [((first[0].id,), False), ((second[0].id,), True)]


def test_events_of_a_suite_either_revision_accepts_are_not_compared() -> None:
    accepted, fixed = suites(1, "tests/test_a.py"), suites(1, "tests/test_b.py")
    caught = (event(6, kind="error", exception="KeyError", text="d[k]", message="'k'"),)
    # an accepted run's events are exceptions the repository caught itself: no rejection
    base = results(accepted, ACCEPTED) | results(fixed, rejected(3, "old check"))
    head = results(accepted + fixed, ACCEPTED, events=caught)
    findings = judge(matrix(accepted, fixed), base, head, DIFF, POLICY)
    assert [(f.kind, f.suites) for f in findings] == [("fixed", (fixed[0].id,))]


def test_a_new_rejection_by_outcome_is_not_judged_again_by_its_events() -> None:
    group = suites(1)
    # base accepts, head rejects at line 6 and record mode also trips line 7: the outcome finding covers it
    head = results(group, rejected(6, "no colocate"), events=(event(6, message="no colocate"),
                                                              event(7, message="lr must be < 1")))
    findings = judge(matrix(group), results(group, ACCEPTED), head, DIFF, POLICY)
    assert [(f.kind, f.line, "record mode" in f.message) for f in findings] == [("new_rejection", 6, False)]


def test_a_record_mode_statement_is_quoted_up_to_120_characters() -> None:
    group = suites(1)

    def quoted(text: str) -> str:
        head = results(group, NOISE, events=(event(6, text=text),))
        message = judge(matrix(group), results(group, NOISE), head, DIFF, POLICY)[0].message
        return message.split("at `", 1)[1].removesuffix("`)")

    assert quoted("a" * 120) == "a" * 120
    assert quoted("a" * 121) == "a" * 119 + "…"


def test_a_new_assert_or_raise_blocks_outside_the_diff_too() -> None:
    group = suites(1)
    head = results(group, NOISE, events=(event(16, kind="raise", exception="ValueError", text="raise X"),))
    findings = judge(matrix(group), results(group, NOISE), head, DIFF, POLICY)
    assert [(f.severity, f.in_diff) for f in findings] == [("blocking", False)]


# --- learned attributes -------------------------------------------------------------------------------

def test_a_new_read_of_an_undefined_attribute_in_the_diff_is_a_rejection() -> None:
    group = suites(2)
    head = results(group, ACCEPTED, learned=(LearnedAttribute("offload_train", ARGS, 7),
                                             LearnedAttribute("seq_length", ARGS, 15),
                                             LearnedAttribute("old_attr", ARGS, 6)))
    base = results(group, ACCEPTED, learned=(LearnedAttribute("old_attr", ARGS, 4),))
    findings = judge(matrix(group), base, head, DIFF, POLICY)
    assert [(f.kind, f.line, f.in_diff) for f in findings] == [("new_rejection", 7, True)]
    assert findings[0].message == "reads args.offload_train, which no parser defines"
    assert len(findings[0].suites) == 2


def test_a_read_an_upstream_parser_stood_in_for_may_define_is_no_finding() -> None:
    # radixark/miles, July 2026: head code read Megatron's optimizer_cpu_offload, which the replaced
    # Megatron parser does not define; it blocked. Every parser that could define it must have run for real.
    group = suites(2)
    stood_in = LearnedAttribute("optimizer_cpu_offload", ARGS, 7, upstream=True)
    head = results(group, ACCEPTED, learned=(stood_in,))
    assert judge(matrix(group), results(group, ACCEPTED), head, DIFF, POLICY) == []
    own = results(group, ACCEPTED, learned=(LearnedAttribute("optimizer_cpu_offload", ARGS, 7),))
    [finding] = judge(matrix(group), results(group, ACCEPTED), own, DIFF, POLICY)
    assert (finding.kind, finding.severity) == ("new_rejection", "blocking")


# --- flags --------------------------------------------------------------------------------------------

def test_a_flag_defined_at_base_and_tolerated_at_head_is_removed() -> None:
    users, others = suites(2, "tests/test_a.py"), suites(1, "tests/test_b.py")
    base = results(users, ACCEPTED, known_flags=("--colocate", "--lr")) | results(others, ACCEPTED)
    head = results(users, ACCEPTED, known_flags=("--lr",), tolerated_flags=("--colocate",)) \
        | results(others, ACCEPTED)
    findings = judge(matrix(users, others), base, head, DIFF, POLICY)
    assert kinds(findings) == [("removed_flag", "blocking")]
    removed = findings[0]
    assert removed.suites == tuple(s.id for s in users)
    assert (removed.path, removed.line) == (None, None)
    assert "--colocate" in removed.message


def test_argparse_rejecting_a_removed_flag_is_reported_once_as_removed() -> None:
    group = suites(2)
    base = results(group, ACCEPTED, known_flags=("--colocate", "--lr"))
    gone = Outcome("rejected", "SystemExit", "error: unrecognized arguments: --colocate=1", ARGS, 2)
    findings = judge(matrix(group), base, results(group, gone), DIFF, POLICY)
    assert kinds(findings) == [("removed_flag", "blocking")]
    assert "--colocate" in findings[0].message


def test_a_removed_flag_given_a_separate_value_explains_the_rejection() -> None:
    group = suites(1)
    base = results(group, ACCEPTED, known_flags=("--colocate",))
    gone = Outcome("rejected", "SystemExit", "error: unrecognized arguments: --colocate 1", ARGS, 2)
    assert kinds(judge(matrix(group), base, results(group, gone), DIFF, POLICY)) == [("removed_flag",
                                                                                      "blocking")]


def test_a_removed_flag_is_a_warning_when_unknown_flags_are_ignored() -> None:
    group = suites(1)
    policy = make_policy(validation={"unknown_flags": "ignore"})
    base = results(group, ACCEPTED, known_flags=("--colocate",))
    head = results(group, ACCEPTED, tolerated_flags=("--colocate",))
    assert kinds(judge(matrix(group), base, head, DIFF, policy)) == [("removed_flag", "warning")]


def test_a_flag_another_head_parser_still_defines_is_not_removed() -> None:
    # slime: `--sglang-config` is defined by its own SGLang parser (parse_known_args) at both revisions and
    # tolerated at both by the stand-in for Megatron's parser, which is fed every word.
    group = suites(1)
    both = {"known_flags": ("--sglang-config",), "tolerated_flags": ("--sglang-config",)}
    findings = judge(matrix(group), results(group, ACCEPTED, **both), results(group, ACCEPTED, **both), DIFF,
                     POLICY)
    assert kinds(findings) == []


def test_one_removed_flag_finding_per_flag() -> None:
    group = suites(1)
    base = results(group, ACCEPTED, known_flags=("--a", "--b"))
    head = results(group, ACCEPTED, tolerated_flags=("--a", "--b"))
    findings = judge(matrix(group), base, head, DIFF, POLICY)
    assert sorted(f.message.split()[0] for f in findings) == ["--a", "--b"]


def test_a_flag_tolerated_only_at_head_is_info() -> None:
    group = suites(1)
    base = results(group, ACCEPTED, tolerated_flags=("--tp",))
    head = results(group, ACCEPTED, tolerated_flags=("--tp", "--sglang-x"))
    findings = judge(matrix(group), base, head, DIFF, POLICY)
    assert kinds(findings) == [("newly_tolerated_flag", "info")]
    assert "--sglang-x" in findings[0].message


def test_a_rejection_for_a_removed_flag_and_another_flag_is_also_a_new_rejection() -> None:
    # --colocate is gone; --sglang-x never was a repository flag (set generically at base): the head's
    # rejection is not explained by the removed flag alone
    group = suites(1)
    base = results(group, ACCEPTED, known_flags=("--colocate",), tolerated_flags=("--sglang-x",))
    both = Outcome("rejected", "SystemExit", "error: unrecognized arguments: --colocate --sglang-x=1", ARGS,
                   2)
    findings = judge(matrix(group), base, results(group, both), DIFF, POLICY)
    assert [(f.kind, f.message.split()[0]) for f in findings] == [("removed_flag", "--colocate"),
                                                                  ("new_rejection", "SystemExit:")]


def test_a_suite_rejected_elsewhere_while_tolerating_a_removed_flag_is_also_a_new_rejection() -> None:
    group = suites(1)
    base = results(group, ACCEPTED, known_flags=("--colocate",))
    head = results(group, rejected(6, "no colocate"), tolerated_flags=("--colocate",))
    findings = judge(matrix(group), base, head, DIFF, POLICY)
    assert [(f.kind, f.line) for f in findings] == [("removed_flag", None), ("new_rejection", 6)]


def test_a_removed_flag_explains_only_the_suites_it_rejects() -> None:
    gone, other = suites(1, "tests/test_a.py"), suites(1, "tests/test_b.py")
    base = results(gone + other, ACCEPTED, known_flags=("--colocate",))
    head = results(gone, Outcome("rejected", "SystemExit", "error: unrecognized arguments: --colocate", ARGS,
                                 2)) | results(other, rejected(6), known_flags=("--colocate",))
    findings = judge(matrix(gone, other), base, head, DIFF, POLICY)
    assert [(f.kind, f.suites) for f in findings] == [("removed_flag", (gone[0].id,)),
                                                      ("new_rejection", (other[0].id,))]


def test_a_rejection_naming_no_option_is_not_explained_by_a_removed_flag() -> None:
    group = suites(1)
    base = results(group, ACCEPTED, known_flags=("--colocate",))
    words = Outcome("rejected", "SystemExit", "error: unrecognized arguments: colocate", ARGS, 2)
    head = results(group, words, tolerated_flags=("--colocate",))
    assert [f.kind for f in judge(matrix(group), base, head, DIFF, POLICY)] == ["removed_flag",
                                                                                "new_rejection"]


def test_removed_flag_messages_count_the_suites_that_pass_it() -> None:
    one, two = suites(1, "tests/test_a.py"), suites(2, "tests/test_b.py")
    base = results(one, ACCEPTED, known_flags=("--a",)) | results(two, ACCEPTED, known_flags=("--b",))
    head = results(one, ACCEPTED, tolerated_flags=("--a",)) | results(two, ACCEPTED, tolerated_flags=("--b",))
    messages = sorted(f.message for f in judge(matrix(one, two), base, head, DIFF, POLICY))
    assert messages == ["--a is defined at base but not at head, and 1 CI suite still passes it: the head "
                        "rejects it",
                        "--b is defined at base but not at head, and 2 CI suites still pass it: the head "
                        "rejects it"]
    policy = make_policy(validation={"unknown_flags": "ignore"})
    assert judge(matrix(one), base, head, DIFF, policy)[0].message.endswith(
        ": unknown flags are ignored: it silently does nothing")


def test_a_flag_removed_at_head_is_not_also_newly_tolerated() -> None:
    group = suites(1)
    base = results(group, ACCEPTED, known_flags=("--colocate",))
    head = results(group, ACCEPTED, tolerated_flags=("--colocate",))
    assert kinds(judge(matrix(group), base, head, DIFF, POLICY)) == [("removed_flag", "blocking")]


# --- capture and coverage -----------------------------------------------------------------------------

def test_each_failed_capture_script_is_a_warning() -> None:
    group = suites(1)
    failures = (CaptureFailure("tests/test_x.py", "timed out"), CaptureFailure("tests/test_y.py", "boom"))
    findings = verdict(matrix(group, failed=failures), results(group, ACCEPTED), results(group, ACCEPTED),
                       NO_DIFF, POLICY)
    assert [(f.kind, f.severity, f.scripts) for f in findings] == [
        ("capture_failed", "warning", ("tests/test_x.py",)),
        ("capture_failed", "warning", ("tests/test_y.py",))]
    assert "timed out" in findings[0].message


def test_changed_lines_no_suite_ran_are_not_exercised() -> None:
    first, second = suites(1, "tests/test_a.py"), suites(1, "tests/test_b.py")
    head = results(first, ACCEPTED, lines_hit={ARGS: (6,)}) \
        | results(second, ACCEPTED, lines_hit={ARGS: (12,)})
    findings = verdict(matrix(first, second), results(first + second, ACCEPTED), head, DIFF, POLICY)
    assert kinds(findings) == [("not_exercised", "info")]
    assert findings[0].message == f"line 7 of {ARGS} changed; no CI suite reaches it"
    assert (findings[0].path, findings[0].line) == (ARGS, 7)


def test_not_exercised_lists_ranges_and_skips_files_outside_validation_paths() -> None:
    group = suites(1)
    diff = diff_trees({ARGS: BASE_SOURCE, "README.md": "a\n"}, {ARGS: HEAD_SOURCE, "README.md": "b\n"})
    findings = verdict(matrix(group), results(group, ACCEPTED), results(group, ACCEPTED), diff, POLICY)
    assert [f.message for f in findings] == [f"lines 6-7, 12 of {ARGS} changed; no CI suite reaches them"]


def test_traced_lines_limit_what_can_be_unexercised() -> None:
    group = suites(1)
    findings = verdict(matrix(group), results(group, ACCEPTED), results(group, ACCEPTED), DIFF, POLICY,
                       traced={ARGS: [12]})
    assert [f.line for f in findings] == [12]


def test_a_line_a_blocking_finding_points_at_is_not_also_unexercised() -> None:
    group = suites(1)
    # head errors elsewhere, so line 6 never ran, but the finding at line 6 already speaks for it
    head = results(group, rejected(6))
    findings = verdict(matrix(group), results(group, ACCEPTED), head, DIFF, POLICY, traced={ARGS: [6, 7]})
    assert [(f.kind, f.line) for f in findings] == [("new_rejection", 6), ("not_exercised", 7)]


def test_no_unexercised_lines_when_nothing_ran_at_head() -> None:
    group = suites(1)
    head = results(group, Outcome("error", message="unloadable"))
    findings = verdict(matrix(group), results(group, ACCEPTED), head, DIFF, POLICY)
    assert kinds(findings) == [("new_error", "blocking")]


def test_lines_every_traced_line_of_which_ran_are_exercised() -> None:
    group = suites(1)
    head = results(group, ACCEPTED, lines_hit={ARGS: (6, 7)})
    assert verdict(matrix(group), results(group, ACCEPTED), head, DIFF, POLICY, traced={ARGS: [6, 7]}) == []


def test_not_exercised_points_at_the_first_line_in_the_diff() -> None:
    group = suites(1)
    findings = verdict(matrix(group), results(group, ACCEPTED), results(group, ACCEPTED), DIFF, POLICY,
                       traced={ARGS: [12, 1, 2, 3, 5, 9, 10]})
    assert [(f.path, f.line, f.in_diff, f.message) for f in findings] == [
        (ARGS, 1, True, f"lines 1-3, 5, 9-10, 12 of {ARGS} changed; no CI suite reaches them")]


def test_a_line_only_a_warning_points_at_is_still_unexercised() -> None:
    group = suites(1)
    policy = make_policy(severities={"new_rejection": "warning"})
    findings = verdict(matrix(group), results(group, ACCEPTED), results(group, rejected(6)), DIFF, policy,
                       traced={ARGS: [6]})
    assert [(f.kind, f.line) for f in findings] == [("new_rejection", 6), ("not_exercised", 6)]


# --- order --------------------------------------------------------------------------------------------

def test_findings_are_ordered_by_severity_path_line_and_kind() -> None:
    a, b, c, d = (suites(1, f"tests/test_{n}.py") for n in "abcd")
    base = results(a + b + c, ACCEPTED) | results(d, rejected(2), known_flags=("--gone",))
    head = results(a, rejected(15)) | results(b, rejected(6)) | results(c, Outcome("error", message="hung")) \
        | results(d, ACCEPTED, tolerated_flags=("--gone",))
    findings = verdict(matrix(a, b, c, d, failed=(CaptureFailure("tests/test_z.py", "x"),)), base, head,
                       DIFF, POLICY, traced={})
    assert [(f.severity, f.kind, f.line) for f in findings] == [
        ("blocking", "new_error", None), ("blocking", "removed_flag", None), ("blocking", "new_rejection", 6),
        ("blocking", "new_rejection", 15), ("warning", "capture_failed", None), ("info", "fixed", None)]
    assert findings == verdict(matrix(a, b, c, d, failed=(CaptureFailure("tests/test_z.py", "x"),)), base,
                               head, DIFF, POLICY, traced={})


def test_in_one_file_a_finding_without_a_line_comes_first() -> None:
    # the two kinds sort the other way round: the line decides
    errs, rejects = suites(1, "tests/test_a.py"), suites(1, "tests/test_b.py")
    head = results(errs, Outcome("error", "TimeoutError", "hung", ARGS, 1)) \
        | results(rejects, Outcome("rejected", "AssertionError", "no line", ARGS, None))
    findings = judge(matrix(errs, rejects), results(errs + rejects, ACCEPTED), head, DIFF, POLICY)
    assert [(f.kind, f.line) for f in findings] == [("new_rejection", None), ("new_error", 1)]


def test_a_finding_without_a_file_comes_before_those_with_one() -> None:
    flagged, rejects = suites(1, "tests/test_a.py"), suites(1, "tests/test_b.py")
    base = results(flagged, ACCEPTED, known_flags=("--gone",)) | results(rejects, ACCEPTED)
    head = results(flagged, ACCEPTED, tolerated_flags=("--gone",)) \
        | results(rejects, rejected(1, path="lib/args.py"))
    findings = judge(matrix(flagged, rejects), base, head, DIFF, POLICY)
    assert [(f.kind, f.path) for f in findings] == [("removed_flag", None), ("new_rejection", "lib/args.py")]
