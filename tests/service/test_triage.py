"""The triage job against the fake GitHub: policy from the base only, the file-list fast path, superseded
heads, one PR at a time, failures that complete the check as action_required, forks, re-runs and closes.

Jobs run when the test drains the queue (or calls the pipeline), so each step is observed in order."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from twin import build_miles_twin
from twin.expected import ALL_SUITES
from twin.variants import ARGUMENTS

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.github import GitHubApp, RetryPolicy
from app.service.services import Services
from app.store.queries import get_pull_request
from app.store.session import session_scope
from app.triage import pipeline
from app.triage.pr_report import COMMENT_MARKER, RERUN_ACTION

from .conftest import BASE, INCIDENT, MILES, Service, make_service, serve_twin_policy, wait_for
from .payloads import check_run_event, pull_request_event, sha

POLICY = Path(__file__).resolve().parents[2] / "tests" / "twin" / "policy.yml"
RERUN = {"label": "Re-run triage", "description": "Triage this pull request again",
         "identifier": RERUN_ACTION}
WEAKENED = ('version: 1\nvalidation:\n  paths: ["nothing/at/all"]\n'
            '  entry: "miles.utils.arguments:parse_args"\n')


def deliver(service: Service, fake: FakeGitHub, action: str, number: int, head: str, base: str = BASE) -> str:
    guid = str(uuid.uuid4())
    payload = pull_request_event(fake, action, full_name=MILES, number=number, head_sha=head, base_sha=base)
    assert service.post("pull_request", payload, guid=guid).status_code == 202
    return guid


def copy_tree(source: Path, dest: Path, *, edits: dict[str, str] | None = None) -> Path:
    shutil.copytree(source, dest)
    for path, text in (edits or {}).items():
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_text(text)
    return dest


def test_a_pull_request_that_edits_the_policy_cannot_change_its_own_verdict(
        service: Service, miles: FakeGitHub, twin_trees: dict[str, Path], tmp_path: Path) -> None:
    fake, policy_path = miles, pipeline.REPO_POLICY
    base, head = sha("base with its own policy"), sha("head that weakens the policy")
    strict = POLICY.read_text()
    fake.add_tarball(MILES, base, copy_tree(twin_trees["base"], tmp_path / "b", edits={policy_path: strict}))
    fake.add_tarball(MILES, head, copy_tree(twin_trees["incident"], tmp_path / "h",
                                            edits={policy_path: WEAKENED}))
    fake.set_file(MILES, base, policy_path, strict)
    fake.set_file(MILES, head, policy_path, WEAKENED)
    fake.add_pull(MILES, 11, head_sha=head, base_sha=base, files=[ARGUMENTS, policy_path])
    deliver(service, fake, "opened", 11, head, base)
    service.drain()
    [check] = fake.check_runs(MILES)
    assert check.conclusion == "failure"
    asked = [call.query.get("ref") for call in fake.calls("GET", rf"/repos/{MILES}/contents/.*")]
    assert asked == [base]  # the policy is read at the base sha, never at the head
    assert "policy: .github/pr-triage.yml at the base" in check.output["summary"]
    [comment] = fake.comments_on(MILES, 11)
    assert "policy: .github/pr-triage.yml at the base" in comment.body


def test_a_pull_request_touching_no_validation_path_is_judged_from_its_file_list(
        service: Service, miles: FakeGitHub) -> None:
    fake, head = miles, sha("docs only")
    fake.add_pull(MILES, 12, head_sha=head, base_sha=BASE, files=["README.md", "docs/usage.md"])
    someone_elses = fake.add_comment(MILES, 12, f"copied marker {COMMENT_MARKER}", author="mallory")
    deliver(service, fake, "opened", 12, head)
    service.drain()
    [check] = fake.check_runs(MILES)
    assert (check.status, check.conclusion, check.output["title"]) == (
        "completed", "success", "No validation code changed")
    assert check.output["summary"].endswith("<br>policy: .github/pr-triage.yml at the base</sub>")
    assert fake.calls("GET", rf"/repos/{MILES}/tarball/.*") == []  # no download, no sandbox
    assert fake.calls("POST", rf"/repos/{MILES}/issues/12/comments") == []  # no comment
    assert [c.id for c in fake.comments_on(MILES, 12)] == [someone_elses]
    [run] = service.runs()
    assert (run.status, run.conclusion) == ("completed", "success")


def test_a_sticky_comment_left_from_an_earlier_head_is_edited_to_say_it_is_clear_now(
        service: Service, miles: FakeGitHub) -> None:
    fake, head = miles, sha("docs only, later")
    fake.add_pull(MILES, 13, head_sha=head, base_sha=BASE, files=["README.md"])
    earlier = f"**❌ This pull request breaks 5 existing CI suites.**\n\n{COMMENT_MARKER}"
    ours = fake.add_comment(MILES, 13, earlier, author=fake.bot_login, bot=True)
    deliver(service, fake, "synchronize", 13, head)
    service.drain()
    [comment] = fake.comments_on(MILES, 13)
    assert comment.id == ours
    assert comment.body.splitlines()[0] == "**✅ This pull request breaks no existing CI suite: clear now.**"
    patches = fake.calls("PATCH", rf"/repos/{MILES}/issues/comments/{ours}")
    deliver(service, fake, "reopened", 13, head)  # the same verdict again: the comment is not re-sent
    service.drain()
    assert fake.calls("PATCH", rf"/repos/{MILES}/issues/comments/{ours}") == patches


def test_a_newer_push_supersedes_a_running_triage_whose_late_result_is_never_posted(
        service: Service, miles: FakeGitHub, twin_trees: dict[str, Path], tmp_path: Path) -> None:
    fake, newer = miles, sha("incident head, pushed again")
    fake.add_tarball(MILES, newer, copy_tree(twin_trees["incident"], tmp_path / "again",
                                             edits={"NOTES.md": "pushed again\n"}))
    fake.add_pull(MILES, 14, head_sha=INCIDENT, base_sha=BASE, files=[ARGUMENTS])
    [older_run] = pipeline.process_delivery(service.services, deliver(service, fake, "opened", 14, INCIDENT))
    running = threading.Thread(target=pipeline.triage_run, args=(service.services, older_run))
    running.start()
    try:
        [older_check] = wait_for(lambda: fake.check_runs(MILES), what="the first check run")
        wait_for(lambda: service.runs()[0].status == "running", what="the first run to be running")
        fake.add_pull(MILES, 14, head_sha=newer, base_sha=BASE, files=[ARGUMENTS, "NOTES.md"])
        guid = deliver(service, fake, "synchronize", 14, newer)
        [newer_run] = pipeline.process_delivery(service.services, guid)
        assert (older_check.status, older_check.conclusion) == ("completed", "cancelled")
        assert older_check.output["summary"] == f"superseded by {newer}"
        with pytest.raises(pipeline.PullRequestBusy):  # one worker per pull request
            pipeline.triage_run(service.services, newer_run)
    finally:
        running.join(120)
    assert fake.comments_on(MILES, 14) == []  # the old head's late result was not posted
    assert older_check.conclusion == "cancelled"
    pipeline.triage_run(service.services, newer_run)
    [comment] = fake.comments_on(MILES, 14)
    assert f"head `{newer[:7]}`" in comment.body
    assert [(r.head_sha, r.status, r.superseded_by) for r in service.runs()] == [
        (INCIDENT, "superseded", newer), (newer, "completed", None)]


def test_a_push_before_the_first_triage_started_leaves_one_run(service: Service, miles: FakeGitHub) -> None:
    fake, first, second = miles, sha("docs one"), sha("docs two")
    fake.add_pull(MILES, 15, head_sha=first, base_sha=BASE, files=["README.md"])
    deliver(service, fake, "opened", 15, first)
    fake.add_pull(MILES, 15, head_sha=second, base_sha=BASE, files=["README.md"])
    deliver(service, fake, "synchronize", 15, second)
    service.drain()
    # both deliveries saw the PR at its latest head: one run, one check run
    assert [(r.head_sha, r.status) for r in service.runs()] == [(second, "completed")]
    assert [c.head_sha for c in fake.check_runs(MILES)] == [second]


@pytest.mark.parametrize(("break_it", "reason"), [
    ("tarball", "GitHub did not answer as expected"),
    ("policy", "invalid policy"),
])
def test_a_triage_that_cannot_run_completes_its_check_as_action_required_with_the_reason(
        service: Service, miles: FakeGitHub, break_it: str, reason: str) -> None:
    fake, head = miles, sha(f"head whose {break_it} is broken")
    if break_it == "policy":
        fake.set_file(MILES, BASE, pipeline.REPO_POLICY, "version: 1\nvalidation: [not, a, mapping]\n")
        fake.set_tarball(MILES, head, fake.repo(MILES).tarballs[INCIDENT])  # type: ignore[union-attr]
    fake.add_pull(MILES, 16, head_sha=head, base_sha=BASE, files=[ARGUMENTS])
    deliver(service, fake, "opened", 16, head)
    service.drain()
    [check] = fake.check_runs(MILES)
    assert (check.status, check.conclusion, check.output["title"]) == (
        "completed", "action_required", "Triage could not run")
    assert reason in check.output["summary"]
    assert check.actions == [RERUN]
    [run] = service.runs()
    assert run.status == "failed" and run.error is not None and reason in run.error
    assert fake.comments_on(MILES, 16) == []


def test_without_a_sandbox_the_check_completes_action_required_never_neutral(
        service: Service, miles: FakeGitHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # what a container started without the sandbox's security options amounts to (Dockerfile, compose.yaml)
    monkeypatch.setenv("PRTRIAGE_BWRAP", str(tmp_path / "no-bwrap-here"))
    miles.add_pull(MILES, 18, head_sha=INCIDENT, base_sha=BASE, files=[ARGUMENTS])
    deliver(service, miles, "opened", 18, INCIDENT)
    service.drain()
    [check] = miles.check_runs(MILES)
    assert (check.status, check.conclusion, check.output["title"]) == (
        "completed", "action_required", "Triage could not run")
    assert "bubblewrap not found" in check.output["summary"]
    assert [(run.status, run.conclusion) for run in service.runs()] == [("failed", "action_required")]


def test_an_analysis_environment_that_cannot_be_built_completes_the_check_action_required(
        service: Service, miles: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The base's policy asks for a package no index has: the check run says it is preparing the
    environment, then completes action_required naming the policy key and pip's reason."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip looks in an empty directory only: it fails at once
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    fake, head = miles, sha("head on a base whose environment cannot be built")
    policy = POLICY.read_text().replace("  requirements: [", "  requirements: [prtriage-absent-package==1, ")
    assert policy != POLICY.read_text()
    fake.set_file(MILES, BASE, pipeline.REPO_POLICY, policy)
    fake.set_tarball(MILES, head, fake.repo(MILES).tarballs[INCIDENT])  # type: ignore[union-attr]
    fake.add_pull(MILES, 17, head_sha=head, base_sha=BASE, files=[ARGUMENTS])
    deliver(service, fake, "opened", 17, head)
    service.drain()
    [check] = fake.check_runs(MILES)
    assert (check.status, check.conclusion, check.actions) == ("completed", "action_required", [RERUN])
    assert "harness.requirements: pip could not install the analysis environment" in check.output["summary"]
    assert "prtriage-absent-package==1" in check.output["summary"]
    notes = [call.body["output"]["title"] for call in fake.calls("PATCH", rf"/repos/{MILES}/check-runs/\d+")
             if call.body.get("status") == "in_progress"]
    assert notes == ["Preparing the analysis environment"]


def test_a_blind_analysis_completes_its_check_action_required_with_the_reason_and_the_rerun_button(
        service: Service, miles: FakeGitHub, tmp_path: Path) -> None:
    fake, base, head = miles, sha("base reading a CI-host file"), sha("head under harness noise")
    # every suite dies at base on a file only CI hosts have: the analysis sees none of them
    fake.add_tarball(MILES, base, build_miles_twin(tmp_path / "b", variant="harness_noise-base"))
    serve_twin_policy(fake, base)
    fake.add_tarball(MILES, head, build_miles_twin(tmp_path / "h", variant="harness_noise"))
    fake.add_pull(MILES, 31, head_sha=head, base_sha=base, files=[ARGUMENTS])
    deliver(service, fake, "opened", 31, head, base)
    service.drain()
    [check] = fake.check_runs(MILES)
    assert (check.status, check.conclusion, check.actions) == ("completed", "action_required", [RERUN])
    every = len(ALL_SUITES)
    title = f"Could not analyse: the base revision rejects or errors on {every} of {every} CI suites (100%"
    assert check.output["title"].startswith(title + ", more than the policy's 10%)")
    summary = check.output["summary"]
    assert "#### Could not analyse" in summary and f"base error ×{every}: FileNotFoundError" in summary
    assert f"base accepts 0/{every} (0%), rejects {every}, errors 0" in summary
    [comment] = fake.comments_on(MILES, 31)
    assert comment.body.startswith("**⚠️ Could not analyse this pull request")
    assert "#### Could not analyse" in comment.body
    [run] = service.runs()
    assert (run.status, run.conclusion) == ("completed", "action_required")
    assert run.summary is not None and run.summary["health"]["could_analyse"] is False


def test_a_head_whose_tarball_leaves_out_a_validation_file_of_the_commit_completes_action_required(
        service: Service, miles: FakeGitHub, twin_trees: dict[str, Path], tmp_path: Path) -> None:
    """`export-ignore` in the head's .gitattributes: GitHub's tarball lacks a file the checkout has (the one
    holding the new check, imported under `try/except ImportError`). Never analysed as if it were absent."""
    fake, head = miles, sha("head hiding its check from the tarball")
    hidden = "miles/utils/strict_checks.py"
    commit = copy_tree(twin_trees["incident"], tmp_path / "commit",
                       edits={hidden: "def check(args):\n    assert not args.colocate\n",
                              ".gitattributes": f"{hidden} export-ignore\n"})
    archived = copy_tree(commit, tmp_path / "archived")
    (archived / hidden).unlink()
    fake.add_tarball(MILES, head, archived)
    fake.set_tree(MILES, head, commit)
    fake.add_pull(MILES, 34, head_sha=head, base_sha=BASE, files=[ARGUMENTS, hidden, ".gitattributes"])
    deliver(service, fake, "opened", 34, head)
    service.drain()
    [check] = fake.check_runs(MILES)
    assert (check.status, check.conclusion, check.actions) == ("completed", "action_required", [RERUN])
    assert "the archive is not the commit's tree" in check.output["summary"]
    assert f"{hidden.replace('_', chr(92) + '_')} is missing" in check.output["summary"]  # as markdown


def test_an_internal_error_completes_the_check_action_required_with_the_rerun_button(
        service: Service, miles: FakeGitHub) -> None:
    fake, head = miles, sha("head whose base GitHub names badly")
    # a base that is no commit sha fails a check of our own code: an internal error, not a verdict
    fake.add_pull(MILES, 33, head_sha=head, base_sha="not-a-sha", files=[ARGUMENTS])
    deliver(service, fake, "opened", 33, head, "not-a-sha")
    service.drain()
    [check] = fake.check_runs(MILES)
    assert (check.status, check.conclusion, check.actions) == ("completed", "action_required", [RERUN])
    assert check.output["title"] == "Triage could not run"
    assert "internal error (ValueError)" in check.output["summary"]
    [run] = service.runs()
    assert (run.status, run.conclusion) == ("failed", "action_required")


def test_a_fork_pull_request_is_analysed_the_same_way(service: Service, miles: FakeGitHub) -> None:
    fake = miles
    fake.add_pull(MILES, 17, head_sha=INCIDENT, base_sha=BASE, files=[ARGUMENTS],
                  head_repo="contributor/miles")
    payload = pull_request_event(fake, "reopened", full_name=MILES, number=17, head_sha=INCIDENT,
                                 base_sha=BASE, variant="from-fork")
    assert payload["pull_request"]["head"]["repo"]["full_name"] != MILES
    assert service.post("pull_request", payload).status_code == 202
    service.drain()
    [check] = fake.check_runs(MILES)
    assert check.conclusion == "failure"
    [comment] = fake.comments_on(MILES, 17)
    assert comment.body.startswith("**❌ This pull request breaks 5 existing CI suites.**")


def test_rerequesting_our_check_run_triages_the_head_again(service: Service, miles: FakeGitHub) -> None:
    fake, head = miles, sha("docs, rerun")
    fake.add_pull(MILES, 18, head_sha=head, base_sha=BASE, files=["README.md"])
    deliver(service, fake, "opened", 18, head)
    service.drain()
    [check] = fake.check_runs(MILES)
    for number in (18, None):  # a fork's check run lists no pull request: the run row names it
        event = check_run_event(fake, "rerequested", full_name=MILES, check_run_id=check.id, head_sha=head,
                                number=number)
        assert service.post("check_run", event).status_code == 202
        service.drain()
    assert [r.head_sha for r in service.runs()] == [head] * 3
    assert len(fake.check_runs(MILES)) == 3
    stranger = check_run_event(fake, "rerequested", full_name=MILES, check_run_id=424242, head_sha=head,
                               number=18)
    assert service.post("check_run", stranger).status_code == 202
    service.drain()
    assert service.deliveries()[-1].status == "ignored"  # not a check run of ours
    assert len(service.runs()) == 3


def test_the_completed_check_run_offers_a_rerun_button_and_a_click_triages_again(
        service: Service, miles: FakeGitHub) -> None:
    fake, head = miles, sha("docs, rerun button")
    fake.add_pull(MILES, 23, head_sha=head, base_sha=BASE, files=["README.md"])
    deliver(service, fake, "opened", 23, head)
    service.drain()
    [check] = fake.check_runs(MILES)
    button = {"label": "Re-run triage", "description": "Triage this pull request again",
              "identifier": RERUN_ACTION}
    assert (check.status, check.actions) == ("completed", [button])
    [completion] = [request for request in fake.calls("PATCH", rf"/repos/{MILES}/check-runs/{check.id}")
                    if "actions" in request.body]
    assert completion.schema_errors == [] and completion.body["status"] == "completed"

    clicked = check_run_event(fake, "requested_action", full_name=MILES, check_run_id=check.id, head_sha=head,
                              number=23)
    assert clicked["requested_action"] != {"identifier": RERUN_ACTION}  # the real payload names another App's
    clicked["requested_action"] = {"identifier": RERUN_ACTION}
    assert service.post("check_run", clicked).status_code == 202
    service.drain()

    assert service.deliveries()[-1].status == "processed"
    assert [(r.head_sha, r.status) for r in service.runs()] == [(head, "completed")] * 2
    first, second = sorted(fake.check_runs(MILES), key=lambda run: run.id)
    assert first.id == check.id and second.external_id != first.external_id
    assert (second.status, second.conclusion, second.actions) == ("completed", "success", [button])


@pytest.fixture
def retrying_at_once(make_settings: Callable[..., Settings], sqlite_url: str) -> Iterator[Service]:
    """A service whose GitHub calls are retried without waiting (the backoff is slept away)."""
    settings = make_settings(database_url=sqlite_url)
    app = GitHubApp.from_settings(settings, policy=RetryPolicy(sleep=lambda _: None))
    service = make_service(settings, services=Services.from_settings(settings, github_app=app))
    yield service
    service.close()


def test_a_triage_whose_writes_github_applied_before_failing_posts_them_once(
        retrying_at_once: Service, miles: FakeGitHub) -> None:
    fake, head, service = miles, sha("docs, GitHub answering 502 after applying"), retrying_at_once
    fake.add_pull(MILES, 30, head_sha=sha("prerequisite"), base_sha=BASE)  # open: a blocking finding
    fake.add_pull(MILES, 24, head_sha=head, base_sha=BASE, files=["README.md"], body="Depends on #30.")
    fake.fail_after_applying(method="POST", path=rf"/repos/{MILES}/check-runs$")
    fake.fail_after_applying(drop=True, method="POST", path=rf"/repos/{MILES}/issues/24/comments$")
    deliver(service, fake, "opened", 24, head)
    service.drain()

    [check] = fake.check_runs(MILES)  # no second one left in progress
    assert (check.status, check.conclusion) == ("completed", "failure")
    [comment] = fake.comments_on(MILES, 24)
    assert COMMENT_MARKER in comment.body and "#30" in comment.body
    # each POST sent once: its failure was followed by a look, which found what it had made
    assert [r.status for r in fake.calls("POST", rf"/repos/{MILES}/check-runs")] == [502]
    assert [r.status for r in fake.calls("POST", rf"/repos/{MILES}/issues/24/comments")] == [0]
    [run] = service.runs()
    assert (run.status, run.conclusion, run.check_run_id) == ("completed", "failure", check.id)


def test_a_closed_pull_request_is_recorded_and_not_triaged(service: Service, miles: FakeGitHub) -> None:
    fake, head = miles, sha("merged")
    fake.add_pull(MILES, 19, head_sha=head, base_sha=BASE, files=["README.md"], state="closed", merged=True,
                  merged_at="2026-11-30T12:00:00Z")
    guid = str(uuid.uuid4())
    payload = pull_request_event(fake, "closed", full_name=MILES, number=19, head_sha=head, base_sha=BASE,
                                 variant="unmerged")
    assert service.post("pull_request", payload, guid=guid).status_code == 202
    deliver(service, fake, "reopened", 19, head)  # out of order: GitHub says it is closed now
    service.drain()
    assert service.runs() == []
    assert fake.check_runs(MILES) == []
    with session_scope(service.services.sessions, read_only=True) as session:
        pr = get_pull_request(session, repo=MILES, number=19)
        assert pr is not None and pr.state == "closed" and pr.merged_at is not None


def test_a_check_run_github_will_not_complete_is_closed_later_by_a_queued_job(
        retrying_at_once: Service, miles: FakeGitHub) -> None:
    fake, head, service = miles, sha("docs, GitHub failing"), retrying_at_once
    fake.add_pull(MILES, 20, head_sha=head, base_sha=BASE, files=["README.md"])
    deliver(service, fake, "opened", 20, head)
    fake.fail_next(5, status=502, path=r"/check-runs/\d+$")  # every attempt of the completion fails
    service.drain()  # the close_check job, queued for a minute later, runs at once here
    [check] = fake.check_runs(MILES)
    assert (check.status, check.conclusion) == ("completed", "action_required")
    assert "could not be posted" in check.output["summary"]
    assert check.actions == [RERUN]
    [run] = service.runs()
    assert run.status == "failed" and "could not be completed" in (run.error or "")


def test_github_enterprise_and_a_delivery_without_installation(
        make_settings: Callable[..., Settings], sqlite_url: str,
        fake_github_factory: Callable[..., FakeGitHub]) -> None:
    enterprise = fake_github_factory(prefix="/api/v3")
    enterprise.add_repo(MILES, installation_id=7)
    head = sha("edited on enterprise")
    enterprise.add_pull(MILES, 22, head_sha=head, base_sha=BASE, files=["docs/index.md"])
    service = make_service(make_settings(database_url=sqlite_url, GITHUB_API_URL=enterprise.url))
    try:
        payload = pull_request_event(enterprise, "edited", full_name=MILES, number=22, head_sha=head,
                                     base_sha=BASE)
        del payload["installation"]  # a repository webhook's delivery: the job asks GitHub which installation
        assert "changes" in payload and service.post("pull_request", payload).status_code == 202
        service.drain()
        [check] = enterprise.check_runs(MILES)
        assert check.conclusion == "success"
        assert enterprise.calls("GET", rf"/repos/{MILES}/installation")
        assert all(request.path.startswith("/api/v3/") for request in enterprise.calls())
    finally:
        service.close()
