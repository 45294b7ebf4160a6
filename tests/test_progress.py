"""The progress display: the base and head validations run at once, and one line shows both counts."""

from __future__ import annotations

import io

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
