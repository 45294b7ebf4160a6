"""assess(): the analysis' own health, on hand-built matrices and results of both revisions."""

from __future__ import annotations

import json

import pytest

from app.analysis.core.model import CaptureFailure, LearnedAttribute, Matrix, Outcome, Suite, SuiteResult
from app.analysis.core.policy import PolicyError, parse_policy
from app.analysis.verdict.health import assess, assumed_line, describe, summary_line, where

ARGS = "pkg/arguments.py"
ACCEPTED = Outcome("accepted")
NO_FILE = Outcome("rejected", "FileNotFoundError", "[Errno 2] No such file: '/root/models/a/gen.json'",
                  ARGS, 7)
NO_FILE_B = Outcome("rejected", "FileNotFoundError", "[Errno 2] No such file: '/root/models/b/gen.json'",
                    ARGS, 7)
STUB = Outcome("error", "TypeError", "'_Stub' object is not iterable", None, None)


def matrix(count: int, **kinds: tuple[CaptureFailure, ...]) -> Matrix:
    suites = tuple(Suite(id=f"tests/test_{i}.py", script=f"tests/test_{i}.py", argv=("--x",))
                   for i in range(count))
    return Matrix(suites=suites, scripts=count + len(kinds.get("failed", ())), captured=count,
                  disabled=("tests/test_off.py",), **kinds)  # type: ignore[arg-type]


def results(m: Matrix, *outcomes: Outcome, hit: dict[str, tuple[int, ...]] | None = None,
            ) -> dict[str, SuiteResult]:
    """The first suites end with OUTCOMES, the rest are accepted; HIT: lines_hit of every suite."""
    ended = list(outcomes) + [ACCEPTED] * (len(m.suites) - len(outcomes))
    return {s.id: SuiteResult(s.id, o, lines_hit=hit or {}) for s, o in zip(m.suites, ended, strict=True)}


def test_a_base_that_accepts_every_suite_is_healthy() -> None:
    m = matrix(20)
    health = assess(m, results(m), results(m, hit={ARGS: (3,)}), {ARGS: [3]})
    assert health.could_analyse
    assert (health.base_accepted, health.base_rejected, health.base_errors) == (20, 0, 0)
    assert health.accepted_share == 1.0 and health.errors == () and health.base_failures == ()
    assert health.reason == "the base revision accepts 20 of 20 CI suites (100%)"
    assert health.lines_changed and health.lines_reached


def test_base_failures_up_to_the_threshold_are_healthy_beyond_it_could_not_analyse() -> None:
    m = matrix(20)
    two = assess(m, results(m, NO_FILE, STUB), results(m, NO_FILE, STUB), {})
    assert two.could_analyse and (two.base_rejected, two.base_errors) == (1, 1)  # 10%: at the limit
    three = assess(m, results(m, NO_FILE, NO_FILE_B, STUB), {}, {})
    assert not three.could_analyse
    assert "3 of 20 CI suites (15%, more than the policy's 10%)" in three.reason
    assert "most common base error: FileNotFoundError: [Errno 2] No such file: '/root/models/a/gen.json' " \
           f"at {ARGS}:7" in three.reason
    strict = assess(m, results(m, NO_FILE), {}, {}, max_base_failures=0.0)
    assert not strict.could_analyse


def test_base_failures_the_head_accepts_are_the_base_s_own_breakage_not_blindness() -> None:
    m = matrix(10)
    # a revert: its base rejects five suites CI broke on, its head accepts them again
    revert = assess(m, results(m, *[NO_FILE] * 5), results(m), {})
    assert revert.could_analyse and (revert.base_rejected, revert.fixed_at_head) == (5, 5)
    assert revert.failure_share == 0.0
    both = assess(m, results(m, *[NO_FILE] * 5), results(m, NO_FILE, NO_FILE), {})
    assert not both.could_analyse and both.fixed_at_head == 3
    assert "on 2 of 10 CI suites (and 3 the head accepts) (20%" in both.reason
    # one revision alone (doctor): every base failure counts
    assert not assess(m, results(m, *[NO_FILE] * 5), {}, {}).could_analyse


def test_a_base_failing_every_suite_with_one_error_the_head_fixes_is_suspect() -> None:
    # radixark/miles, July 2026: a stubbed sglang broke every suite of the base at one line; the head
    # (an sglang bump) accepted them all, and the base at 0% passed as "the base's own breakage"
    m = matrix(6)
    head = results(m)
    skew = assess(m, results(m, *[NO_FILE] * 6), head, {})
    assert skew.suspect_base and not skew.could_analyse
    assert skew.reason.startswith("the base revision fails every one of the 6 CI suites with the same error "
                                  f"(FileNotFoundError: [Errno 2] No such file: '/root/models/a/gen.json' at "
                                  f"{ARGS}:7), which the head \"fixes\"")
    assert skew.failure_share == 1.0 and skew.to_json()["suspect_base"] is True
    # two different errors, or one suite the base accepts: the base's own breakage, as before
    two_errors = assess(m, results(m, *[NO_FILE] * 5, STUB), head, {})
    assert not two_errors.suspect_base and two_errors.could_analyse
    one_accepted = assess(m, results(m, *[NO_FILE] * 5), head, {})
    assert not one_accepted.suspect_base and one_accepted.could_analyse
    # a suite the head still rejects: nothing was "fixed" everywhere
    partly = assess(m, results(m, *[NO_FILE] * 6), results(m, NO_FILE), {})
    assert not partly.suspect_base


def test_replacement_targets_the_base_lacks_are_listed_once_as_drift() -> None:
    m = matrix(3)
    skipped = "pkg.later:helper: ModuleNotFoundError: No module named 'pkg.later'"
    base = {s.id: SuiteResult(s.id, ACCEPTED, drift=(skipped,)) for s in m.suites}
    health = assess(m, base, {}, {})
    assert health.could_analyse and health.drift == (skipped,)
    assert health.to_json()["drift"] == [skipped]


def test_reads_of_what_a_stubbed_parser_may_define_are_counted_as_blindness() -> None:
    m = matrix(2)
    [first, second] = [s.id for s in m.suites]
    stubbed = LearnedAttribute("sglang_dp_size", ARGS, 9, upstream=True)
    own = LearnedAttribute("typo_size", ARGS, 10)
    base = results(m)
    head = {first: SuiteResult(first, ACCEPTED, learned=(stubbed, own)),
            second: SuiteResult(second, ACCEPTED, learned=(stubbed,))}
    assert assess(m, base, head, {}).stubbed_parser_reads == ("sglang_dp_size",)
    # read at base already: nothing new at head
    base[first] = SuiteResult(first, ACCEPTED, learned=(stubbed,))
    base[second] = SuiteResult(second, ACCEPTED, learned=(stubbed,))
    assert assess(m, base, head, {}).stubbed_parser_reads == ()


def test_assumed_values_are_listed_with_their_suites_at_each_revision() -> None:
    m = matrix(2)
    [first, second] = [s.id for s in m.suites]
    assumed = LearnedAttribute("sglang_data_parallel_size", ARGS, 9, upstream=True, assumed=True, value=1)
    policy_default = LearnedAttribute("sglang_dp_size", ARGS, 10, upstream=True)
    base = {first: SuiteResult(first, ACCEPTED, learned=(assumed, policy_default)),
            second: SuiteResult(second, ACCEPTED, learned=(policy_default,))}
    head = {s.id: SuiteResult(s.id, ACCEPTED, learned=(assumed,)) for s in m.suites}
    health = assess(m, base, head, {})
    assert health.could_analyse
    assert health.to_json()["assumed"] == [
        {"name": "sglang_data_parallel_size", "value": 1, "base_suites": 1, "head_suites": 2}]
    assert assumed_line(health) == ("assumed 1 option a stubbed or replaced upstream parser may define (no "
                                    "parser here does; neutral by name): sglang_data_parallel_size=1")
    assert assess(m, results(m), results(m), {}).assumed == ()


def test_head_rejections_resting_on_an_assumed_value_are_counted_and_said() -> None:
    m = matrix(3)
    [first, second, third] = [s.id for s in m.suites]
    assumed = LearnedAttribute("sglang_data_parallel_size", ARGS, 9, upstream=True, assumed=True, value=1)
    rejected = Outcome("rejected", "AssertionError", "dp", ARGS, 12)
    base = results(m, ACCEPTED, ACCEPTED, rejected)
    head = {first: SuiteResult(first, rejected, learned=(assumed,), rejection_assumes=(assumed.name,)),
            second: SuiteResult(second, rejected, learned=(assumed,)),  # the repository's own
            third: SuiteResult(third, rejected, learned=(assumed,), rejection_assumes=(assumed.name,))}
    health = assess(m, base, head, {})
    assert health.assumed_rejections == (first,)  # the third's base rejects it already: nothing new
    assert health.to_json()["assumed_rejections"] == [first]
    assert assumed_line(health).endswith("sglang_data_parallel_size=1; 1 head rejection rests on them: not "
                                         "blocking, the harness is blind there")


def test_base_errors_are_grouped_by_exception_and_line_most_common_first() -> None:
    m = matrix(5)
    health = assess(m, results(m, STUB, NO_FILE, NO_FILE_B, STUB, NO_FILE), results(m), {})
    first, second = health.errors
    assert (first.example, first.count) == (NO_FILE, 3)  # the first suite's message stands for its group
    assert (second.example, second.count) == (STUB, 2)
    assert describe(first.example) == f"FileNotFoundError: {NO_FILE.message} at {ARGS}:7"
    assert describe(STUB) == "TypeError: '_Stub' object is not iterable"
    assert [f.suite for f in health.base_failures] == [s.id for s in m.suites]
    assert health.accepted_share == 0.0


def test_a_change_no_suite_reaches_because_every_suite_died_before_it_could_not_analyse() -> None:
    m = matrix(4)
    rejected = Outcome("rejected", "AssertionError", "earlier assert", ARGS, 2)
    health = assess(m, results(m), results(m, *[rejected] * 4), {ARGS: [9]})
    assert not health.could_analyse and health.lines_changed and not health.lines_reached
    assert "ran for no suite" in health.reason
    # the same change unreached by suites the head accepts is merely "not exercised": healthy
    assert assess(m, results(m), results(m), {ARGS: [9]}).could_analyse
    # reached by one suite: healthy, even though every suite is rejected
    reached = results(m, *[rejected] * 4)
    reached[m.suites[0].id] = SuiteResult(m.suites[0].id, rejected, lines_hit={ARGS: (9,)})
    assert assess(m, results(m), reached, {ARGS: [9]}).could_analyse


def test_no_suite_captured_could_not_analyse() -> None:
    m = Matrix(suites=(), scripts=3, captured=0, failed=(CaptureFailure("tests/test_a.py", "died"),))
    health = assess(m, {}, {}, {})
    assert not health.could_analyse and "no CI suite was captured" in health.reason


def test_the_summary_counts_scripts_by_kind() -> None:
    kinds = {"failed": (CaptureFailure("tests/test_f.py", "died"),),
             "no_entry": (CaptureFailure("tests/test_p.py", "pytest"),),
             "partial": (CaptureFailure("tests/test_0.py", "failed after"),)}
    m = matrix(4, **kinds)
    health = assess(m, results(m, NO_FILE), {}, {})
    assert summary_line(health) == ("4 suites from 4 of 6 scripts (1 disabled, 1 launch no entry, 1 failed, "
                                    "1 partial); base accepts 3/4 (75%), rejects 1, errors 0")


def test_json_carries_every_figure() -> None:
    m = matrix(2, failed=(CaptureFailure("tests/test_f.py", "died"),))
    document = json.loads(json.dumps(assess(m, results(m, NO_FILE), {}, {}).to_json()))
    assert document["could_analyse"] is False and document["suites"] == 2
    assert document["base"] == {"accepted": 1, "rejected": 1, "error": 0, "accepted_share": 0.5}
    assert document["scripts"]["failed"] == [{"script": "tests/test_f.py", "reason": "died"}]
    assert document["scripts"]["disabled"] == ["tests/test_off.py"]
    assert document["errors"][0]["count"] == 1 and document["base_failures"][0]["suite"] == "tests/test_0.py"
    assert document["base_failures"][0]["exception"] == "FileNotFoundError"
    assert document["max_base_failures"] == 0.1


POLICY = ('version: 1\nvalidation:\n  paths: ["a.py"]\n  entry: "a:parse"\n'
          'matrix:\n  sources: [{kind: static, suites: []}]\n')


def test_the_policy_keys_default_and_are_strict() -> None:
    default = parse_policy(POLICY, "p.yml").health
    assert (default.max_base_failures, default.fail_open) == (0.10, False)
    chosen = parse_policy(POLICY + "health: {max_base_failures: 0.5, fail_open: true}\n", "p.yml").health
    assert (chosen.max_base_failures, chosen.fail_open) == (0.5, True)
    with pytest.raises(PolicyError, match=r"health\.max_base_failures"):
        parse_policy(POLICY + "health: {max_base_failures: 1.5}\n", "p.yml")
    with pytest.raises(PolicyError, match=r"health: unknown key `min_accepted`"):
        parse_policy(POLICY + "health: {min_accepted: 0.9}\n", "p.yml")


def test_where_and_describe_say_only_what_is_known() -> None:
    no_line = Outcome("rejected", "ValueError", "bad", ARGS, None)
    assert (where(no_line), describe(no_line)) == (ARGS, f"ValueError: bad at {ARGS}")
    assert where(STUB) == "" and where(NO_FILE) == f"{ARGS}:7"
    assert describe(Outcome("error", message="not validated")) == "not validated"
    assert describe(Outcome("rejected", "SystemExit")) == "SystemExit"
    assert describe(Outcome("rejected")) == "rejected"


def test_an_empty_matrix_is_all_blind_and_accepts_nothing() -> None:
    health = assess(Matrix(suites=(), scripts=0, captured=0), {}, {}, {})
    assert (health.accepted_share, health.failure_share) == (0.0, 1.0)


def test_base_errors_without_a_place_are_grouped_by_message() -> None:
    m = matrix(3)
    unloadable = Outcome("error", "TypeError", "'_Stub' object is not callable")
    health = assess(m, results(m, STUB, unloadable, STUB), {}, {})
    assert [(group.example, group.count) for group in health.errors] == [(STUB, 2), (unloadable, 1)]


def test_json_of_a_healthy_analysis_is_complete() -> None:
    m = Matrix(suites=tuple(Suite(id=f"s{i}", script="tests/test_a.py", argv=()) for i in range(3)),
               scripts=1, captured=1, partial=(CaptureFailure("tests/test_a.py", "failed after"),),
               no_entry=(CaptureFailure("tests/test_p.py", "pytest"),))
    base = {s.id: SuiteResult(s.id, ACCEPTED) for s in m.suites} | {"s2": SuiteResult("s2", NO_FILE)}
    head = {s.id: SuiteResult(s.id, ACCEPTED, lines_hit={ARGS: (3,)}) for s in m.suites}
    health = assess(m, base, head, {ARGS: [3]}, max_base_failures=0.5)
    assert health.fail_open is False
    assert health.to_json() == {
        "could_analyse": True, "reason": "the base revision accepts 2 of 3 CI suites (66.7%)", "suites": 3,
        "scripts": {"considered": 1, "captured": 1,
                    "partial": [{"script": "tests/test_a.py", "reason": "failed after"}],
                    "no_entry": [{"script": "tests/test_p.py", "reason": "pytest"}], "failed": [],
                    "disabled": [], "not_considered": []},
        "base": {"accepted": 2, "rejected": 1, "error": 0, "accepted_share": 0.6667},
        "max_base_failures": 0.5, "fail_open": False,
        "errors": [{**NO_FILE.to_json(), "count": 1}],
        "base_failures": [{"suite": "s2", **NO_FILE.to_json()}],
        "fixed_at_head": 1, "suspect_base": False, "lines_changed": True, "lines_reached": True,
        "stubbed_parser_reads": [], "drift": [], "assumed": [], "assumed_rejections": [],
    }


def test_the_summary_names_only_the_kinds_of_script_there_are() -> None:
    m = Matrix(suites=(Suite(id="s", script="tests/test_a.py", argv=()),), scripts=1, captured=1)
    bare = assess(m, {}, {}, {})
    assert summary_line(bare) == ("1 suites from 1 of 1 scripts; base accepts 0/1 (0%), rejects 0, "
                                  "errors 1")
    assert summary_line(assess(matrix(2), results(matrix(2)), {}, {})) == (
        "2 suites from 2 of 3 scripts (1 disabled); base accepts 2/2 (100%), rejects 0, errors 0")
