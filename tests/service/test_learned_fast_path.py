"""The App's no-download fast path decides from the modules validation imported at the last analysis of the
pull request's base branch; with none stored yet, it downloads both trees and analyses."""

from __future__ import annotations

import uuid
from pathlib import Path

from twin.imported_helper import HELPER, NEW_ASSERT, UNIMPORTED, build_tree, policy_text

from app.demo.localgithub import FakeGitHub
from app.triage.pipeline import REPO_POLICY

from .conftest import Service
from .payloads import pull_request_event, sha

REPO = "acme/trainer"


def revision(tmp_path: Path, name: str) -> str:
    """A sha of this test's own: trees downloaded by the other database's run are not reused."""
    return sha(f"trainer {tmp_path.name} {name}")


def open_pull(service: Service, fake: FakeGitHub, tmp_path: Path, number: int,
              changes: dict[str, str]) -> None:
    head, base = revision(tmp_path, f"head {number}"), revision(tmp_path, "base")
    fake.add_tarball(REPO, head, build_tree(tmp_path / f"head{number}", changes))
    fake.add_pull(REPO, number, head_sha=head, base_sha=base, files=sorted(changes))
    payload = pull_request_event(fake, "opened", full_name=REPO, number=number, head_sha=head, base_sha=base)
    assert service.post("pull_request", payload, guid=str(uuid.uuid4())).status_code == 202
    service.drain()


def downloads(fake: FakeGitHub, tmp_path: Path, number: int) -> int:
    """Downloads of pull request NUMBER's head (the base's tree is downloaded once, then reused)."""
    return len(fake.calls("GET", rf"/repos/{REPO}/tarball/{revision(tmp_path, f'head {number}')}"))


def test_the_fast_path_uses_what_validation_imported_at_the_base_branch(
        service: Service, fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake = fake_github
    fake.add_repo(REPO, installation_id=1)
    base = revision(tmp_path, "base")
    fake.add_tarball(REPO, base, build_tree(tmp_path / "base"))
    fake.set_file(REPO, base, REPO_POLICY, policy_text(["arguments.py"]))
    unimported = {UNIMPORTED: "def main():\n    return 1\n"}

    open_pull(service, fake, tmp_path, 1, unimported)  # nothing learned yet: downloaded, the base validated
    assert downloads(fake, tmp_path, 1) == 1
    [first] = service.runs()
    assert first.conclusion == "success" and first.summary is not None
    assert first.summary["validation_changed"] is False
    learned = first.summary["validation_imports"]
    assert HELPER in learned and UNIMPORTED not in learned

    open_pull(service, fake, tmp_path, 2, unimported)  # decided from the file list and the learned set
    assert downloads(fake, tmp_path, 2) == 0
    second = max(service.runs(), key=lambda run: run.id)
    assert second.conclusion == "success" and second.summary is not None
    assert second.summary["validation_imports"] == learned

    open_pull(service, fake, tmp_path, 3, {HELPER: NEW_ASSERT})  # `validation.paths` does not name it
    assert downloads(fake, tmp_path, 3) == 1
    third = max(service.runs(), key=lambda run: run.id)
    assert third.conclusion == "failure" and third.summary is not None
    assert third.summary["analysed_because"] == f"touches {HELPER}, imported by validation at the base"
    assert [(f["kind"], f["severity"], f["path"]) for f in third.summary["findings"]] == [
        ("new_rejection", "blocking", HELPER)]
    [check] = [c for c in fake.check_runs(REPO) if c.conclusion == "failure"]
    assert f"analysed: the change touches <code>{HELPER}</code>" in check.output["summary"] or \
        f"analysed: the change touches {HELPER}" in check.output["summary"]
