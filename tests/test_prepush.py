"""`prtriage pre-push` and the pre-commit hook that runs it: real git repositories, a real remote, a real
`git push` through a pre-push hook that sets what pre-commit sets, the real sandbox."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_cli import ARGUMENTS, CI_SCRIPT, NEW_ASSERT, TRAIN, commit, git

from app.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def prtriage_pre_push(clone: Path, env: dict[str, str] | None = None,
                      *options: str) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PRE_COMMIT_")}
    environment.update({"PRTRIAGE_CACHE_DIR": str(clone.parent / "cache"), **(env or {})})
    return subprocess.run([sys.executable, "-m", "app.cli", "pre-push", *options], cwd=clone, env=environment,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of a remote holding the training repository on main, tracking origin/main."""
    author = tmp_path / "author"
    author.mkdir()
    git(author, "init", "-q", "-b", "main")
    commit(author, {"arguments.py": ARGUMENTS, "train.py": TRAIN,
                    "tests/test_lora.py": CI_SCRIPT.format(flags='"--colocate", "--lora", "--lr", "0.01"')},
           "base")
    subprocess.run(["git", "clone", "-q", "--bare", str(author), str(tmp_path / "remote.git")], check=True)
    subprocess.run(["git", "clone", "-q", str(tmp_path / "remote.git"), str(tmp_path / "clone")], check=True)
    return tmp_path / "clone"


def test_the_pushed_commits_against_pre_commits_refs(clone: Path) -> None:
    remote_sha = git(clone, "rev-parse", "origin/main")
    commit(clone, {"README.md": "docs\n"}, "docs")
    head = commit(clone, {"arguments.py": ARGUMENTS + NEW_ASSERT}, "an assert")
    done = prtriage_pre_push(clone, {"PRE_COMMIT_FROM_REF": remote_sha, "PRE_COMMIT_TO_REF": head},
                             "--format", "json")
    assert done.returncode == 1, done.stderr
    assert f"checking {head[:12]} against its merge base {remote_sha[:12]}" in done.stderr
    report = json.loads(done.stdout)
    assert (report["base"], report["head"]) == (remote_sha, head)
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert (finding["path"], finding["line"]) == ("arguments.py", 16)
    assert finding["suites"] == ["tests/test_lora.py"]


def test_by_hand_the_upstream_of_the_branch_is_the_remote_side(clone: Path) -> None:
    commit(clone, {"arguments.py": ARGUMENTS + NEW_ASSERT}, "an assert")
    done = prtriage_pre_push(clone)
    assert done.returncode == 1, done.stderr
    assert "with refs/remotes/origin/main" in done.stderr
    assert done.stdout.startswith("BREAKS 1 existing CI suite")
    git(clone, "branch", "--unset-upstream")  # origin/HEAD still names the remote's default branch
    assert prtriage_pre_push(clone).returncode == 1


def test_a_from_ref_this_clone_lacks_falls_back_to_the_upstream(clone: Path) -> None:
    head = commit(clone, {"arguments.py": ARGUMENTS + NEW_ASSERT}, "an assert")
    done = prtriage_pre_push(clone, {"PRE_COMMIT_FROM_REF": "ab" * 20, "PRE_COMMIT_TO_REF": head})
    assert done.returncode == 1, done.stderr
    assert "with refs/remotes/origin/main" in done.stderr


def test_nothing_to_check(clone: Path) -> None:
    assert prtriage_pre_push(clone).returncode == 0  # HEAD is the upstream's
    deleted = prtriage_pre_push(clone, {"PRE_COMMIT_FROM_REF": git(clone, "rev-parse", "HEAD"),
                                        "PRE_COMMIT_TO_REF": "0" * 40})
    assert deleted.returncode == 0 and "nothing to check" in deleted.stderr
    docs = commit(clone, {"README.md": "docs\n"}, "docs only")
    outside = prtriage_pre_push(clone, {"PRE_COMMIT_TO_REF": docs})
    assert outside.returncode == 0, outside.stderr
    assert "touches no validation path" in outside.stdout


def test_without_any_branch_to_compare_with_it_says_how_to_set_one(clone: Path) -> None:
    git(clone, "branch", "--unset-upstream")
    git(clone, "remote", "set-head", "origin", "--delete")
    done = prtriage_pre_push(clone)
    assert done.returncode == 3
    assert "no upstream (`git branch --set-upstream-to`)" in done.stderr


HOOK = """#!/bin/sh
# What pre-commit's pre-push stage does for each pushed ref: the two shas in its variables, then the hook.
while read local_ref local_sha remote_ref remote_sha; do
  PRE_COMMIT_FROM_REF=$remote_sha PRE_COMMIT_TO_REF=$local_sha PRE_COMMIT_REMOTE_NAME=$1 \\
    PRE_COMMIT_REMOTE_URL=$2 {python} -m app.cli pre-push || exit $?
done
"""


def test_a_real_push_with_a_breaking_assert_is_stopped(clone: Path) -> None:
    hook = clone / ".git" / "hooks" / "pre-push"
    hook.write_text(HOOK.format(python=sys.executable))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "PRTRIAGE_CACHE_DIR": str(clone.parent / "cache")}
    before = git(clone.parent / "remote.git", "rev-parse", "main")
    commit(clone, {"arguments.py": ARGUMENTS + NEW_ASSERT}, "an assert")
    push = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=clone, env=environment,
                          capture_output=True, text=True, timeout=300, check=False)
    assert push.returncode != 0
    assert "BREAKS 1 existing CI suite" in push.stdout + push.stderr
    assert git(clone.parent / "remote.git", "rev-parse", "main") == before
    git(clone, "-c", "user.name=t", "-c", "user.email=t@example.com", "revert", "--no-edit", "HEAD")
    fixed = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=clone, env=environment,
                           capture_output=True, text=True, timeout=300, check=False)
    assert fixed.returncode == 0, fixed.stderr
    assert git(clone.parent / "remote.git", "rev-parse", "main") == git(clone, "rev-parse", "HEAD")


def test_the_pre_commit_hook_definition() -> None:
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "prtriage" and hook["language"] == "python"
    assert hook["stages"] == ["pre-push"]
    assert hook["pass_filenames"] is False and hook["always_run"] is True
    words = hook["entry"].split()
    assert words[0] == "prtriage"  # the console script pip installs from this repository
    args = build_parser().parse_args([*words[1:], "--policy", "p.yml"])
    assert args.command.__name__ == "pre_push_command"
