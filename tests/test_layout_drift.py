"""The engine's one step "the policy as it applies at this revision" (app/engine/layout_drift.py), which the
command line runs over git and the App over the GitHub API: globs followed through a `History`, then launch
forms fitted to the revision's files; the history read only as far as a lost glob needs it.

Written after the App: it analysed a PR based on an older main with the policy as written (today's globs:
nothing captured) while the command line followed the renames (tests/service/test_older_layout.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Collection, Mapping
from pathlib import Path

from app.analysis.core.policy import Policy
from app.engine.layout_drift import GitHistory, policy_at

POLICY = Policy.model_validate({
    "validation": {"paths": ["pkg/arguments.py"], "entry": "pkg.arguments:parse_args"},
    "matrix": {"sources": [
        {"kind": "record_launches", "scripts": ["tests/e2e/test_*.py"], "entry": r"(^|/)train\.py$"},
        {"kind": "python_definitions", "functions": ["t.m:f"], "name": "test_name", "args": ["--module", "m"],
         "forms": [{"when": {"run.sh": "--config_file"}, "args": ["--config_file", "old.toml"]}]}]}})
OLD = {"tests/test_tp2.py", "arguments.py", "run.sh", "train.py"}
TODAY = {"tests/e2e/test_tp2.py", "pkg/arguments.py", "run.sh", "train.py"}


class RecordedHistory:
    """A history of two revisions, OLD at "old" and TODAY at "today", that records what is asked of it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def paths_at(self, sha: str) -> Collection[str]:
        self.asked.append(f"paths {sha}")
        return {"old": OLD, "today": TODAY}.get(sha, set())

    def newest(self) -> str | None:
        self.asked.append("newest")
        return "today"

    def earlier_paths(self, older: str, newer: str) -> Mapping[str, Collection[str]]:
        self.asked.append(f"renames {older}...{newer}")
        return {"tests/e2e/test_tp2.py": {"tests/test_tp2.py"}, "pkg/arguments.py": {"arguments.py"}}


def test_an_older_revision_gets_its_paths_and_its_launch_form_with_a_note_for_each() -> None:
    history = RecordedHistory()
    files = {"run.sh": "python train.py --config_file $1\n"}
    applied, notes = policy_at(POLICY, history=history, sha="old", read=files.get, label="unused")
    assert applied.matrix.sources[0].scripts == ["tests/test_tp2.py"]
    assert applied.matrix.sources[1].args == ["--config_file", "old.toml"]
    assert applied.validation.paths == ["pkg/arguments.py", "arguments.py"]
    assert [note.split(" matched nothing")[0].split(" launched as")[0] for note in notes] == [
        "the policy's matrix.sources[0].scripts tests/e2e/test_*.py", "the policy's validation.paths "
        "pkg/arguments.py", "the policy's matrix.sources[1]"]
    assert history.asked == ["paths old", "newest", "paths today", "renames old...today"]


def test_todays_revision_reads_its_own_paths_only() -> None:
    history = RecordedHistory()
    assert policy_at(POLICY, history=history, sha="today", read={}.get, label="unused") == (POLICY, ())
    assert history.asked == ["paths today"]


def test_without_history_only_the_forms_apply_named_by_the_label() -> None:
    applied, notes = policy_at(POLICY, history=None, sha=None, read={"run.sh": "--config_file"}.get,
                               label="/some/tree")
    assert applied.matrix.sources[0].scripts == ["tests/e2e/test_*.py"]
    assert notes == ("the policy's matrix.sources[1] launched as its forms[1] at /some/tree (run.sh contains "
                     "'--config_file'): --config_file old.toml",)


def test_git_history_reads_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_tp2.py").write_text("import subprocess\nsubprocess.run(['python', 'train.py'])\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old")
    old = git("rev-parse", "HEAD")
    (repo / "tests" / "e2e").mkdir()
    git("mv", "tests/test_tp2.py", "tests/e2e/")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "moved")
    history = GitHistory(repo)
    assert history.newest() == git("rev-parse", "HEAD")
    assert list(history.paths_at(old)) == ["tests/test_tp2.py"]
    assert history.earlier_paths(old, "HEAD") == {"tests/e2e/test_tp2.py": {"tests/test_tp2.py"}}
    assert GitHistory(tmp_path / "no-repo").newest() is None
