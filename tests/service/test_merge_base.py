"""A base branch that moved on after the PR branched off: the head is compared with the merge base (what
landed on the base since is not the PR's change), while the policy is still read at the base sha.

Jobs run when the test drains the queue, as in test_triage.py."""

from __future__ import annotations

from pathlib import Path

from twin.variants import ARGUMENTS

from app.demo.localgithub import FakeGitHub
from app.triage import pipeline

from .conftest import INCIDENT, MILES, Service, serve_twin_policy
from .payloads import sha
from .test_triage import POLICY, deliver


def test_the_head_is_compared_with_the_merge_base_and_the_policy_read_at_the_base_tip(
        service: Service, miles: FakeGitHub, twin_trees: dict[str, Path], tmp_path: Path) -> None:
    # shas of this test's own: the unpacked trees are cached by sha across tests
    fake, tip, fork_point, head = miles, *(sha(f"{name} {tmp_path}") for name in ("tip", "fork", "head"))
    fake.add_tarball(MILES, fork_point, twin_trees["base"])
    fake.add_tarball(MILES, head, twin_trees["incident"])  # no tarball at the tip: it must not be asked for
    fake.set_merge_base(MILES, tip, head, fork_point)  # the base branch moved on since the PR branched off
    fake.set_file(MILES, tip, pipeline.REPO_POLICY, POLICY.read_text())
    fake.add_pull(MILES, 31, head_sha=head, base_sha=tip, files=[ARGUMENTS])
    deliver(service, fake, "opened", 31, head, tip)
    service.drain()

    [compared] = fake.calls("GET", rf"/repos/{MILES}/compare/.*")
    assert compared.route == f"/repos/{MILES}/compare/{tip}...{head}"
    downloaded = [call.route.rsplit("/", 1)[1] for call in fake.calls("GET", rf"/repos/{MILES}/tarball/.*")]
    assert downloaded == [fork_point, head]  # the merge base's tree, never the base tip's
    asked = [call.query.get("ref") for call in fake.calls("GET", rf"/repos/{MILES}/contents/.*")]
    assert asked == [tip]  # the policy still comes from the base sha, not from the merge base
    [check] = fake.check_runs(MILES)
    assert check.conclusion == "failure"
    [comment] = fake.comments_on(MILES, 31)
    assert f"against base `{fork_point[:7]}`" in comment.body  # says which revision was compared
    [run] = service.runs()
    assert run.status == "completed"


def test_without_a_merge_base_the_head_is_compared_with_the_base_sha(
        service: Service, miles: FakeGitHub, twin_trees: dict[str, Path], tmp_path: Path) -> None:
    fake, tip = miles, sha(f"base with an unrelated history {tmp_path}")
    fake.set_merge_base(MILES, tip, INCIDENT, None)  # the compare API answers 404
    fake.add_tarball(MILES, tip, twin_trees["base"])
    serve_twin_policy(fake, tip)
    fake.add_pull(MILES, 32, head_sha=INCIDENT, base_sha=tip, files=[ARGUMENTS])
    deliver(service, fake, "opened", 32, INCIDENT, tip)
    service.drain()

    assert [call.status for call in fake.calls("GET", rf"/repos/{MILES}/compare/.*")] == [404]
    downloaded = [call.route.rsplit("/", 1)[1] for call in fake.calls("GET", rf"/repos/{MILES}/tarball/.*")]
    assert downloaded[:1] == [tip]  # the head's tree may be cached from an earlier test
    [check] = fake.check_runs(MILES)
    assert check.conclusion == "failure"
    [comment] = fake.comments_on(MILES, 32)
    assert f"against base `{tip[:7]}`" in comment.body
