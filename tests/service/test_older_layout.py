"""A pull request based on an older main, where the CI scripts sat elsewhere than the policy's globs say
(written after radixark/miles, whose CI scripts moved under tests/e2e/ in 2026-01: the App, which reads
trees from the API and has no clone, captured nothing on a PR based before the move while the command line
followed the renames). The App follows them through the Git Trees and compare APIs, over real HTTP to the
fake GitHub, and the report says what it followed.

Jobs run when the test drains the queue, as in test_triage.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from twin.variants import ARGUMENTS

from app.demo.localgithub import FakeGitHub
from app.triage import pipeline
from app.triage.pr_report import inert

from .conftest import MILES, Service
from .payloads import sha
from .test_triage import POLICY, deliver

MOVED = "tests/e2e"  # where the twin's CI scripts are today, and the policy's glob names them
OLDER = "tests/integration"  # where they were before


def older_layout(tree: Path, dest: Path) -> Path:
    """TREE with its CI scripts where they were before the move (the one import of its own path too)."""
    shutil.copytree(tree, dest)
    shutil.move(dest / MOVED, dest / OLDER)
    for script in (dest / OLDER).rglob("*.py"):
        text = script.read_text()
        if "tests.e2e." in text:
            script.write_text(text.replace("tests.e2e.", "tests.integration."))
    return dest


def test_a_pull_request_on_an_older_layout_is_captured_where_its_scripts_were(
        service: Service, miles: FakeGitHub, twin_trees: dict[str, Path], tmp_path: Path) -> None:
    fake = miles
    base, head, newest = (sha(f"{name} {tmp_path}") for name in ("old base", "old head", "main today"))
    fake.add_tarball(MILES, base, older_layout(twin_trees["base"], tmp_path / "base"))
    fake.add_tarball(MILES, head, older_layout(twin_trees["incident"], tmp_path / "head"))
    fake.push(MILES, newest, "CI scripts under tests/e2e", directory=twin_trees["base"])
    fake.set_file(MILES, base, pipeline.REPO_POLICY, POLICY.read_text())  # globs of today's layout
    fake.add_pull(MILES, 41, head_sha=head, base_sha=base, files=[ARGUMENTS])
    deliver(service, fake, "opened", 41, head, base)
    service.drain()

    [check] = fake.check_runs(MILES)
    assert check.conclusion == "failure"  # the incident's new rejection, found in the scripts' older places
    followed = (f"the policy's matrix.sources[0].scripts {MOVED}/**/test_*.py matched nothing at "
                f"{head[:12]}; used the")
    shown = inert(followed)  # as the report's markdown shows it
    assert shown in check.output["summary"]
    [comment] = fake.comments_on(MILES, 41)
    assert shown in comment.body and f"{OLDER}/ckpt/test\\_qwen3\\_4b\\_ckpt.py" in comment.body
    compared = [call.route for call in fake.calls("GET", rf"/repos/{MILES}/compare/.*")]
    assert f"/repos/{MILES}/compare/{head}...{newest}" in compared  # the renames since the head, to today
    [run] = service.runs()
    assert run.status == "completed"
    assert run.summary["policy"]["followed"][0].startswith(followed)


def test_a_pull_request_on_todays_layout_asks_for_no_renames(
        service: Service, miles: FakeGitHub, twin_trees: dict[str, Path], tmp_path: Path) -> None:
    fake = miles
    base, head, newest = (sha(f"{name} {tmp_path}") for name in ("base", "head", "main today"))
    fake.add_tarball(MILES, base, twin_trees["base"])
    fake.add_tarball(MILES, head, twin_trees["incident"])
    fake.push(MILES, newest, "main today", directory=twin_trees["base"])
    fake.set_file(MILES, base, pipeline.REPO_POLICY, POLICY.read_text())
    fake.add_pull(MILES, 42, head_sha=head, base_sha=base, files=[ARGUMENTS])
    deliver(service, fake, "opened", 42, head, base)
    service.drain()

    [check] = fake.check_runs(MILES)
    assert check.conclusion == "failure"
    assert "matched nothing" not in check.output["summary"]
    # a glob matching nowhere, today either, is no drift: the compare API is asked for the merge base alone
    assert [call.route for call in fake.calls("GET", rf"/repos/{MILES}/compare/.*")] == \
        [f"/repos/{MILES}/compare/{base}...{head}"]
