"""The comment and check-run output of a report (pure): the first line's verdict, folded and cut lists,
GitHub's size limits, inert untrusted text, annotations on the offending lines."""

from __future__ import annotations

import re
from dataclasses import replace

from app.analysis.core.model import Finding, Matrix, Outcome, Suite, SuiteResult
from app.analysis.verdict.health import assess
from app.analysis.verdict.report import CheckReport
from app.triage.pr_report import (
    COMMENT_LIMIT,
    COMMENT_MARKER,
    OUTPUT_LIMIT,
    RERUN_BUTTON,
    check_output,
    clear_comment,
    comment_markdown,
    conclusion_of,
    error_output,
    inert,
)

HEAD, BASE = "c" * 40, "b" * 40


def report(findings: list[Finding], suites: int = 3, *, validation_changed: bool = True) -> CheckReport:
    matrix = Matrix(suites=tuple(Suite(f"tests/e2e/test_{i}.py", f"tests/e2e/test_{i}.py", ("--x",))
                                 for i in range(suites)), scripts=suites, captured=suites)
    accepted = {s.id: SuiteResult(s.id, Outcome("accepted")) for s in matrix.suites}
    return CheckReport(BASE, HEAD, validation_changed=validation_changed, changed_paths=("a.py",),
                       matrix=matrix, base=accepted, head=accepted, findings=tuple(findings))


def blocking(suites: int, *, line: int = 256, message: str = "AssertionError: no LoRA offload") -> Finding:
    return Finding("new_rejection", "blocking", message, suites=tuple(f"tests/e2e/suite_{i}.py"
                                                                      for i in range(suites)),
                   path="miles/utils/arguments.py", line=line, in_diff=True)


def test_the_first_line_says_whether_the_pr_breaks_existing_suites() -> None:
    broken = comment_markdown(report([blocking(5)]))
    assert broken.splitlines()[0] == "**❌ This pull request breaks 5 existing CI suites.**"
    assert "`miles/utils/arguments.py:256` (in this diff)" in broken
    assert broken.endswith(COMMENT_MARKER)
    clean = comment_markdown(report([]))
    assert clean.splitlines()[0] == "**✅ This pull request breaks no existing CI suite.**"
    untouched = comment_markdown(report([], validation_changed=False))
    assert untouched.splitlines()[0].endswith("it changes no validation code.**")
    cleared = clear_comment(head_sha=HEAD, changed_files=2)
    assert cleared.splitlines()[0] == "**✅ This pull request breaks no existing CI suite: clear now.**"
    assert cleared.endswith(COMMENT_MARKER)


def test_the_conclusion_is_failure_for_blocking_neutral_for_warnings_success_else() -> None:
    warning = Finding("capture_failed", "warning", "tests/e2e/x.py yielded no command line")
    info = Finding("not_exercised", "info", "no suite reaches line 3", path="a.py", line=3)
    assert conclusion_of(report([blocking(1), warning])) == "failure"
    assert conclusion_of(report([warning, info])) == "neutral"
    assert conclusion_of(report([info])) == "success"
    assert check_output(report([warning])).title == "No existing CI suite newly rejected; 1 warning"


def test_long_suite_lists_fold_into_details_and_are_cut_with_a_count() -> None:
    few = comment_markdown(report([blocking(5)]))
    assert "<details>" not in few
    many = comment_markdown(report([blocking(150)]))
    assert "<details><summary>150 suites</summary>" in many
    assert "- … and 50 more" in many
    assert len(re.findall(r"^- `tests/e2e/suite_\d+\.py`$", many, re.MULTILINE)) == 100


def test_a_huge_report_stays_under_githubs_limits_and_says_what_it_left_out() -> None:
    findings = [blocking(400, line=n, message="x" * 5000) for n in range(1, 301)]
    huge = report(findings, suites=3000)
    comment = comment_markdown(huge)
    assert len(comment) < COMMENT_LIMIT
    assert comment.splitlines()[0] == "**❌ This pull request breaks 400 existing CI suites.**"
    assert "more parts of this report did not fit" in comment
    assert comment.endswith(COMMENT_MARKER)
    output = check_output(huge)
    assert len(output.summary) <= OUTPUT_LIMIT
    assert output.text is not None and len(output.text) <= OUTPUT_LIMIT
    assert len(output.annotations) == 300  # the GitHub room posts them 50 per call
    assert all(len(a.message) <= 60_000 for a in output.annotations)


def test_untrusted_text_is_inert() -> None:
    hostile = "@octocat <img src=x onerror=alert(1)> [click](http://evil) `code` **bold** #1"
    made_safe = inert(hostile)
    assert "<img" not in made_safe
    assert "@octocat" not in made_safe
    assert "[click](" not in made_safe
    comment = comment_markdown(report([blocking(1, message=hostile)]))
    assert "<img" not in comment and "@octocat" not in comment


def test_annotations_fall_on_the_offending_lines_with_the_severitys_level() -> None:
    warning = Finding("removed_flag", "warning", "--old-flag is gone", suites=("s",), path="cli.py", line=9)
    lineless = Finding("capture_failed", "warning", "no command line")
    output = check_output(report([blocking(5), warning, lineless]))
    assert [(a.path, a.line, a.level) for a in output.annotations] == [
        ("miles/utils/arguments.py", 256, "failure"), ("cli.py", 9, "warning")]
    assert output.annotations[0].title == "Breaks 5 existing CI suites"
    assert "Breaks 5 suites: tests/e2e/suite_0.py" in output.annotations[0].message


def test_an_analysis_that_could_not_run_is_action_required_with_its_reason_and_the_rerun_button() -> None:
    output = error_output("no CI suite captured at head")
    assert (output.conclusion, output.title) == ("action_required", "Triage could not run")
    assert output.actions == (RERUN_BUTTON,)
    assert "no CI suite captured at head" in output.summary


def blind(findings: list[Finding], *, fail_open: bool = False) -> CheckReport:
    """A report whose base rejects every suite at a line the harness cannot get past."""
    healthy = report(findings, suites=30)
    noise = Outcome("rejected", "FileNotFoundError", "No such file: '/root/x/generation_config.json'",
                    "miles/utils/arguments.py", 12)
    base = {suite: SuiteResult(suite, noise) for suite in healthy.base}
    return replace(healthy, base=base, head=base,
                   health=assess(healthy.matrix, base, base, {}, fail_open=fail_open))


def test_a_blind_analysis_is_action_required_never_a_pass_and_says_why() -> None:
    output = check_output(blind([blocking(5)]))
    assert output.conclusion == "action_required" and output.actions == (RERUN_BUTTON,)
    assert output.title.startswith("Could not analyse: the base revision rejects or errors on 30 of 30")
    assert "#### Could not analyse" in output.summary
    assert "base error ×30: FileNotFoundError: No such file:" in output.summary
    assert "tests/e2e/test\\_0.py" in output.summary and "… and 10 more" in output.summary
    assert "base accepts 0/30 (0%), rejects 30, errors 0" in output.summary
    comment = comment_markdown(blind([]))
    assert comment.splitlines()[0].startswith("**⚠️ Could not analyse this pull request")
    assert "#### Could not analyse" in comment and "✅" not in comment


def test_fail_open_makes_a_blind_analysis_neutral_and_still_says_so() -> None:
    output = check_output(blind([], fail_open=True))
    assert output.conclusion == "neutral" and output.title.startswith("Could not analyse")


def test_a_healthy_analysis_shows_its_health_in_the_footnote() -> None:
    healthy = report([])
    measured = replace(healthy, health=assess(healthy.matrix, healthy.base, healthy.head, {}))
    assert check_output(measured).conclusion == "success"
    assert "health: 3 suites from 3 of 3 scripts; base accepts 3/3 (100%)" in comment_markdown(measured)
