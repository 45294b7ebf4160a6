"""scripts/eval_real.py's selection and sampling on a real git history made here, dated commit by commit."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from app.analysis.core.policy import POLICIES_DIR, load_policy

ROOT = Path(__file__).resolve().parents[1]
POLICY = POLICIES_DIR / "radixark" / "miles.yml"  # lists train.py and miles/utils/arguments.py


@functools.cache
def eval_real() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_real", ROOT / "scripts" / "eval_real.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_real"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def git(repo: Path, *args: str, date: str = "2026-01-01T12:00:00") -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def commit(repo: Path, path: str, subject: str, date: str) -> str:
    file = repo / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(f"{subject}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", subject, date=f"{date}T12:00:00")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """main: a root, one commit a month, a side branch merged in (its own commit is not first-parent)."""
    repo = tmp_path_factory.mktemp("history")
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "README.md", "root", "2025-12-01")
    commit(repo, "README.md", "docs only", "2026-01-10")
    commit(repo, "miles/utils/arguments.py", "listed path", "2026-02-10")
    commit(repo, "miles/ray/rollout.py", "code a validation module may import", "2026-03-10")
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "train.py", "side branch commit", "2026-04-01")
    git(repo, "checkout", "-q", "main")
    commit(repo, "docs/guide.md", "docs on main", "2026-04-05")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side", date="2026-04-10T12:00:00")
    commit(repo, "scripts/run.sh", "shell script", "2026-05-10")
    commit(repo, "configs/x.yaml", "yaml config", "2026-06-10")
    commit(repo, "train.py", "after the window", "2026-07-15")
    return repo


def select(history: Path, **options: object) -> list[str]:
    args = argparse.Namespace(repo=history, branch="main", since="2026-01-01", until="2026-07-01",
                              select="code", limit=0, sample=0, newest_first=False)
    vars(args).update(options)
    module = eval_real()
    return [c.subject for c in module.selected_commits(args, load_policy(POLICY))]


def test_repository_lets_check_choose_the_policy_at_each_base() -> None:
    module = eval_real()
    by_name = argparse.Namespace(repository="radixark/miles", policy=POLICY)
    assert module.policy_options(by_name) == ["--repository", "radixark/miles"]
    assert module.selection_policy(by_name) == load_policy(POLICY)  # its listed paths select commits
    by_file = argparse.Namespace(repository=None, policy=POLICY)
    assert module.policy_options(by_file) == ["--policy", str(POLICY)]


def test_listed_selection_keeps_the_commits_touching_the_policys_paths(history: Path) -> None:
    # the merge brings train.py onto main: its first-parent diff touches it; the side commit is not on main
    assert select(history, select="listed") == ["listed path", "merge side"]


def test_code_selection_adds_every_python_yaml_and_shell_change(history: Path) -> None:
    assert select(history) == ["listed path", "code a validation module may import", "merge side",
                               "shell script", "yaml config"]


def test_until_and_since_bound_the_window(history: Path) -> None:
    assert select(history, until=None)[-1] == "after the window"
    assert select(history, since="2026-04-01", select="listed") == ["merge side"]
    assert select(history, since="2025-01-01", select="listed") == ["listed path", "merge side"]  # no root


def test_sample_spreads_over_the_selection_first_and_last_included(history: Path) -> None:
    assert select(history, sample=3) == ["listed path", "merge side", "yaml config"]
    assert select(history, sample=2) == ["listed path", "yaml config"]
    assert select(history, sample=3) == select(history, sample=3)  # deterministic
    assert select(history, sample=9) == select(history)  # more than there are: all
    assert select(history, sample=2, newest_first=True) == ["yaml config", "listed path"]


def test_evenly_on_larger_lists() -> None:
    evenly = eval_real().evenly
    assert evenly(list(range(10)), 4) == [0, 3, 6, 9]
    assert evenly(list(range(100)), 10) == [0, 11, 22, 33, 44, 55, 66, 77, 88, 99]
    assert evenly(list(range(7)), 1) == [3]
    assert evenly(list(range(5)), 0) == [0, 1, 2, 3, 4]


def test_overall_counts_checks_own_decision_apart() -> None:
    """Untouched commits and commits without a report are neither analysed nor below 95%."""
    row = {"sha": "a" * 40, "exit": 0, "seconds": 1.0, "suites": 0, "accepted_share": None, "findings": []}
    finding = {"kind": "new_rejection", "severity": "blocking", "where": "x.py:3", "suites": 2}
    rows = [{**row, "validation_changed": False},
            {**row, "exit": 3, "failure": "analysis: no CI suite captured"},
            {**row, "exit": 1, "validation_changed": True, "suites": 4, "base_accepted": 4,
             "accepted_share": 1.0, "findings": [finding]}]
    total = eval_real().overall(rows)
    assert (total["analysed"], total["untouched"], total["no_report"]) == (1, 1, 1)
    assert total["below_95"] == [] and total["base_acceptance_at_least_95"] == 1
    assert total["blocking"] == [{"sha": "a" * 12, "kind": "new_rejection", "where": "x.py:3"}]
    assert total["exit_statuses"] == {"0": 1, "3": 1, "1": 1}
