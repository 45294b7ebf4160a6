"""Follow-ups in the triage output (app/triage/pr_text_findings.py): findings per policy level reach the
sticky comment and the check; a revert's comment says which risk window it closes and what it re-opens."""

from __future__ import annotations

import pytest

from app.analysis.core.policy import builtin_policy, load_policy
from app.analysis.verdict.report import CheckReport
from app.demo.localgithub import FakeGitHub
from app.github.reference_states import ResolutionCache
from app.service.services import Services
from app.store.session import session_scope
from app.triage.pr_report import check_output, comment_markdown, inert
from app.triage.pr_text_findings import pull_followups, revert_findings, with_findings

from .payloads import sha
from .test_windows import BASE, REPO, merge, merged_delivery

POLICY = load_policy(builtin_policy("acme", "widgets"))


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO, installation_id=1)
    return fake_github


def test_followup_findings_reach_the_comment_and_the_check(services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 812, head_sha=sha("p"), base_sha=BASE)
    fake.add_pull(REPO, 2204, head_sha=sha("f"), base_sha=BASE, state="closed")
    fake.add_pull(REPO, 30, head_sha=sha("head"), base_sha=BASE,
                  body="Depends on #812. Follow-up #2204 will add the fail-fast. See #5.")
    client = services.client(1)
    pull = client.get_pull("acme", "widgets", 30)

    _, findings = pull_followups(client, "acme", "widgets", pull, POLICY, api_url=fake.url,
                                 cache=ResolutionCache())

    assert [(f.kind, f.severity) for f in findings] == [("unmerged_prerequisite", "blocking"),
                                                        ("abandoned_followup", "warning")]
    report = with_findings(CheckReport(BASE, pull.head_sha, validation_changed=False), findings)
    assert findings[0].message.startswith("Prerequisite #812 is open, not merged yet")
    assert "#2204 was closed without being merged: the promise was abandoned" in findings[1].message
    comment = comment_markdown(report)
    assert all(inert(finding.message) in comment for finding in findings)
    assert check_output(report).conclusion == "failure"


def test_a_revert_says_which_window_it_closes_and_what_it_reopens(services: Services,
                                                                  fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("f"), base_sha=BASE, draft=True)
    merge(fake, 2170, body="Fixes #100. A follow-up PR #2204 will add the fail-fast at the real failure "
                           "point.")
    assert merged_delivery(services, fake, 2170).opened is not None
    fake.add_pull(REPO, 2180, head_sha=sha("revert"), base_sha=BASE,
                  title='Revert "Add the assert (#2170)"', body="Reverts acme/widgets#2170")
    client = services.client(1)
    references, _ = pull_followups(client, "acme", "widgets", client.get_pull("acme", "widgets", 2180),
                                   POLICY, api_url=fake.url, cache=ResolutionCache())

    with session_scope(services.sessions, read_only=True) as session:
        findings = revert_findings(session, references)

    assert [(f.kind, f.severity, f.message) for f in findings] == [
        ("revert_closes_window", "info", "Reverting #2170 fixes the risk it left open: merging this closes "
         "its risk window awaiting acme/widgets#2204 (draft) (“A follow-up PR #2204 will add the fail-fast "
         "at the real failure point.”)."),
        ("revert_reopens", "warning", "Reverting #2170 re-opens what it fixed: #100.")]
    comment = comment_markdown(with_findings(CheckReport(BASE, sha("revert"), validation_changed=False),
                                             findings))
    assert all(inert(finding.message) in comment for finding in findings)
