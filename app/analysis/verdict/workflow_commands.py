"""A check report as GitHub Actions workflow commands: one annotation per finding, on its file and line.

Everything printed passes through GitHub's escaping, plain lines too: messages, paths and suite names come
from the pull request, and an unescaped newline would let them start a workflow command of their own.
"""

from __future__ import annotations

import os

from app.analysis.core.model import Finding
from app.analysis.verdict.health import summary_line
from app.analysis.verdict.render import UNSANDBOXED, because, headline
from app.analysis.verdict.report import CheckReport

COMMAND_OF_SEVERITY = {"blocking": "error", "warning": "warning", "info": "notice"}
SUITES_NAMED = 5  # suites named in one annotation before "and N more"


def escape_data(text: str) -> str:
    """A command's message (GitHub's toolkit `escapeData`)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value (`escapeProperty`): also `:` and `,`, which end a property."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def plain(text: str) -> str:
    """A line that is no command: on one line, and never starting with `::`. GitHub unescapes `%25` only
    inside a command, so a plain line keeps its `%` (a health of `(100%)`, not `(100%25)`)."""
    flat = " ".join(text.split())
    return f"> {flat}" if flat.startswith("::") else flat


def command(name: str, message: str, **properties: str | int | None) -> str:
    """`::NAME k=v,k=v::MESSAGE`; properties that are None are left out."""
    given = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items()
                     if value is not None)
    return f"::{name}{' ' + given if given else ''}::{escape_data(message)}"


def _suites(finding: Finding) -> str:
    if not finding.suites:
        return ""
    named = ", ".join(finding.suites[:SUITES_NAMED])
    more = f" and {len(finding.suites) - SUITES_NAMED} more" if len(finding.suites) > SUITES_NAMED else ""
    word = "suite" if len(finding.suites) == 1 else "suites"
    return f" ({len(finding.suites)} CI {word}: {named}{more})"


def annotation(finding: Finding) -> str:
    """The finding on its line (or on no file when it has none): error, warning or notice by severity."""
    title = f"prtriage: {finding.kind}" + (" (in this diff)" if finding.path and finding.in_diff else "")
    cause = f"; {because(finding)}" if finding.minimal_args is not None else ""
    return command(COMMAND_OF_SEVERITY[finding.severity], finding.message + cause + _suites(finding),
                   file=finding.path, line=finding.line if finding.path else None, title=title)


def render_github(report: CheckReport) -> str:
    """The headline, a could-not-analyse error without a file, one annotation per finding, the health."""
    lines = [plain(headline(report))]
    if report.health is not None and not report.health.could_analyse:
        lines.append(command("error", f"could not analyse: {report.health.reason}",
                             title="prtriage: could not analyse"))
    lines += [annotation(finding) for finding in report.findings]
    if report.health is not None:
        lines.append(plain(f"health: {summary_line(report.health)}"))
    if report.policy is not None:
        lines.append(plain(f"policy: {report.policy.describe()}"))
    if not report.sandboxed:
        lines.append(command("warning", UNSANDBOXED, title="prtriage: not sandboxed"))
    return "\n".join(lines) + "\n"


def append_step_summary(markdown: str) -> None:
    """Append to the job's summary page when running in GitHub Actions (it sets GITHUB_STEP_SUMMARY)."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(markdown + "\n")
