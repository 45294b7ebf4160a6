"""The follow-up part of a triage: findings for the PR's unmerged prerequisites and promised follow-ups (at
the policy's levels), and for a revert, what it re-opens (the reverted PR's fixes) or fixes (its open risk
windows). Added to the report's findings, so the sticky comment and the check say them like any other."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from sqlalchemy.orm import Session

from app.analysis.core.model import Finding
from app.analysis.core.policy import Policy
from app.analysis.followups.followup_findings import followup_findings, trim
from app.analysis.followups.followups import TextReference
from app.analysis.verdict.report import CheckReport
from app.github.client import GitHubClient
from app.github.github_models import PullInfo
from app.github.reference_states import ResolutionCache, resolve_references
from app.store.models import PullRequest, RiskWindow
from app.store.queries import closing_references, get_pull_request, windows_of_pull_request
from app.triage.risk_windows import read_references

RISK_CHARS = 160


def pull_followups(client: GitHubClient, owner: str, repo: str, pull: PullInfo, policy: Policy, *,
                   api_url: str, cache: ResolutionCache | None = None,
                   ) -> tuple[list[TextReference], list[Finding]]:
    """The PR's references and the findings of its unsettled prerequisites and follow-ups."""
    references = read_references(client, owner, repo, pull, api_url=api_url)
    resolutions = resolve_references(client, references, cache=cache)
    return references, followup_findings(references, resolutions, policy.followups)


def revert_findings(session: Session, references: Iterable[TextReference]) -> list[Finding]:
    """For each PR this one reverts (as far as the store knows it): the windows the revert closes when it
    merges, and the issues the reverted PR closed, which the revert re-opens in effect."""
    findings: list[Finding] = []
    for reference in references:
        if reference.kind != "revert" or reference.number is None:
            continue
        reverted = get_pull_request(session, repo=f"{reference.owner}/{reference.repo}",
                                    number=reference.number)
        if reverted is not None:
            findings += _of_reverted(session, reverted, reference.label)
    return findings


def _of_reverted(session: Session, reverted: PullRequest, label: str) -> list[Finding]:
    findings = []
    for window in windows_of_pull_request(session, pr_id=reverted.id):
        if window.state == "open":
            risk = f" (“{trim(window.risk, RISK_CHARS)}”)" if window.risk else ""
            findings.append(Finding(kind="revert_closes_window", severity="info",
                                    message=f"Reverting {label} fixes the risk it left open: merging this "
                                            f"closes its risk window{_awaiting(window)}{risk}."))
    fixed = sorted({f"#{r.target_number}" for r in closing_references(session, pr_id=reverted.id)})
    if fixed:
        findings.append(Finding(kind="revert_reopens", severity="warning",
                                message=f"Reverting {label} re-opens what it fixed: {', '.join(fixed)}."))
    return findings


def _awaiting(window: RiskWindow) -> str:
    if not window.awaiting:
        return ""
    return " awaiting " + ", ".join(f"{r.ref} ({r.state or 'unresolved'})" for r in window.awaiting)


def with_findings(report: CheckReport, findings: Sequence[Finding]) -> CheckReport:
    """REPORT with FINDINGS added after its own."""
    return dataclasses.replace(report, findings=(*report.findings, *findings)) if findings else report
