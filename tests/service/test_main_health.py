"""The default branch's health through the running service: signed `push` deliveries over HTTP, the queue's
jobs, the real sandbox on the example's trees served by the fake GitHub; on SQLite and PostgreSQL.

The repository: the example's trainer (arguments.py, train.py) and twelve CI suites, two in ci/test_e2e.py
(full fine-tuning and LoRA, both `--colocate --disable-weights-backuper`) and ten in ci/test_sizes.py.
"""

from __future__ import annotations

import platform
import shutil
from pathlib import Path
from typing import Any

import pytest
from dashboard.html import parse
from sqlalchemy import select
from test_environments import make_wheel

from app.analysis.core.policy import Harness
from app.bundled import bundled
from app.demo.localgithub import FakeGitHub
from app.engine.environments import prepare
from app.store.models import DeadSuite, MainHealth, RiskWindow
from app.store.session import session_scope
from app.triage.main_health import bisect
from app.triage.pipeline import REPO_POLICY

from .conftest import Service
from .payloads import sha

REPO = "example/trainer"
EXAMPLE = bundled("examples") / "incident"
LORA = "ci/test_e2e.py#2"
SIZES = '''"""CI: the same run at ten sizes."""

import subprocess

for gpus in range(1, 11):
    subprocess.run(f"python3 train.py --num-gpus {gpus} --colocate", shell=True, check=True)
'''
FIXED_E2E = '''"""CI: the end-to-end runs; LoRA keeps the weights backuper (train offload needs it)."""

import subprocess

for extra in ("--disable-weights-backuper", "--lora-rank 16"):
    subprocess.run(f"python3 train.py --num-gpus 8 --colocate {extra}", shell=True, check=True)
'''
REJECT_COLOCATE = "    assert not args.colocate, \"--colocate is gone\"\n"


def build(root: Path, *, assert_added: bool = False, script_fixed: bool = False, note: str = "",
          colocate_gone: bool = False) -> Path:
    """The repository at one commit: the example's base (or head, whose new assert rejects LoRA)."""
    shutil.copytree(EXAMPLE / ("head" if assert_added else "base"), root)
    (root / "ci" / "test_sizes.py").write_text(SIZES)
    if script_fixed:
        (root / "ci" / "test_e2e.py").write_text(FIXED_E2E)
    if colocate_gone:
        arguments = root / "arguments.py"
        text = arguments.read_text()
        anchor = "    # colocated training"
        arguments.write_text(text.replace(anchor, REJECT_COLOCATE + anchor))
    (root / "README.md").write_text(f"The trainer. {note}\n")
    return root


def land(fake: FakeGitHub, tmp_path: Path, name: str, **variant: Any) -> str:
    """Commit NAME on the default branch, with the example's policy as the repository's own; its sha is the
    test's own (the session shares one cache of trees by sha)."""
    commit = sha(f"{tmp_path} {name}")
    fake.push(REPO, commit, name, directory=build(tmp_path / name, **variant))
    fake.set_file(REPO, commit, REPO_POLICY, (EXAMPLE / "policy.yml").read_text())
    return commit


def push_event(fake: FakeGitHub, before: str | None, commits: list[str]) -> dict[str, Any]:
    repo = fake.repo(REPO)
    assert repo is not None
    return {"ref": "refs/heads/main", "before": before or "0" * 40, "after": commits[-1], "deleted": False,
            "repository": {"id": repo.id, "full_name": REPO, "private": False, "default_branch": "main"},
            "installation": {"id": repo.installation_id}, "commits": [{"id": c} for c in commits]}


def push(service: Service, fake: FakeGitHub, before: str | None, commits: list[str]) -> None:
    assert service.post("push", push_event(fake, before, commits)).status_code == 202
    service.drain()
    assert [d.status for d in service.deliveries()][-1] == "processed", service.deliveries()[-1].error


def healths(service: Service) -> list[tuple[str, bool, int, int, bool]]:
    with session_scope(service.services.sessions, read_only=True) as session:
        rows = session.scalars(select(MainHealth).order_by(MainHealth.id))
        return [(row.sha, row.probe, row.suites, row.accepted, row.could_analyse) for row in rows]


def dead(service: Service) -> list[dict[str, Any]]:
    with session_scope(service.services.sessions, read_only=True) as session:
        rows = session.execute(select(DeadSuite, RiskWindow)
                               .join(RiskWindow, RiskWindow.id == DeadSuite.window_id).order_by(DeadSuite.id))
        return [{"suite": d.suite, "script": d.script, "error": d.error, "path": d.path, "line": d.line,
                 "since": d.since_sha, "healed": d.healed_sha, "kind": w.kind, "state": w.state,
                 "close_reason": w.close_reason, "pr": w.pull_request_id} for d, w in rows]


def test_a_broken_suite_opens_a_window_naming_its_breaking_commit_and_a_fix_closes_it(
        service: Service, fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    good = land(fake_github, tmp_path, "a good main")
    push(service, fake_github, None, [good])
    assert healths(service) == [(good, False, 12, 12, True)]
    assert dead(service) == []

    breaking = land(fake_github, tmp_path, "the assert", assert_added=True)
    unrelated = land(fake_github, tmp_path, "a readme edit", assert_added=True, note="Unrelated.")
    push(service, fake_github, good, [breaking, unrelated])
    # the head, then the one commit the bisection had to look at
    assert healths(service)[1:] == [(unrelated, False, 12, 11, True), (breaking, True, 12, 11, True)]
    [opened] = dead(service)
    assert opened["suite"] == LORA and opened["script"] == "ci/test_e2e.py"
    assert "LoRA with --offload-train and --disable-weights-backuper is not supported" in opened["error"]
    assert (opened["path"], opened["line"]) == ("arguments.py", 21)
    assert (opened["since"], opened["kind"], opened["state"]) == (breaking, "dead_suite", "open")
    assert opened["pr"] is None

    fixed = land(fake_github, tmp_path, "the script fixed", assert_added=True, script_fixed=True)
    push(service, fake_github, unrelated, [fixed])
    [closed] = dead(service)
    assert (closed["healed"], closed["state"]) == (fixed, "closed")
    assert closed["close_reason"] == f"main {fixed[:12]}: accepted again"
    assert healths(service)[-1] == (fixed, False, 12, 12, True)


def test_a_blind_health_is_blindness_not_dead_suites(service: Service, fake_github: FakeGitHub,
                                                     tmp_path: Path) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    good = land(fake_github, tmp_path, "a good main")
    push(service, fake_github, None, [good])
    gone = land(fake_github, tmp_path, "colocate gone", colocate_gone=True)
    push(service, fake_github, good, [gone])
    assert healths(service)[-1] == (gone, False, 12, 0, False)
    assert dead(service) == []


def test_the_periodic_health_finds_the_breaking_commit_through_the_compare_api(
        service: Service, fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_repo(REPO, installation_id=1)
    good = land(fake_github, tmp_path, "a good main")
    push(service, fake_github, None, [good])
    # three commits land without a push delivery (lost webhooks): the daily health finds them
    first = land(fake_github, tmp_path, "a readme edit", note="One.")
    breaking = land(fake_github, tmp_path, "the assert", assert_added=True, note="One.")
    last = land(fake_github, tmp_path, "another edit", assert_added=True, note="Two.")
    service.queue.run_main_healths()
    service.drain()
    assert [h[:2] for h in healths(service)] == [(good, False), (last, False), (first, True),
                                                 (breaking, True)]
    [opened] = dead(service)
    assert (opened["suite"], opened["since"], opened["state"]) == (LORA, breaking, "open")


def test_the_health_keeps_its_analysis_environment_and_the_repository_page_shows_it(
        service: Service, fake_github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository's policy declares a Python, a requirement (a wheel of the test's own, installed by
    real pip from a local directory) and a module stubbed even when installed: the health records the
    environment the doctor ran under, the API answers it and the repository page says it."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "envprobe-pkg", "1.0", "WHERE = 'envprobe 1.0'\n")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    minor = ".".join(platform.python_version_tuple()[:2])  # the Python prtriage runs on: always there
    harness = (f"harness:\n  python: ['{minor}']\n  requirements: [envprobe-pkg==1.0]\n"
               "  stub_modules: [torch]\n")
    fake_github.add_repo(REPO, installation_id=1)
    good = land(fake_github, tmp_path, "a good main")
    fake_github.set_file(REPO, good, REPO_POLICY, (EXAMPLE / "policy.yml").read_text() + harness)
    push(service, fake_github, None, [good])
    assert healths(service) == [(good, False, 12, 12, True)]
    with session_scope(service.services.sessions, read_only=True) as session:
        stored = session.scalars(select(MainHealth)).one().policy
    built = prepare(Harness(python=[minor], requirements=["envprobe-pkg==1.0"]), None, tmp_path)
    assert stored["environment"] == {
        "python": platform.python_version(), "python_asked": [minor], "requirements": ["envprobe-pkg==1.0"],
        "installed": ["envprobe-pkg==1.0"], "digest": built.digest, "stub_modules": ["torch"],
        "stub_missing_modules": True}
    answer = service.http.get(f"/api/repositories/{REPO}")
    assert answer.status_code == 200
    assert answer.json()["policy"] == {"source": "base", "path": REPO_POLICY, "repository": REPO,
                                       "environment": stored["environment"]}
    page = parse(service.http.get(f"/repositories/{REPO}").text).one(id="environment")
    assert page.text.startswith(f"Python {platform.python_version()} (the policy asks for {minor}); "
                                "1 requirement: envprobe-pkg==1.0; every module it lacks is stubbed, and "
                                "stubbed even though installed: torch.")


def test_bisection_looks_at_few_commits_and_names_the_first_broken_one() -> None:
    commits = [f"c{i}" for i in range(100)]
    looked: list[str] = []

    def broken(commit: str) -> bool:
        looked.append(commit)
        return int(commit[1:]) >= 37

    assert bisect(commits, broken, budget=12) == "c37"
    assert len(looked) <= 7 and len(set(looked)) == len(looked)  # at most log2(100), each commit once
    assert bisect(["only"], broken, budget=12) == "only"  # one commit pushed: that one, no doctor
    assert bisect(commits, lambda _: True, budget=3) == "c11"  # out of budget: the earliest known broken


def test_a_commit_doctored_after_its_ci_scripts_moved_is_captured_where_they_were(
        service: Service, fake_github: FakeGitHub, tmp_path: Path) -> None:
    """The push of a commit from before a move of the CI scripts, doctored once main has moved on (a queue
    behind, or a commit a search probes): the policy's `ci/test_*.py` is followed to where they were."""
    fake_github.add_repo(REPO, installation_id=1)
    before = sha(f"{tmp_path} before the move")
    older = build(tmp_path / "before the move")
    shutil.move(older / "ci", older / "tests")
    fake_github.push(REPO, before, "before the move", directory=older)
    fake_github.set_file(REPO, before, REPO_POLICY, (EXAMPLE / "policy.yml").read_text())
    land(fake_github, tmp_path, "CI scripts under ci/")  # main's head from now on
    push(service, fake_github, None, [before])
    assert healths(service) == [(before, False, 12, 12, True)]
    with session_scope(service.services.sessions, read_only=True) as session:
        [followed] = session.scalars(select(MainHealth)).one().policy["followed"]
    assert followed.startswith(f"the policy's matrix.sources[0].scripts ci/test_*.py matched nothing at "
                               f"{before[:12]}; used the 2 files")
