"""The host side of validation (app/engine/suite_validation.py): which reports of a harness run are believed
and what a suite without one becomes, and which changed lines a suite is asked to trace (issue 27)."""

from __future__ import annotations

import logging

import pytest
import yaml

from app.analysis.core.model import Outcome, Suite, SuiteResult
from app.analysis.core.policy import parse_policy
from app.analysis.verdict.diff import diff_trees
from app.engine.suite_validation import collect_results, statement_starts, trace_lines

BELIEVED_NOT = ("the validation results cannot be believed, something other than the harness wrote to its "
                "channel: ")


def report(suite_id: str, outcome: str = "accepted", **extra: object) -> dict[str, object]:
    verdict = {"outcome": outcome, "exception": None, "message": None, "path": None, "line": None}
    return {"type": "suite", "suite_id": suite_id, "events": [], "known_flags": [], "tolerated_flags": [],
            "learned": [], "lines_hit": {}, "outcome": verdict, **extra}


def suites(*ids: str) -> list[Suite]:
    return [Suite(suite_id, "ci.sh", (f"--{suite_id}",)) for suite_id in ids]


# --- collect_results -----------------------------------------------------------------------------------

def test_each_suite_gets_its_own_report_and_the_others_the_reason() -> None:
    results = collect_results(suites("a", "b", "c"), [report("b", "rejected"), report("a")], "killed")
    assert list(results) == ["a", "b", "c"]
    assert [results[s].outcome.outcome for s in "abc"] == ["accepted", "rejected", "error"]
    assert results["c"] == SuiteResult("c", Outcome("error", message="killed"))


def test_lines_of_other_kinds_are_no_reports() -> None:
    messages = [{"type": "progress", "suite_id": "a"}, {"suite_id": "a"}, {**report("a"), "type": "result"},
                report("b")]
    results = collect_results(suites("a", "b"), messages, "never reported")
    assert results["a"].outcome == Outcome("error", message="never reported")
    assert results["b"].outcome.outcome == "accepted"


def test_a_malformed_report_is_logged_and_the_suite_an_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="app.engine.suite_validation"):
        results = collect_results(suites("a"), [{"type": "suite", "suite_id": "a"}], "the reason")
    assert results["a"].outcome == Outcome("error", message="the reason")
    assert [r.getMessage() for r in caplog.records] == [
        "ignored a malformed suite result: {'type': 'suite', 'suite_id': 'a'}"]


def test_a_malformed_report_then_a_good_one_is_a_suite_reported_twice() -> None:
    messages = [{"type": "suite", "suite_id": "a"}, report("a"), report("b")]
    results = collect_results(suites("a", "b"), messages, "unused")
    expected = Outcome("error", message=BELIEVED_NOT + "suite a was reported 2 times")
    assert results == {"a": SuiteResult("a", expected), "b": SuiteResult("b", expected)}


def test_tampering_is_said_exactly_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    messages = [report("a"), report("a"), report("a"), report("z")]
    with caplog.at_level(logging.WARNING, logger="app.engine.suite_validation"):
        results = collect_results(suites("a"), messages, "unused")
    what = "suite a was reported 3 times; suite z was reported but never asked for"
    assert results == {"a": SuiteResult("a", Outcome("error", message=BELIEVED_NOT + what))}
    assert [r.getMessage() for r in caplog.records] == [f"validation results not believed: {what}"]


def test_tampering_names_three_suites_of_each_kind_at_most() -> None:
    wanted = suites("a", "b", "c", "d")
    messages = [report(s) for s in "abcd"] * 2 + [report(s) for s in "vwxyz"]
    message = collect_results(wanted, messages, "unused")["a"].outcome.message
    assert message == BELIEVED_NOT + "; ".join([
        "suite a was reported 2 times", "suite b was reported 2 times", "suite c was reported 2 times",
        "suite v was reported but never asked for", "suite w was reported but never asked for",
        "suite x was reported but never asked for"])


def test_an_unknown_suite_is_named_by_its_first_200_characters() -> None:
    long_id = "q" * 199 + "rs"
    message = collect_results(suites("a"), [report("a"), report(long_id)], "unused")["a"].outcome.message
    assert message == BELIEVED_NOT + f"suite {long_id[:200]} was reported but never asked for"


def test_an_unknown_suite_reported_alone_is_tampering_too() -> None:
    results = collect_results(suites("a"), [report("z")], "the harness died")
    assert results["a"].outcome == Outcome(
        "error", message=BELIEVED_NOT + "suite z was reported but never asked for")


def test_no_report_at_all_is_every_suite_an_error_with_the_reason() -> None:
    assert collect_results(suites("a", "b"), [], "timed out") == {
        s: SuiteResult(s, Outcome("error", message="timed out")) for s in ("a", "b")}


# --- trace_lines and statement_starts -------------------------------------------------------------------

POLICY = parse_policy(yaml.safe_dump({
    "validation": {"paths": ["pkg/**"], "entry": "pkg.arguments:parse_args"},
    "matrix": {"sources": [{"kind": "static", "suites": [{"id": "s", "argv": []}]}]}}), "test-policy.yml")

BEFORE = "def f(a):\n    return a\n"
AFTER = "def f(a):\n    b = a + 1\n    return b\n"


def test_only_python_validation_code_of_the_head_is_traced() -> None:
    # the notes are validation paths but not Python (nor parseable as Python: all their lines would count)
    base = {"pkg/a.py": BEFORE, "pkg/notes.txt": "a note\n", "tools/t.py": BEFORE, "pkg/gone.py": BEFORE}
    head = {"pkg/a.py": AFTER, "pkg/notes.txt": "another note\n", "tools/t.py": AFTER}
    diff = diff_trees(base, head)
    assert trace_lines(diff, POLICY, head) == {"pkg/a.py": [2, 3]}


def test_a_file_whose_changes_no_suite_can_run_is_not_traced() -> None:
    base, head = {"pkg/a.py": "X = 1\n" + BEFORE}, {"pkg/a.py": "X = 2\n" + BEFORE}
    assert trace_lines(diff_trees(base, head), POLICY, head) == {}


def test_a_head_that_does_not_parse_traces_every_changed_line() -> None:
    head = {"pkg/a.py": "def f(a):\n    return (a\n"}
    assert trace_lines(diff_trees({"pkg/a.py": BEFORE}, head), POLICY, head) == {"pkg/a.py": [2]}


def test_statement_starts_owns_code_lines_by_their_innermost_statement() -> None:
    source = "\n".join([
        "import os",                 # 1 module code
        "",                          # 2
        "async def f(a):",           # 3
        "    '''Doc.'''",            # 4 docstring
        "    ...",                   # 5 a bare constant
        "    log(a)",                # 6 a call: runs
        "    if a:",                 # 7
        "        # why",             # 8 comment
        "",                          # 9 blank
        "        x = [",             # 10
        "            1,",            # 11
        "        ]",                 # 12
        "    return x",              # 13
    ])
    assert statement_starts(source, "m.py") == {6: 6, 7: 7, 10: 10, 11: 10, 12: 10, 13: 13}


def test_statement_starts_of_source_that_does_not_parse_is_none() -> None:
    assert statement_starts("def f(:\n", "m.py") is None
    assert statement_starts("x = 1\n", "m.py") == {}
