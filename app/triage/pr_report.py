"""A triage's report as GitHub shows it: the sticky PR comment and the check run's output (pure functions).

The comment's first line says whether the pull request breaks existing CI suites; then, per blocking
finding, the line and message of the assertion, whether that line is in this diff, and the suites. Lists
that do not fit fold into <details> and are cut with a count; the comment stays under GitHub's 65,536
characters, the check run's summary and text under 65,535.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from app.analysis.core.model import Finding
from app.analysis.verdict.refinement import refinement_markdown
from app.analysis.verdict.render import because, health_line, health_markdown
from app.analysis.verdict.report import CheckReport, Revision

COMMENT_MARKER = "<!-- prtriage:sticky -->"
COMMENT_LIMIT = 65_536  # GitHub refuses a longer comment body
OUTPUT_LIMIT = 65_535  # a check run's output.summary and output.text
SUITES_INLINE = 10  # a finding's suites beyond this many fold into <details>
SUITES_SHOWN = 100  # and beyond this many are cut with a count
MESSAGE_CHARS = 400
ANNOTATION_CHARS = 60_000

# action_required, not neutral, when the triage could not run or could not see: GitHub counts neutral as
# passing a required check, and a blind triage must not pass one.
Conclusion = Literal["success", "failure", "neutral", "action_required"]
Level = Literal["failure", "warning", "notice"]
LEVELS: dict[str, Level] = {"blocking": "failure", "warning": "warning", "info": "notice"}
REVISIONS: tuple[Revision, Revision] = ("base", "head")


@dataclass(frozen=True)
class AnnotationSpec:
    """A remark on one line of the head revision (the GitHub room turns it into a check-run annotation)."""

    path: str
    line: int
    level: Level
    title: str
    message: str
    raw_details: str | None = None


@dataclass(frozen=True)
class ActionSpec:
    """A button on the completed check run (GitHub: label <= 20 characters, description <= 40, identifier
    <= 20); a click comes back as a `check_run` `requested_action` delivery carrying the identifier."""

    label: str
    description: str
    identifier: str


RERUN_ACTION = "rerun"  # the identifier app/webhooks/check_events.py answers with a new triage
RERUN_BUTTON = ActionSpec(label="Re-run triage", description="Triage this pull request again",
                          identifier=RERUN_ACTION)


@dataclass(frozen=True)
class CheckOutput:
    conclusion: Conclusion
    title: str
    summary: str
    text: str | None = None
    annotations: tuple[AnnotationSpec, ...] = ()
    actions: tuple[ActionSpec, ...] = (RERUN_BUTTON,)  # every completed triage can be asked again


# Text made safe


def _flat(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def inert(text: str, limit: int = MESSAGE_CHARS) -> str:
    """Untrusted text (assert messages come from the PR) on one line, made inert in markdown: no HTML,
    no formatting, no @mention."""
    escaped = html.escape(_flat(text, limit), quote=False)
    for char in "\\`*_[]|~<>#":
        escaped = escaped.replace(char, "\\" + char)
    return escaped.replace("@", "@\u200b")


def code(text: str) -> str:
    """TEXT as an inline code span, whatever backticks it holds."""
    flat = " ".join(text.split()).replace("@", "@\u200b")
    fence = "``" if "`" in flat else "`"
    return f"{fence} {flat} {fence}" if fence == "``" else f"`{flat}`"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _short(sha: str | None) -> str:
    return sha[:7] if sha else "?"


# The verdict


def conclusion_of(report: CheckReport) -> Conclusion:
    if report.health is not None and not report.health.could_analyse:
        return "neutral" if report.health.fail_open else "action_required"
    if report.blocking:
        return "failure"
    if any(f.severity == "warning" for f in report.findings):
        return "neutral"
    return "success"


def verdict_line(report: CheckReport) -> str:
    """The comment's first line."""
    if not report.could_analyse:
        return "**⚠️ Could not analyse this pull request: the analysis was blind, so this is no pass.**"
    if report.blocking and not report.broken_suites:  # e.g. an unmerged prerequisite
        return f"**❌ This pull request has {_plural(len(report.blocking), 'blocking finding')}.**"
    if report.blocking:
        return f"**❌ This pull request breaks {_plural(len(report.broken_suites), 'existing CI suite')}.**"
    if not report.validation_changed:
        return "**✅ This pull request breaks no existing CI suite: it changes no validation code.**"
    return "**✅ This pull request breaks no existing CI suite.**"


TITLE_REASON_CHARS = 200


def check_title(report: CheckReport) -> str:
    if report.health is not None and not report.health.could_analyse:
        return f"Could not analyse: {_flat(report.health.reason, TITLE_REASON_CHARS)}"
    if report.blocking and not report.broken_suites:
        return _plural(len(report.blocking), "blocking finding").capitalize()
    if report.blocking:
        return f"Breaks {_plural(len(report.broken_suites), 'existing CI suite')}"
    warnings = sum(1 for f in report.findings if f.severity == "warning")
    if warnings:
        return f"No existing CI suite newly rejected; {_plural(warnings, 'warning')}"
    if not report.validation_changed:
        return "No validation code changed"
    return "No existing CI suite newly rejected"


def _where(finding: Finding) -> str:
    if finding.path is None:
        return ""
    place = code(finding.path if finding.line is None else f"{finding.path}:{finding.line}")
    return f"{place} ({'in this diff' if finding.in_diff else 'not in this diff'})"


def _suite_list(suites: Sequence[str]) -> str:
    shown = [f"- {code(suite)}" for suite in suites[:SUITES_SHOWN]]
    if len(suites) > SUITES_SHOWN:
        shown.append(f"- … and {len(suites) - SUITES_SHOWN} more")
    listed = "\n".join(shown)
    if len(suites) <= SUITES_INLINE:
        return listed
    return f"<details><summary>{_plural(len(suites), 'suite')}</summary>\n\n{listed}\n\n</details>"


def _blocking_block(finding: Finding) -> str:
    where = _where(finding) or ("(no line: the suites' own command lines)" if finding.suites else "")
    heading = f"{finding.kind.replace('_', ' ')} at {where}" if where else finding.kind.replace("_", " ")
    lines = [f"#### {heading}", "", f"> {inert(finding.message)}", ""]
    if (cause := _because(finding)) is not None:
        lines += [cause, ""]
    if finding.suites:
        lines += [f"Breaks {_plural(len(finding.suites), 'suite')}:", "", _suite_list(finding.suites)]
    return "\n".join(lines)


def _because(finding: Finding) -> str | None:
    """The arguments the rejection needs, as code: what a maintainer would otherwise dig out of 80-flag
    command lines."""
    minimal = finding.minimal_args
    if minimal is None:
        return None
    words = code(shlex.join(minimal.args)) if minimal.args else "no argument at all"
    shared = ("every listed suite passes these" if minimal.every_suite_passes
              else f"found on {code(minimal.suite)}; not every listed suite passes all of these")
    cut = "" if minimal.complete else " (the search was cut short: the smallest set it saw rejected)"
    return (f"Rejected because of {words}, {minimal.count} of {_plural(minimal.of, 'argument')}; "
            f"{shared}{cut}.")


def _other_line(finding: Finding) -> str:
    where = f" at {_where(finding)}" if finding.path else ""
    suites = f" ({_plural(len(finding.suites), 'suite')})" if finding.suites else ""
    kind = finding.kind.replace("_", " ")
    return f"- **{finding.severity}** {kind}{where}: {inert(finding.message)}{suites}"


def _counts(report: CheckReport, revision: Revision) -> str:
    counts = report.outcome_counts(revision)
    return f"{revision} {counts['accepted']} accepted, {counts['rejected']} rejected, {counts['error']} error"


def _facts(report: CheckReport, *, timing: bool) -> str:
    """The footnote: what was compared and replayed (timing only in the check run: a comment that differs
    only by it would be edited on every re-run)."""
    head = f"head {code(_short(report.head_sha))} against base {code(_short(report.base_sha))}"
    policy = f"<br>policy: {inert(report.policy.describe())}" if report.policy is not None else ""
    if not report.validation_changed:
        return f"<sub>{head}; {_plural(len(report.changed_paths), 'changed file')}, none of them " \
               f"validation code: nothing was replayed.{policy}</sub>"
    matrix = report.matrix
    took = f"; {report.timing.total_s:.1f} s" if timing else ""
    why = f"analysed: the change {inert(report.analysed_because)}<br>" if report.analysed_because else ""
    return (f"<sub>{why}{head}; {_plural(len(matrix.suites), 'suite')} from {matrix.captured} of "
            f"{_plural(matrix.scripts, 'CI script')} ({len(matrix.failed)} failed); "
            f"{_counts(report, 'base')}; {_counts(report, 'head')}{took}<br>"
            f"{inert(health_line(report.health), 2000)}{policy}</sub>")


def _blocks(report: CheckReport) -> list[str]:
    """The report's parts after the first line, most important first."""
    health = report.health
    blocks = [refinement_markdown(report.refinement, inert, report.policy)] \
        if report.refinement is not None else []  # first: the rest of the report is the refined run's
    blocks += [health_markdown(health, inert)] if health is not None and not health.could_analyse else []
    blocks += [_blocking_block(f) for f in report.blocking]
    warnings = [_other_line(f) for f in report.findings if f.severity == "warning"]
    if warnings:
        blocks.append("#### Warnings\n\n" + "\n".join(warnings))
    notes = [_other_line(f) for f in report.findings if f.severity == "info"]
    if notes:
        blocks.append(f"<details><summary>{_plural(len(notes), 'note')}</summary>\n\n" + "\n".join(notes)
                      + "\n\n</details>")
    if not report.sandboxed:
        blocks.append("> **Warning: the analysis ran without the sandbox.**")
    return blocks


def _fit(head: str, blocks: Iterable[str], tail: str, limit: int) -> str:
    """HEAD, as many BLOCKS as fit, then TAIL, in fewer than LIMIT characters, saying what was left out."""
    pending = list(blocks)
    room = limit - len(head) - len(tail) - 200
    kept: list[str] = []
    for block in pending:
        if len(block) + 2 > room:
            break
        kept.append(block)
        room -= len(block) + 2
    left = len(pending) - len(kept)
    notice = [f"*… {_plural(left, 'more part')} of this report did not fit; the dashboard has all of it.*"] \
        if left else []
    text = "\n\n".join(part for part in [head, *kept, *notice, tail] if part)
    return text if len(text) < limit else text[: limit - 2] + "…"


def comment_markdown(report: CheckReport) -> str:
    """The sticky comment, the hidden marker on its last line."""
    limit = COMMENT_LIMIT - len(COMMENT_MARKER) - 2
    body = _fit(verdict_line(report), _blocks(report), _facts(report, timing=False), limit)
    return f"{body}\n\n{COMMENT_MARKER}"


def clear_comment(*, head_sha: str, changed_files: int) -> str:
    """The sticky comment edited once the latest head changes no validation code any more."""
    return (f"**✅ This pull request breaks no existing CI suite: clear now.**\n\n"
            f"<sub>head {code(_short(head_sha))} changes no validation code "
            f"({_plural(changed_files, 'changed file')}): nothing had to be replayed.</sub>\n\n"
            f"{COMMENT_MARKER}")


# The check run


def _suites_table(report: CheckReport) -> str:
    if not report.matrix.suites:
        return ""
    rows = ["| suite | base | head |", "| --- | --- | --- |"]
    for suite in report.matrix.suites:
        cells = []
        for revision in REVISIONS:
            outcome = report.outcome(revision, suite.id)
            why = f": {inert(outcome.message or '', 120)}" if outcome.outcome != "accepted" else ""
            cells.append(f"{outcome.outcome}{why}")
        rows.append(f"| {code(suite.id)} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def annotations_of(findings: Iterable[Finding]) -> tuple[AnnotationSpec, ...]:
    """One annotation per finding that has a line in the head revision."""
    specs = []
    for finding in findings:
        if finding.path is None or finding.line is None:
            continue
        suites = f"\n\nBreaks {_plural(len(finding.suites), 'suite')}: " + ", ".join(finding.suites[:20]) \
            if finding.suites else ""
        cause = f"\n\n{because(finding)}" if finding.minimal_args is not None else ""
        more = f" and {len(finding.suites) - 20} more" if len(finding.suites) > 20 else ""
        title = f"Breaks {_plural(len(finding.suites), 'existing CI suite')}" \
            if finding.severity == "blocking" and finding.suites else finding.kind.replace("_", " ")
        specs.append(AnnotationSpec(
            path=finding.path, line=finding.line, level=LEVELS[finding.severity], title=title,
            message=(finding.message + cause + suites + more)[:ANNOTATION_CHARS],
            raw_details="\n".join(finding.suites)[:ANNOTATION_CHARS] or None))
    return tuple(specs)


def check_output(report: CheckReport) -> CheckOutput:
    summary = _fit(verdict_line(report), _blocks(report), _facts(report, timing=True), OUTPUT_LIMIT)
    table = _suites_table(report)
    text = _fit("Every suite's outcome at each revision:", [table], "", OUTPUT_LIMIT) if table else None
    return CheckOutput(conclusion=conclusion_of(report), title=check_title(report), summary=summary,
                       text=text, annotations=annotations_of(report.findings))


ERROR_TITLE = "Triage could not run"


def error_output(reason: str) -> CheckOutput:
    """The analysis could not run: action_required with the reason and the Re-run button. Never neutral,
    which GitHub counts as passing: a required check must not pass on our failure."""
    return CheckOutput(conclusion="action_required", title=ERROR_TITLE,
                       summary=f"**The triage could not run:** {inert(reason, 2000)}\n\n"
                               "Nothing was judged; push again or re-run the check once the cause is fixed.")


def superseded_reason(newer_head: str | None) -> str:
    return f"superseded by {newer_head}" if newer_head else "superseded by a newer triage"
