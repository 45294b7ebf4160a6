"""The progress display: the base and head validations run at once, and one line shows both counts."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from app.cli import ProgressPrinter


def test_parallel_validations_share_one_line_and_neither_hides_the_other() -> None:
    stream = io.StringIO()
    printer = ProgressPrinter(stream, interval=0)
    printer("capture", 3, 10, "tests/e2e/test_a.py")
    printer("base", 1, 105, "")
    printer("head", 2, 105, "")
    printer("base", 105, 105, "")
    assert stream.getvalue().splitlines() == [
        "capture 3/10 tests/e2e/test_a.py",
        "validate base 1/105",
        "validate base 1/105, head 2/105",
        "validate base 105/105, head 2/105",
    ]


def test_a_step_is_printed_at_most_every_interval_but_always_when_done() -> None:
    stream = io.StringIO()
    printer = ProgressPrinter(stream, interval=3600)
    for done in range(1, 5):
        printer("base", done, 4, "")
        printer("head", done, 4, "")
    assert stream.getvalue().splitlines() == ["validate base 1/4", "validate base 4/4, head 3/4",
                                              "validate base 4/4, head 4/4"]


def test_only_the_steps_asked_for() -> None:
    stream = io.StringIO()
    printer = ProgressPrinter(stream, interval=0, only=frozenset({"environment"}))
    printer("base", 1, 2, "")
    printer("environment", 0, 1, "building")
    assert stream.getvalue() == "environment 0/1 building\n"


def test_a_check_with_progress_says_first_which_policy_judges_it(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "incident"
    argv = [sys.executable, "-m", "app.cli", "check", "--base-tree", str(example / "base"), "--head-tree",
            str(example / "base"), "--policy", str(example / "policy.yml"), "--cache-dir", str(tmp_path)]
    shown = subprocess.run([*argv, "--progress"], capture_output=True, text=True, timeout=300, check=False)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.splitlines()[0] == f"policy: {example / 'policy.yml'} (--policy)"
    quiet = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert quiet.returncode == 0 and "policy:" not in quiet.stderr  # stderr no terminal: the report says it
    assert f"policy: {example / 'policy.yml'} (--policy)" in quiet.stdout
