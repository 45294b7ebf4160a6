"""A check report as JSON (the scripting contract), plain text (the terminal) or markdown (a PR comment)."""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Callable
from typing import Any, Literal

from app.analysis.core.model import Finding
from app.analysis.verdict.health import Health, describe, notes, summary_line
from app.analysis.verdict.refinement import refinement_markdown, refinement_text
from app.analysis.verdict.report import CheckReport

Format = Literal["text", "json", "markdown"]
MARKDOWN_LIMIT = 60_000
MARKDOWN_FINDINGS = 50
MARKDOWN_SUITES = 100
HEALTH_SUITES = 20  # suites the base rejects, listed in a comment before "and N more"
HEALTH_ERRORS = 3  # error groups shown
UNSANDBOXED = ("WARNING: the analysis ran WITHOUT the sandbox: repository code ran unconfined, "
               "with your privileges.")


def render(report: CheckReport, fmt: Format) -> str:
    if fmt == "json":
        return json.dumps(report_json(report), indent=2) + "\n"
    if fmt == "markdown":
        return render_markdown(report)
    return render_text(report)


def report_json(report: CheckReport) -> dict[str, Any]:
    """The `--format json` contract; keys may be added, never renamed or moved."""
    matrix = report.matrix
    return {
        "base": report.base_sha, "head": report.head_sha, "validation_changed": report.validation_changed,
        "suites": [{"id": s.id, "script": s.script, "argv": list(s.argv),
                    "base": report.outcome("base", s.id).to_json(),
                    "head": report.outcome("head", s.id).to_json()} for s in matrix.suites],
        "findings": [f.to_json() for f in report.findings],
        "capture": {"scripts": matrix.scripts, "captured": matrix.captured,
                    "failed": [{"script": f.script, "reason": f.reason} for f in matrix.failed],
                    "cached": report.capture_cached, "disabled": list(matrix.disabled),
                    "no_entry": [{"script": f.script, "reason": f.reason} for f in matrix.no_entry],
                    "partial": [{"script": f.script, "reason": f.reason} for f in matrix.partial],
                    "not_considered": list(matrix.not_considered)},
        "health": report.health.to_json() if report.health is not None else None,
        "sandboxed": report.sandboxed,
        "timing": {"capture_s": round(report.timing.capture_s, 3), "base_s": round(report.timing.base_s, 3),
                   "head_s": round(report.timing.head_s, 3),
                   "minimize_s": round(report.timing.minimize_s, 3),
                   "minimize_cpu_s": round(report.timing.minimize_cpu_s, 3),
                   "total_s": round(report.timing.total_s, 3),
                   "base_cached": report.base_cached},
        "changed_paths": list(report.changed_paths),
        "policy": report.policy.to_json() if report.policy is not None else None,
        "analysed_because": report.analysed_because,
        "validation_imports": sorted(report.learned_paths) if report.learned_paths is not None else None,
        "refinement": report.refinement.to_json() if report.refinement is not None else None,
        **blind_error(report),
    }


def blind_error(report: CheckReport) -> dict[str, Any]:
    """The contract's `error` when the analysis ran blind (exit status 3); absent when it could see."""
    if report.could_analyse or report.health is None:
        return {}
    return {"error": {"kind": "blind", "message": f"could not analyse: {report.health.reason}"}}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def headline(report: CheckReport) -> str:
    if not report.could_analyse:
        listed = f"; {_plural(len(report.blocking), 'blocking finding')} below" if report.blocking else ""
        return f"COULD NOT ANALYSE: the analysis was blind, so no pass can be given{listed}"
    if not report.validation_changed:
        return "No existing CI suite newly rejected: the change touches no validation path (nothing was run)"
    blocking = report.blocking
    if not blocking:
        return "No existing CI suite newly rejected"
    broken = len(report.broken_suites)
    return f"BREAKS {_plural(broken, 'existing CI suite')} ({_plural(len(blocking), 'blocking finding')})"


def because(finding: Finding) -> str | None:
    """'rejected because of `--colocate --lora-rank 16`, 2 of 83 arguments; every listed suite passes
    these': the arguments the new rejection needs (app/analysis/verdict/minimal.py); None when unknown."""
    minimal = finding.minimal_args
    if minimal is None:
        return None
    words = shlex.join(minimal.args) if minimal.args else "no argument at all"
    shared = ("every listed suite passes these" if minimal.every_suite_passes
              else f"found on {minimal.suite}; not every listed suite passes all of these")
    cut = "" if minimal.complete else " (the search was cut short: the smallest set it saw rejected)"
    return (f"rejected because of `{words}`, {minimal.count} of {_plural(minimal.of, 'argument')}; "
            f"{shared}{cut}")


def _where(finding: Finding) -> str:
    if finding.path is None:
        return ""
    place = finding.path if finding.line is None else f"{finding.path}:{finding.line}"
    return f"{place} ({'in this diff' if finding.in_diff else 'not in this diff'})"


def policy_line(report: CheckReport) -> list[str]:
    return [f"policy: {report.policy.describe()}"] if report.policy is not None else []


def _summary_lines(report: CheckReport) -> list[str]:
    if not report.validation_changed:
        return [f"changed paths: {len(report.changed_paths)}, none of them validation code",
                *policy_line(report)]
    timing = report.timing
    counts = report.outcome_counts("head")  # the base's counts are in the health line
    lines = [f"analysed: the change {report.analysed_because}"] if report.analysed_because else []
    lines.append(f"head: {counts['accepted']} accepted, {counts['rejected']} rejected, "
                 f"{counts['error']} error")
    if report.errored_at_both:
        lines.append(f"{_plural(report.errored_at_both, 'suite')} errored at both revisions (not judged)")
    cached = " (matrix from cache)" if report.capture_cached else ""
    base_cached = " (from an earlier check)" if report.base_cached else ""
    minimal = f", minimal arguments {timing.minimize_s:.1f} s" if timing.minimize_s >= 0.05 else ""
    lines.append(f"timing: capture {timing.capture_s:.1f} s{cached}, base {timing.base_s:.1f} s"
                 f"{base_cached}, head {timing.head_s:.1f} s{minimal}, total {timing.total_s:.1f} s"
                 f"{' (both runs: the policy as written, then refined)' if report.refinement else ''}")
    return [*lines, *policy_line(report)]


def health_line(health: Health | None) -> str:
    """'health: 59 suites from 46 of 75 scripts (…); base accepts 57/59 (96.6%); most common base error…'."""
    if health is None:
        return "health: nothing was replayed, so there was nothing to see"
    if not health.errors:
        return f"health: {summary_line(health)}"
    common = health.errors[0]
    return (f"health: {summary_line(health)}; most common base error: {describe(common.example)} "
            f"({_plural(common.count, 'suite')})")


def health_text(health: Health | None) -> list[str]:
    """The health block of the terminal report: when blind, why, the base's errors and every suite."""
    lines = [health_line(health), *(notes(health) if health is not None else [])]
    if health is None or health.could_analyse:
        return lines
    lines.append(f"could not analyse: {health.reason}")
    lines += [f"  base error x{group.count}: {describe(group.example)}"
              for group in health.errors[:HEALTH_ERRORS]]
    if health.base_failures:
        lines.append(f"{_plural(len(health.base_failures), 'suite')} the base rejects or errors on:")
        lines += [f"  {failure.suite}: {describe(failure.outcome)}" for failure in health.base_failures]
    return lines


def health_markdown(health: Health, escape: Callable[[str], str]) -> str:
    """The "Could not analyse" section of a PR comment; ESCAPE makes untrusted text inert."""
    lines = ["#### Could not analyse", "", escape(health.reason[:1].upper() + health.reason[1:]) + ".", ""]
    lines += [f"- base error ×{group.count}: {escape(describe(group.example))}"
              for group in health.errors[:HEALTH_ERRORS]]
    if health.base_failures:
        lines += ["", f"Suites the base rejects or errors on ({len(health.base_failures)}):", ""]
        lines += [f"- {escape(failure.suite)}: {escape(describe(failure.outcome))}"
                  for failure in health.base_failures[:HEALTH_SUITES]]
        if len(health.base_failures) > HEALTH_SUITES:
            lines.append(f"- … and {len(health.base_failures) - HEALTH_SUITES} more")
    return "\n".join(lines)


def render_text(report: CheckReport) -> str:
    lines = [headline(report), ""]
    for finding in report.blocking:
        lines.append(f"[blocking] {finding.kind} {_where(finding)}".rstrip())
        lines.append(f"    {finding.message}")
        if (cause := because(finding)) is not None:
            lines.append(f"    {cause}")
        lines.append(f"    {_plural(len(finding.suites), 'suite')}:")
        lines += [f"      {suite}" for suite in finding.suites]
        if finding.scripts:
            lines.append(f"    scripts: {', '.join(finding.scripts)}")
    others = [f for f in report.findings if f.severity != "blocking"]
    if others:
        lines.append("")
    for finding in others:
        suites = f" ({_plural(len(finding.suites), 'suite')})" if finding.suites else ""
        where = f" {_where(finding)}" if finding.path else ""
        lines.append(f"[{finding.severity}] {finding.kind}{where}: {finding.message}{suites}")
    lines += ["", *health_text(report.health), "", *_summary_lines(report)]
    if report.refinement is not None:
        lines += ["", *refinement_text(report.refinement, report.policy)]
    if not report.sandboxed:
        lines += ["", f"!!! {UNSANDBOXED} !!!"]
    return "\n".join(lines) + "\n"


def _flat(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _md(text: str, limit: int = 300) -> str:
    """Untrusted text (assert messages come from the PR) made inert in markdown: no HTML, no mention."""
    escaped = html.escape(_flat(text, limit), quote=False)
    for char in "\\`*_[]|~":
        escaped = escaped.replace(char, "\\" + char)
    return escaped.replace("@", "@<!-- -->")


def _html(text: str, limit: int = 300) -> str:
    """The same inside an HTML block, where markdown escapes would show as backslashes."""
    return html.escape(_flat(text, limit), quote=False).replace("@", "@<!-- -->")


def _md_findings(findings: list[Finding]) -> list[str]:
    rows = ["| severity | finding | where | suites | message |", "| --- | --- | --- | --- | --- |"]
    for finding in findings[:MARKDOWN_FINDINGS]:
        rows.append(f"| {finding.severity} | {finding.kind} | {_md(_where(finding)) or '-'} | "
                    f"{len(finding.suites)} | {_md(finding.message)} |")
    if len(findings) > MARKDOWN_FINDINGS:
        rows.append(f"\n… and {len(findings) - MARKDOWN_FINDINGS} more findings (see `--format json`)")
    return rows


def _md_suites(finding: Finding) -> str:
    shown = finding.suites[:MARKDOWN_SUITES]
    lines = ["", f"<details><summary>{_html(finding.kind)} at {_html(_where(finding)) or '-'}: "
                 f"{_plural(len(finding.suites), 'suite')}</summary>", ""]
    if (cause := because(finding)) is not None:
        lines += [_md(cause, 2000), ""]
    lines += [f"- {_md(suite)}" for suite in shown]
    if len(finding.suites) > len(shown):
        lines.append(f"- … and {len(finding.suites) - len(shown)} more")
    return "\n".join([*lines, "", "</details>"])


def render_markdown(report: CheckReport) -> str:
    """The PR comment: headline, findings table, the suites of each blocking finding folded away.

    Stays under MARKDOWN_LIMIT characters: suite lists that do not fit are left out with a count.
    """
    mark = "⚠️" if not report.could_analyse else "❌" if report.blocking else "✅"
    blind = [health_markdown(report.health, _md), ""] \
        if report.health is not None and not report.health.could_analyse else []
    refined = [refinement_markdown(report.refinement, _md, report.policy), ""] \
        if report.refinement is not None else []
    top = "\n".join([f"### {mark} {_md(headline(report))}", "", *refined, *blind,
                     *(_md_findings(list(report.findings)) if report.findings else [])])
    lines = [health_line(report.health), *_summary_lines(report)]
    bottom = "\n".join(["", *(f"{_md(line)}  " for line in lines),
                        *(["", f"> **{_md(UNSANDBOXED)}**"] if not report.sandboxed else [])])
    budget = MARKDOWN_LIMIT - len(top) - len(bottom) - 200
    folded: list[str] = []
    listed = [f for f in report.blocking if f.suites]
    for finding in listed:
        block = _md_suites(finding)
        if len(block) > budget:
            break
        folded.append(block)
        budget -= len(block)
    if len(folded) < len(listed):
        folded.append(f"\n… the suites of {len(listed) - len(folded)} more blocking findings are left out "
                      "(see `--format json`)")
    return "\n".join([top, *folded, bottom]) + "\n"
