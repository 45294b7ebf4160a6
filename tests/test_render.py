"""render: the JSON contract's keys, the text headline and sandbox warning, markdown safety and size."""

from __future__ import annotations

import json
from dataclasses import replace

from app.analysis.core.model import CaptureFailure, Finding, Matrix, Outcome, Suite, SuiteResult
from app.analysis.verdict.health import assess
from app.analysis.verdict.render import MARKDOWN_LIMIT, render, render_markdown, render_text, report_json
from app.analysis.verdict.report import CheckReport, Timing

SUITES = tuple(Suite(id=f"tests/e2e/test_lora.py#{i}", script="tests/e2e/test_lora.py",
                     argv=("--colocate", f"--seed={i}")) for i in range(3))
OUTCOME_KEYS = {"outcome", "exception", "message", "path", "line"}


def blocking_finding(suites: tuple[str, ...] = tuple(s.id for s in SUITES),
                     message: str = "AssertionError: colocate needs the weights backuper") -> Finding:
    return Finding(kind="new_rejection", severity="blocking", message=message,
                   scripts=("tests/e2e/test_lora.py",), suites=suites, path="pkg/arguments.py", line=42,
                   in_diff=True)


def make_report(findings: tuple[Finding, ...] = (), *, sandboxed: bool = True, changed: bool = True,
                suites: tuple[Suite, ...] = SUITES) -> CheckReport:
    rejected = Outcome("rejected", "AssertionError", "colocate needs the weights backuper",
                       "pkg/arguments.py", 42)
    matrix = Matrix(suites=suites, scripts=2, captured=1,
                    failed=(CaptureFailure("tests/e2e/test_broken.py", "timed out"),))
    return CheckReport(
        base_sha="a" * 40, head_sha="b" * 40, validation_changed=changed, changed_paths=("pkg/arguments.py",),
        matrix=matrix if changed else Matrix((), 0, 0),
        base={s.id: SuiteResult(s.id, Outcome("accepted")) for s in suites},
        head={s.id: SuiteResult(s.id, rejected) for s in suites},
        findings=findings, capture_cached=True, sandboxed=sandboxed,
        timing=Timing(capture_s=1.25, base_s=2.5, head_s=2.75, total_s=6.5))


def test_json_keeps_the_contract_keys_and_nesting() -> None:
    document = json.loads(render(make_report((blocking_finding(),)), "json"))
    assert {"base", "head", "validation_changed", "suites", "findings", "capture", "sandboxed",
            "timing"} <= document.keys()
    assert document["base"] == "a" * 40 and document["head"] == "b" * 40
    suite = document["suites"][0]
    assert {"id", "script", "argv", "base", "head"} <= suite.keys()
    assert suite["argv"] == ["--colocate", "--seed=0"]
    assert suite["base"].keys() >= OUTCOME_KEYS
    assert suite["head"].keys() >= OUTCOME_KEYS
    assert suite["head"]["line"] == 42 and suite["base"]["outcome"] == "accepted"
    finding = document["findings"][0]
    assert {"kind", "severity", "scripts", "suites", "path", "line", "in_diff", "message"} <= finding.keys()
    assert finding["suites"] == [s.id for s in SUITES]
    assert document["capture"] == {"scripts": 2, "captured": 1, "cached": True, "disabled": [],
                                   "failed": [{"script": "tests/e2e/test_broken.py", "reason": "timed out"}],
                                   "no_entry": [], "partial": [], "not_considered": []}
    assert document["health"] is None  # not measured in this hand-made report
    assert document["timing"] == {"capture_s": 1.25, "base_s": 2.5, "head_s": 2.75, "minimize_s": 0.0,
                                  "minimize_cpu_s": 0.0, "total_s": 6.5,
                                  "base_cached": False}
    assert document["sandboxed"] is True and document["validation_changed"] is True


def test_json_of_trees_without_git_has_null_revisions() -> None:
    report = CheckReport(base_sha=None, head_sha=None, validation_changed=False)
    document = report_json(report)
    assert document["base"] is None and document["head"] is None
    assert document["suites"] == [] and document["findings"] == []


def test_text_says_first_how_many_suites_break_and_where() -> None:
    text = render_text(make_report((blocking_finding(),)))
    lines = text.splitlines()
    assert lines[0] == "BREAKS 3 existing CI suites (1 blocking finding)"
    assert "pkg/arguments.py:42 (in this diff)" in text
    assert "AssertionError: colocate needs the weights backuper" in text
    assert all(s.id in text for s in SUITES)
    assert "timing: capture 1.2 s (matrix from cache), base 2.5 s, head 2.8 s, total 6.5 s" in text
    again = render_text(replace(make_report(), base_cached=True))
    assert "base 2.5 s (from an earlier check), head 2.8 s" in again
    assert "WITHOUT the sandbox" not in text


def test_text_without_blocking_findings_says_no_suite_newly_rejected() -> None:
    info = Finding(kind="fixed", severity="info", message="accepted at head", suites=(SUITES[0].id,))
    text = render_text(make_report((info,)))
    assert text.splitlines()[0] == "No existing CI suite newly rejected"
    assert "[info] fixed: accepted at head (1 suite)" in text


def test_text_of_the_fast_path_says_nothing_ran() -> None:
    text = render_text(make_report(changed=False))
    assert text.startswith("No existing CI suite newly rejected: the change touches no validation path")


def test_text_warns_loudly_without_the_sandbox() -> None:
    unsandboxed = make_report(sandboxed=False)
    for rendered in (render_text(unsandboxed), render_markdown(unsandboxed)):
        assert "WITHOUT the sandbox" in rendered


def test_markdown_has_a_headline_a_table_and_folded_suites() -> None:
    markdown = render_markdown(make_report((blocking_finding(),)))
    assert markdown.startswith("### ❌ BREAKS 3 existing CI suites")
    assert "| severity | finding | where | suites | message |" in markdown
    assert "<details><summary>new_rejection at pkg/arguments.py:42 (in this diff): 3 suites</summary>" \
        in markdown
    assert "</details>" in markdown
    assert f"- {SUITES[0].id.replace('_', chr(92) + '_')}" in markdown


def test_markdown_makes_repository_text_inert() -> None:
    hostile = "AssertionError: <img src=x onerror=alert(1)> | cc @maintainer\nnext"
    markdown = render_markdown(make_report((blocking_finding(message=hostile),)))
    assert "<img" not in markdown
    assert "&lt;img" in markdown
    assert "@maintainer" not in markdown
    assert "\\|" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| blocking"))
    assert row.count(" | ") == 4  # the message's pipe and newline did not add a column or a row


def test_markdown_stays_under_the_limit_with_huge_suite_lists() -> None:
    many = tuple(Suite(id=f"tests/e2e/group_{i // 100}/test_{i}.py#variant-{i}", script=f"tests/e2e/t{i}.py",
                       argv=()) for i in range(6000))
    findings = tuple(blocking_finding(suites=tuple(s.id for s in many[k::40]), message=f"m{k}")
                     for k in range(40))
    markdown = render_markdown(make_report(findings, suites=many))
    assert len(markdown) < MARKDOWN_LIMIT
    assert "more" in markdown
    assert markdown.count("<details>") == markdown.count("</details>")


NO_FILE = Outcome("rejected", "FileNotFoundError", "No such file: '/root/models/x/generation_config.json'",
                  "pkg/arguments.py", 7)


def measured(report: CheckReport, base: Outcome | None = None) -> CheckReport:
    """REPORT with its health measured, every suite ending with BASE at the base when given."""
    results = {s.id: SuiteResult(s.id, base) for s in report.matrix.suites} if base else dict(report.base)
    health = assess(report.matrix, results, report.head, {})
    return replace(report, base=results, health=health)


def test_a_healthy_report_shows_its_health_and_keeps_its_exit_meaning() -> None:
    report = measured(make_report((blocking_finding(),)))
    text = render_text(report)
    assert report.could_analyse and text.splitlines()[0].startswith("BREAKS 3")
    assert "health: 3 suites from 1 of 2 scripts (1 failed); base accepts 3/3 (100%), rejects 0, errors 0\n" \
        in text
    assert "could not analyse" not in text
    document = json.loads(render(report, "json"))
    assert document["health"]["could_analyse"] is True and document["health"]["base"]["accepted"] == 3
    assert "health: 3 suites from 1 of 2 scripts" in render_markdown(report)


def test_a_blind_report_says_so_first_and_lists_every_suite_the_base_rejects() -> None:
    report = measured(make_report((blocking_finding(),)), base=NO_FILE)
    assert not report.could_analyse
    text = render_text(report)
    assert text.splitlines()[0] == ("COULD NOT ANALYSE: the analysis was blind, so no pass can be given; "
                                    "1 blocking finding below")
    assert "could not analyse: the base revision rejects or errors on 3 of 3 CI suites (100%" in text
    assert "most common base error: FileNotFoundError: No such file: " in text
    for suite in SUITES:
        assert f"  {suite.id}: FileNotFoundError: No such file: '/root/models/x/generation_config.json' at " \
               "pkg/arguments.py:7" in text
    markdown = render_markdown(report)
    assert markdown.startswith("### ⚠️ COULD NOT ANALYSE") and "#### Could not analyse" in markdown
    assert "base error ×3: FileNotFoundError" in markdown


def test_the_comment_caps_the_suites_the_base_rejects() -> None:
    many = tuple(Suite(id=f"tests/e2e/test_{i}.py", script=f"tests/e2e/test_{i}.py", argv=())
                 for i in range(45))
    markdown = render_markdown(measured(make_report(suites=many), base=NO_FILE))
    assert markdown.count("tests/e2e/test\\_") == 20 and "- … and 25 more" in markdown
