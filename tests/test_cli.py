"""`prtriage` as a user runs it: real processes, a real git repository, the real sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ARGUMENTS = '''import argparse


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--colocate", action="store_true")
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()
    validate(args)
    return args


def validate(args):
    assert args.lr > 0, "lr must be positive"
'''
NEW_ASSERT = '    assert not (args.colocate and args.lora), "LoRA cannot run colocated"\n'
TRAIN = '''from arguments import parse_args


def main():
    args = parse_args()
    print("training", args)


if __name__ == "__main__":
    main()
'''
CI_SCRIPT = '''import subprocess

subprocess.run(["python3", "train.py", {flags}], check=True)
'''


def prtriage(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PRTRIAGE_CACHE_DIR": str(cwd / "cache"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=300, check=False)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(content)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A training repository whose two CI scripts launch train.py; `base` and `head` tag its revisions."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, {"arguments.py": ARGUMENTS, "train.py": TRAIN,
                  "tests/test_lora.py": CI_SCRIPT.format(flags='"--colocate", "--lora", "--lr", "0.01"'),
                  "tests/test_plain.py": CI_SCRIPT.format(flags='"--lr", "0.1"')}, "base")
    git(root, "tag", "base")
    return root


def add_assert(repo: Path) -> None:
    commit(repo, {"arguments.py": ARGUMENTS + NEW_ASSERT}, "head adds an assert")
    git(repo, "tag", "head")


# --- usage ---------------------------------------------------------------------------------------------

def test_version(tmp_path: Path) -> None:
    done = prtriage("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("prtriage ")


@pytest.mark.parametrize("args", [
    (),
    ("check",),
    ("check", "--repo", "."),
    ("check", "--repo", ".", "--base", "a", "--head", "b", "--base-tree", "."),
    ("check", "--base-tree", "."),
    ("check", "--base-tree", ".", "--head-tree", ".", "--format", "yaml"),
    ("check", "--base-tree", "missing", "--head-tree", "."),
    ("matrix", "--repo", "."),
    ("matrix", "--tree", ".", "--rev", "HEAD"),
    ("frobnicate",),
])
def test_bad_usage_exits_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = prtriage(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "error" in done.stderr
    assert done.stdout == ""


def test_an_invalid_policy_exits_2_naming_file_and_key(tmp_path: Path) -> None:
    policy = tmp_path / "bad.yml"
    policy.write_text("validation:\n  paths: ['x.py']\n  entry: no-colon\nmatrix:\n  sources: []\n")
    done = prtriage("check", "--base-tree", ".", "--head-tree", ".", "--policy", str(policy), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"prtriage: error: {policy}: validation.entry: ")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("text", ["[" * 100_000, "- " * 100_000 + "x",
                                  "".join("  " * depth + f"k{depth}:\n" for depth in range(3000))])
def test_a_policy_nested_100k_deep_is_one_line_and_exit_2(tmp_path: Path, text: str) -> None:
    policy = tmp_path / "deep.yml"
    policy.write_text(text)
    done = prtriage("check", "--base-tree", ".", "--head-tree", ".", "--policy", str(policy), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"prtriage: error: {policy}: nested too deeply to be a policy\n"


def test_an_invalid_log_level_exits_2(tmp_path: Path) -> None:
    done = prtriage("check", "--base-tree", ".", "--head-tree", ".", cwd=tmp_path,
                    env={"PRTRIAGE_LOG_LEVEL": "chatty"})
    assert done.returncode == 2
    assert "PRTRIAGE_LOG_LEVEL" in done.stderr


def test_the_base_revisions_policy_judges_and_the_heads_is_ignored(repo: Path) -> None:
    commit(repo, {".github/pr-triage.yml": "validation: [broken\n"}, "policy at head only")
    done = prtriage("check", "--repo", str(repo), "--base", "base", "--head", "HEAD", cwd=repo.parent)
    assert done.returncode == 0, done.stderr
    git(repo, "tag", "broken-policy")
    commit(repo, {"README.md": "docs\n"}, "docs")
    done = prtriage("check", "--repo", str(repo), "--base", "broken-policy", "--head", "HEAD",
                    cwd=repo.parent)
    assert done.returncode == 2
    assert done.stderr.startswith("prtriage: error: broken-policy:.github/pr-triage.yml: not valid YAML")


def test_a_revision_git_cannot_resolve_exits_3(repo: Path) -> None:
    done = prtriage("check", "--repo", str(repo), "--base", "base", "--head", "no-such-branch",
                    cwd=repo.parent)
    assert done.returncode == 3
    assert "'no-such-branch' names no commit" in done.stderr


def test_no_sandbox_exits_3_with_the_way_out(repo: Path) -> None:
    add_assert(repo)
    done = prtriage("check", "--repo", str(repo), "--base", "base", "--head", "head", cwd=repo.parent,
                    env={"PRTRIAGE_BWRAP": "/nonexistent/bwrap"})
    assert done.returncode == 3
    assert "bubblewrap" in done.stderr and "apt-get install bubblewrap" in done.stderr
    assert "--allow-unsandboxed" in done.stderr
    assert done.stdout == ""


# --- analysis ------------------------------------------------------------------------------------------

def test_a_change_outside_validation_paths_takes_the_fast_path(repo: Path) -> None:
    head = commit(repo, {"README.md": "docs\n"}, "docs only")
    done = prtriage("check", "--repo", str(repo), "--base", "base", "--head", "HEAD", "--format", "json",
                    cwd=repo.parent, env={"PRTRIAGE_BWRAP": "/nonexistent/bwrap"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["validation_changed"] is False
    assert report["head"] == head and report["base"] == git(repo, "rev-parse", "base")
    assert report["suites"] == [] and report["findings"] == []
    text = prtriage("check", "--repo", str(repo), "--base", "base", "--head", "HEAD", cwd=repo.parent)
    assert "touches no validation path" in text.stdout.splitlines()[0]


def test_a_new_assert_that_breaks_a_ci_suite_exits_1(repo: Path) -> None:
    add_assert(repo)
    status = git(repo, "status", "--porcelain")
    done = prtriage("check", "--repo", str(repo), "--base", "base", "--head", "head", "--format", "json",
                    "--progress", cwd=repo.parent)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)  # stdout is only the JSON; progress went to stderr
    assert "base " in done.stderr and "head " in done.stderr
    assert report["sandboxed"] is True and report["validation_changed"] is True
    outcomes = {s["id"]: (s["base"]["outcome"], s["head"]["outcome"]) for s in report["suites"]}
    assert outcomes == {"tests/test_lora.py": ("accepted", "rejected"),
                        "tests/test_plain.py": ("accepted", "accepted")}
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert finding["kind"] == "new_rejection"
    assert finding["suites"] == ["tests/test_lora.py"]
    assert (finding["path"], finding["line"], finding["in_diff"]) == ("arguments.py", 16, True)
    assert finding["message"] == "AssertionError: LoRA cannot run colocated"
    assert git(repo, "status", "--porcelain") == status


def test_text_and_trees_without_git(repo: Path, tmp_path: Path) -> None:
    add_assert(repo)
    base, head = tmp_path / "base", tmp_path / "head"
    for name, tree in (("base", base), ("head", head)):
        tree.mkdir()
        archive = subprocess.run(["git", "archive", name], cwd=repo, capture_output=True, check=True)
        subprocess.run(["tar", "x", "-C", str(tree)], input=archive.stdout, check=True)
    done = prtriage("check", "--base-tree", str(base), "--head-tree", str(head), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "BREAKS 1 existing CI suite (1 blocking finding)"
    assert "arguments.py:16 (in this diff)" in done.stdout
    assert "WITHOUT the sandbox" not in done.stdout
    as_json = prtriage("check", "--base-tree", str(base), "--head-tree", str(head), "--format", "json",
                       cwd=tmp_path)
    report = json.loads(as_json.stdout)
    assert report["base"] is None and report["head"] is None


def test_without_bubblewrap_when_allowed_the_report_says_so(repo: Path) -> None:
    add_assert(repo)
    done = prtriage("check", "--repo", str(repo), "--base", "base", "--head", "head", "--allow-unsandboxed",
                    cwd=repo.parent, env={"PRTRIAGE_BWRAP": "/nonexistent/bwrap"})
    assert done.returncode == 1, done.stderr
    assert "WITHOUT the sandbox" in done.stdout


def test_matrix_lists_the_suites_of_a_revision(repo: Path) -> None:
    done = prtriage("matrix", "--repo", str(repo), "--rev", "base", "--format", "json", cwd=repo.parent)
    assert done.returncode == 0, done.stderr
    matrix = json.loads(done.stdout)
    assert matrix["rev"] == git(repo, "rev-parse", "base")
    assert {s["id"]: s["argv"] for s in matrix["suites"]} == {
        "tests/test_lora.py": ["--colocate", "--lora", "--lr", "0.01"],
        "tests/test_plain.py": ["--lr", "0.1"]}
    text = prtriage("matrix", "--repo", str(repo), "--rev", "base", cwd=repo.parent)
    assert "train.py --colocate --lora --lr 0.01" in text.stdout


def test_trees_are_cached_where_the_environment_says(repo: Path, tmp_path: Path) -> None:
    commit(repo, {"README.md": "docs\n"}, "docs only")
    base_sha = git(repo, "rev-parse", "base")
    environment = {k: v for k, v in os.environ.items() if k != "PRTRIAGE_CACHE_DIR"}
    environment["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    done = subprocess.run([sys.executable, "-m", "app.cli", "check", "--repo", str(repo), "--base", "base",
                           "--head", "HEAD"], env=environment, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "xdg" / "prtriage" / "trees" / base_sha / "train.py").is_file()
    explicit = prtriage("check", "--repo", str(repo), "--base", "base", "--head", "HEAD",
                        "--cache-dir", str(tmp_path / "mine"), cwd=tmp_path)
    assert explicit.returncode == 0, explicit.stderr
    assert (tmp_path / "mine" / "trees" / base_sha).is_dir()
