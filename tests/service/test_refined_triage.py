"""The App's triage of a pull request whose base is blind with the base's policy as written, refined for
its run (issue 24, direction 6): the verdict is the refined run's, and the sticky comment says so and gives
the policy change as a "suggested policy change" block (tests/test_twin_refined_check.py has the same
repository through `prtriage check`)."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml
from launch_twin import MARKER, NEW_ASSERT, write_repo
from refine_twin import POLICY, host_files

from app.demo.localgithub import FakeGitHub
from app.triage.pipeline import REPO_POLICY

from .conftest import MILES, Service
from .payloads import pull_request_event, sha


def test_a_blind_base_is_refined_for_the_run_and_the_comment_suggests_the_policy_change(
        sqlite_service: Service, fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake = fake_github
    fake.add_repo(MILES, installation_id=1)
    base, head = sha("base whose CI keeps prompts under /mnt/"), sha("head refusing tp 4")
    files = host_files()
    fake.add_tarball(MILES, base, write_repo(tmp_path / "base", {**files, REPO_POLICY: POLICY}))
    refusing = files["train.py"].replace(MARKER, MARKER + NEW_ASSERT)
    fake.add_tarball(MILES, head, write_repo(tmp_path / "head", {**files, "train.py": refusing,
                                                                 REPO_POLICY: POLICY}))
    fake.set_file(MILES, base, REPO_POLICY, POLICY)
    fake.add_pull(MILES, 41, head_sha=head, base_sha=base, files=["train.py"])
    payload = pull_request_event(fake, "opened", full_name=MILES, number=41, head_sha=head, base_sha=base)
    assert sqlite_service.post("pull_request", payload, guid=str(uuid.uuid4())).status_code == 202
    sqlite_service.drain()
    # as written, every base suite failed on the CI host's file: action_required, blind; refined, it breaks
    # the tp 4 suite
    [check] = fake.check_runs(MILES)
    assert check.conclusion == "failure", check.output
    [comment] = fake.comments_on(MILES, 41)
    body = comment.body
    assert body.startswith("**❌ This pull request breaks 1 existing CI suite.**")
    assert "#### Refined for this run" in body
    assert "harness.existing\\_path\\_prefixes += \\['/mnt/'\\]" in body  # inert: escaped markdown
    assert "--prompt-data /mnt/ci-data/prompts.jsonl does not exist" in body
    block = f"**Suggested policy change** (merge into {REPO_POLICY} at the base):\n\n```yaml\n"
    suggested = body.split(block, 1)[1].split("\n```", 1)[0]
    assert yaml.safe_load(suggested) == {"harness": {"existing_path_prefixes": ["/mnt/"]}}
    assert "```suggestion" not in body  # an issue comment: GitHub applies a suggestion on a diff line only
    assert "#### Refined for this run" in check.output["summary"]
    [run] = sqlite_service.runs()
    assert run.summary is not None and run.summary["refinement"]["keys"] == ["harness.existing_path_prefixes"]
