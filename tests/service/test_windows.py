"""Risk windows from merges (app/triage/risk_windows.py) against the fake GitHub over real HTTP, on SQLite and
PostgreSQL: the real `pull_request` closed+merged payload decides the job, the merged PR opens a window for
its unmerged follow-up, the follow-up's merge closes it, a revert closes the reverted PR's windows; nothing is
deleted."""

from __future__ import annotations

from typing import Any

import pytest

from app.demo.localgithub import FakeGitHub
from app.github.reference_states import ResolutionCache
from app.service.services import Services
from app.store.models import PullRequest, Reference, RiskWindow
from app.store.queries import (
    acknowledge_findings,
    close_window,
    finish_run,
    start_run,
    upsert_installation,
    upsert_pull_request,
    upsert_repository,
    window_with_events,
)
from app.store.session import session_scope
from app.triage import resync
from app.triage import risk_windows as windows
from app.webhooks import ROUTER
from app.webhooks.router import Job

from .payloads import pull_request_event, sha

REPO = "acme/widgets"
MERGED_AT = "2026-03-01T12:00:00Z"
HEAD, BASE = sha("head"), sha("base")


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO, installation_id=1)
    return fake_github


def merge(fake: FakeGitHub, number: int, **fields: Any) -> None:
    """Add PR NUMBER to the fake as merged (FIELDS: title, body, commits, merge_commit_sha …)."""
    fake.add_pull(REPO, number, head_sha=sha(f"head {number}"), base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT, **fields)


def merged_delivery(services: Services, fake: FakeGitHub, number: int) -> windows.MergeOutcome:
    """The shared closed+merged payload through the router, then what its job does with a merged PR."""
    payload = pull_request_event(fake, "closed", variant="merged", full_name=REPO, number=number,
                                 head_sha=sha(f"head {number}"), base_sha=BASE)
    job = ROUTER.decide("pull_request", payload)
    assert isinstance(job, Job) and job.data["merged"] is True
    owner, name = job.data["repository"]["full_name"].split("/")
    client = services.client(1)
    pull = client.get_pull(owner, name, int(job.data["number"]))
    pr_id = store_pull(services, job.data["repository"], pull)
    return windows.handle_merge(services, client, pr_id=pr_id, owner=owner, repo=name, pull=pull,
                                actor=payload["sender"]["login"], cache=ResolutionCache())


def store_pull(services: Services, repository: dict[str, Any], pull: Any) -> int:
    with services.writing() as session:
        upsert_installation(session, installation_id=1, account_login="acme")
        upsert_repository(session, repository_id=int(repository["id"]), full_name=repository["full_name"],
                          private=False, installation_id=1)
        return upsert_pull_request(
            session, repository_id=int(repository["id"]), number=pull.number, title=pull.title,
            author=pull.author, url=pull.url, head_sha=pull.head_sha, base_sha=pull.base_sha,
            base_ref=pull.base_ref, state="closed" if pull.state != "open" else "open",
            merged_at=pull.merged_at).id


def timeline(services: Services, window_id: int) -> dict[str, Any]:
    with session_scope(services.sessions, read_only=True) as session:
        detail = window_with_events(session, window_id=window_id)
        assert detail is not None
        return detail


def all_windows(services: Services) -> list[tuple[int, str, str | None]]:
    with session_scope(services.sessions, read_only=True) as session:
        rows = session.query(RiskWindow).order_by(RiskWindow.id).all()
        return [(row.id, row.state, row.close_reason) for row in rows]


INCIDENT_BODY = ("Reverts the over-broad assertion.\n\n"
                 "A follow-up PR #2204 will add a fail-fast at the real failure point instead.")


def test_a_merge_with_an_unmerged_followup_opens_a_window_which_its_merge_closes(
        services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("followup"), base_sha=BASE, draft=True)
    merge(fake, 2170, title="Drop the over-broad assert", body=INCIDENT_BODY)

    opened = merged_delivery(services, fake, 2170)

    assert opened.opened is not None and opened.closed == []
    detail = timeline(services, opened.opened)
    assert detail["state"] == "open"
    assert detail["risk"] == "A follow-up PR #2204 will add a fail-fast at the real failure point instead."
    assert [(a["ref"], a["kind"], a["state"]) for a in detail["awaiting"]] == [
        (f"{REPO}#2204", "followup", "draft")]
    assert [e["what"] for e in detail["events"]] == [f"opened, awaiting {REPO}#2204 (followup)"]

    merge(fake, 2204, title="Fail fast on the bad combination")
    landed = merged_delivery(services, fake, 2204)

    assert landed.closed == [opened.opened] and landed.opened is None
    detail = timeline(services, opened.opened)
    assert (detail["state"], detail["close_reason"]) == ("closed", "follow-up #2204 merged")
    assert [e["what"] for e in detail["events"]] == [
        f"opened, awaiting {REPO}#2204 (followup)", f"{REPO}#2204 is now merged",
        "closed: follow-up #2204 merged"]
    assert {e["actor"] for e in detail["events"][1:]} == {"FakeUser1"}  # the sender of the merge


def test_a_redelivered_merge_changes_nothing(services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("followup"), base_sha=BASE)
    merge(fake, 2170, body=INCIDENT_BODY)
    first = merged_delivery(services, fake, 2170)
    assert first.opened is not None
    again = merged_delivery(services, fake, 2170)
    assert again.opened == first.opened
    assert len(timeline(services, first.opened)["events"]) == 1


def test_settled_followups_and_plain_mentions_open_no_window(services: Services, fake: FakeGitHub) -> None:
    merge(fake, 2204)
    fake.add_pull(REPO, 300, head_sha=sha("mentioned"), base_sha=BASE)
    merge(fake, 2170, body="Follow-up #2204 will add the fail-fast. See #300 for the discussion.")
    assert merged_delivery(services, fake, 2170) == windows.MergeOutcome()
    assert all_windows(services) == []


def test_an_unmerged_prerequisite_in_a_commit_message_opens_a_window(services: Services,
                                                                     fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 812, head_sha=sha("prerequisite"), base_sha=BASE, state="closed")
    merge(fake, 2170, commits=[(sha("c1"), "Add the check\n\nDepends on #812.")])
    outcome = merged_delivery(services, fake, 2170)
    assert outcome.opened is not None
    detail = timeline(services, outcome.opened)
    assert [(a["ref"], a["kind"], a["state"]) for a in detail["awaiting"]] == [
        (f"{REPO}#812", "prerequisite", "closed_unmerged")]
    assert detail["risk"] == "Depends on #812."


def test_merging_with_a_blocking_finding_opens_a_window_that_says_who_acknowledged_it(
        services: Services, fake: FakeGitHub) -> None:
    merge(fake, 2170, title="Add one assert")
    pull = services.client(1).get_pull("acme", "widgets", 2170)
    repo = fake.repo(REPO)
    assert repo is not None
    pr_id = store_pull(services, {"id": repo.id, "full_name": REPO}, pull)
    finding = {"kind": "suite_rejected", "severity": "blocking", "message": "5 LoRA suites are rejected",
               "suites": [], "scripts": []}
    with services.writing() as session:
        run = start_run(session, pr=pr_id, head_sha=pull.head_sha, base_sha=BASE).run
        finish_run(session, run_id=run.id, conclusion="failure", summary={}, suites=[], findings=[finding])
        acknowledge_findings(session, run_id=run.id, actor="maintainer", reason="GPU CI will tell")

    outcome = merged_delivery(services, fake, 2170)

    assert outcome.opened is not None
    detail = timeline(services, outcome.opened)
    assert detail["risk"] == "5 LoRA suites are rejected" and detail["awaiting"] == []
    assert [e["what"] for e in detail["events"]] == [
        "opened", "merged while its check reported 1 blocking finding (acknowledged by maintainer: GPU CI "
                  "will tell)"]


@pytest.mark.parametrize("body", [f"Reverts {REPO}#2170", "This reverts commit {sha}."])
def test_a_merged_revert_closes_the_reverted_prs_windows(services: Services, fake: FakeGitHub,
                                                         body: str) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("followup"), base_sha=BASE)
    merge(fake, 2170, body=INCIDENT_BODY, merge_commit_sha=sha("merge of 2170"))
    opened = merged_delivery(services, fake, 2170).opened
    assert opened is not None

    merge(fake, 2180, title='Revert "Drop the over-broad assert (#2170)"',
          body=body.format(sha=sha("merge of 2170")))
    outcome = merged_delivery(services, fake, 2180)

    assert outcome.closed == [opened]
    assert all_windows(services) == [(opened, "closed", "reverted by #2180")]
    with session_scope(services.sessions, read_only=True) as session:
        assert session.query(PullRequest).count() == 2  # the reverted PR and its revert, nothing deleted


def test_a_window_awaiting_two_stays_open_until_both_merged(services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("a"), base_sha=BASE)
    fake.add_pull("acme/base-lib", 9, head_sha=sha("b"), base_sha=BASE)
    merge(fake, 2170, body="Follow-up #2204 will add the fail-fast. Depends on acme/base-lib#9.")
    opened = merged_delivery(services, fake, 2170).opened
    assert opened is not None
    merge(fake, 2204)
    assert merged_delivery(services, fake, 2204).closed == []
    detail = timeline(services, opened)
    assert detail["state"] == "open"
    assert detail["events"][-1]["what"] == "follow-up #2204 merged; still awaiting acme/base-lib#9"


def test_the_resync_records_changes_and_closes_windows_whose_merge_webhook_was_lost(
        services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("a"), base_sha=BASE, draft=True)
    fake.add_pull(REPO, 2205, head_sha=sha("b"), base_sha=BASE)
    merge(fake, 2170, body="Follow-up #2204 will add the fail-fast.")
    merge(fake, 2171, body="Follow-up #2205 will add the tests.")
    first = merged_delivery(services, fake, 2170).opened
    second = merged_delivery(services, fake, 2171).opened
    assert first is not None and second is not None

    nothing = resync.resync(services)
    assert (nothing.checked, nothing.changed, nothing.closed) == (2, [], [])

    merge(fake, 2204)  # merged on GitHub; its webhook never arrives
    fake.add_pull(REPO, 2205, head_sha=sha("b"), base_sha=BASE, state="closed")  # abandoned
    fake.fail_next(1, status=422, path=r"/repos/acme/widgets/issues/2205")
    flaky = resync.resync(services)
    assert (flaky.closed, flaky.failed) == ([first], 1)
    assert all_windows(services) == [(first, "closed", f"{REPO}#2204 landed (found by the periodic resync)"),
                                     (second, "open", None)]
    assert [e["what"] for e in timeline(services, first)["events"]][1:] == [
        f"{REPO}#2204 is now merged", f"closed: {REPO}#2204 landed (found by the periodic resync)"]

    later = resync.resync(services)
    assert (later.checked, later.closed, later.failed) == (1, [], 0)
    assert timeline(services, second)["events"][-1]["what"] == f"{REPO}#2205 is now closed_unmerged"


# --- issue 27: each way a merge opens, adds to or closes a window, and what the timeline says -----------

def merged_in(services: Services, fake: FakeGitHub, full_name: str, number: int) -> windows.MergeOutcome:
    """PR FULL_NAME#NUMBER (already merged on the fake) stored and its merge handled, as its job does."""
    repo = fake.repo(full_name)
    assert repo is not None
    owner, name = full_name.split("/")
    client = services.client(1)
    pull = client.get_pull(owner, name, number)
    pr_id = store_pull(services, {"id": repo.id, "full_name": full_name}, pull)
    return windows.handle_merge(services, client, pr_id=pr_id, owner=owner, repo=name, pull=pull,
                                cache=ResolutionCache())


def test_a_prerequisites_merge_closes_the_window_naming_its_role(services: Services,
                                                                  fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 812, head_sha=sha("prerequisite"), base_sha=BASE)
    merge(fake, 2170, body="Depends on #812.")
    opened = merged_delivery(services, fake, 2170).opened
    assert opened is not None
    merge(fake, 812)
    assert merged_delivery(services, fake, 812) == windows.MergeOutcome(closed=[opened])
    detail = timeline(services, opened)
    assert (detail["state"], detail["close_reason"]) == ("closed", "prerequisite #812 merged")
    assert [a["state"] for a in detail["awaiting"]] == ["merged"]


def test_a_follow_up_in_another_repository_is_named_in_full_when_it_merges(services: Services,
                                                                           fake: FakeGitHub) -> None:
    other = "acme/base-lib"
    fake.add_repo(other, installation_id=1)
    fake.add_pull(other, 9, head_sha=sha("b"), base_sha=BASE)
    merge(fake, 2170, body=f"Follow-up {other}#9 will add the fail-fast.")
    opened = merged_delivery(services, fake, 2170).opened
    assert opened is not None
    fake.add_pull(other, 9, head_sha=sha("b"), base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT)
    assert merged_in(services, fake, other, 9).closed == [opened]
    assert timeline(services, opened)["close_reason"] == f"follow-up {other}#9 merged"


def test_a_revert_from_another_repository_is_named_in_full(services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("followup"), base_sha=BASE)
    merge(fake, 2170, body=INCIDENT_BODY)
    opened = merged_delivery(services, fake, 2170).opened
    assert opened is not None
    fork = "acme/widgets-release"
    fake.add_repo(fork, installation_id=1)
    fake.add_pull(fork, 5, head_sha=sha("revert"), base_sha=BASE, state="closed", merged=True,
                  merged_at=MERGED_AT, body=f"Reverts {REPO}#2170")
    assert merged_in(services, fake, fork, 5).closed == [opened]
    assert all_windows(services) == [(opened, "closed", f"reverted by {fork}#5")]


def test_a_revert_leaves_closed_windows_and_unknown_prs_alone(services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("followup"), base_sha=BASE)
    merge(fake, 2170, body=INCIDENT_BODY)
    opened = merged_delivery(services, fake, 2170).opened
    assert opened is not None
    with services.writing() as session:
        close_window(session, window_id=opened, actor="maintainer", reason="not a risk after all")
    merge(fake, 2180, body=f"Reverts {REPO}#2170. Also reverts {REPO}#1999, never seen here.")
    assert merged_delivery(services, fake, 2180) == windows.MergeOutcome()
    assert all_windows(services) == [(opened, "closed", "not a risk after all")]


def test_a_redelivered_merge_does_not_reopen_a_window_a_maintainer_closed(services: Services,
                                                                         fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("followup"), base_sha=BASE)
    merge(fake, 2170, body=INCIDENT_BODY)
    opened = merged_delivery(services, fake, 2170).opened
    assert opened is not None
    with services.writing() as session:
        close_window(session, window_id=opened, actor="maintainer", reason="tracked elsewhere")
    assert merged_delivery(services, fake, 2170) == windows.MergeOutcome()
    assert all_windows(services) == [(opened, "closed", "tracked elsewhere")]
    assert [e["what"] for e in timeline(services, opened)["events"]][-1] == "closed: tracked elsewhere"


def finish_with(services: Services, fake: FakeGitHub, number: int,
                findings: list[tuple[str, str]]) -> None:
    """PR NUMBER stored with a finished triage holding FINDINGS ((severity, message) each)."""
    pull = services.client(1).get_pull("acme", "widgets", number)
    repo = fake.repo(REPO)
    assert repo is not None
    pr_id = store_pull(services, {"id": repo.id, "full_name": REPO}, pull)
    rows = [{"kind": "suite_rejected", "severity": severity, "message": message, "suites": [], "scripts": []}
            for severity, message in findings]
    with services.writing() as session:
        run = start_run(session, pr=pr_id, head_sha=pull.head_sha, base_sha=BASE).run
        finish_run(session, run_id=run.id, conclusion="failure", summary={}, suites=[], findings=rows)


def test_merging_with_two_blocking_findings_unacknowledged(services: Services, fake: FakeGitHub) -> None:
    merge(fake, 2170)
    long_message = "x" * 201  # one past what a risk holds
    finish_with(services, fake, 2170, [("warning", "a warning first"), ("blocking", long_message),
                                       ("blocking", "a second one")])
    outcome = merged_delivery(services, fake, 2170)
    assert outcome.opened is not None
    detail = timeline(services, outcome.opened)
    assert detail["risk"] == "x" * 199 + "…"
    assert [e["what"] for e in detail["events"]] == [
        "opened", "merged while its check reported 2 blocking findings"]


def test_merging_with_only_warnings_opens_no_window(services: Services, fake: FakeGitHub) -> None:
    merge(fake, 2170)
    finish_with(services, fake, 2170, [("warning", "a warning")])
    assert merged_delivery(services, fake, 2170) == windows.MergeOutcome()
    assert all_windows(services) == []


def test_a_follow_up_promised_in_the_diff_opens_a_window(services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("followup"), base_sha=BASE)
    patch = "@@ -1,1 +1,2 @@\n x = 1\n+# TODO(#2204): fail fast here once the follow-up lands\n"
    merge(fake, 2170, files=[{"filename": "train.py", "status": "modified", "patch": patch},
                             {"filename": "weights.bin", "status": "modified"}])
    outcome = merged_delivery(services, fake, 2170)
    assert outcome.opened is not None
    assert [a["ref"] for a in timeline(services, outcome.opened)["awaiting"]] == [f"{REPO}#2204"]


def test_the_references_a_merge_stores(services: Services, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("followup"), base_sha=BASE)
    fake.add_issue(REPO, 55)
    merge(fake, 2170, body="Closes #55. Follow-up #2204 will add the fail-fast. See #300.")
    merged_delivery(services, fake, 2170)
    with session_scope(services.sessions, read_only=True) as session:
        rows = session.query(Reference).order_by(Reference.target_number).all()
        stored = [(r.target_number, r.kind, r.state) for r in rows]
    assert stored == [(55, "closes", None), (2204, "followup", "open")]


def test_a_window_closes_when_its_last_pr_merges_after_its_issue_was_completed(services: Services,
                                                                              fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 2204, head_sha=sha("a"), base_sha=BASE)
    fake.add_issue(REPO, 55)
    merge(fake, 2170, body="Follow-up #2204 will add the fail-fast. Depends on #55.")
    opened = merged_delivery(services, fake, 2170).opened
    assert opened is not None
    assert sorted(a["ref"] for a in timeline(services, opened)["awaiting"]) == [f"{REPO}#2204", f"{REPO}#55"]
    fake.add_issue(REPO, 55, state="closed", state_reason="completed")
    resync.resync(services)  # records the issue as completed; the window still awaits #2204
    assert timeline(services, opened)["state"] == "open"
    merge(fake, 2204)
    assert merged_delivery(services, fake, 2204).closed == [opened]
    assert timeline(services, opened)["close_reason"] == "follow-up #2204 merged"
