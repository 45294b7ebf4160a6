"""Why a suite breaks: the smallest set of its arguments that the head still rejects at the same line.

The search itself lives in the harness (app/sandbox/harness/flagsearch.py, pure, standard library alone),
so that the sandbox can run it whole in the warm leader of the head (app/sandbox/harness/minimize.py)
while the host can run it a round at a time; this module is its name on the analysis side.
"""

from __future__ import annotations

from app.sandbox.harness.flagsearch import (
    Candidate,
    FlagSearch,
    Phase,
    Unit,
    contains,
    join,
    option,
    split_arguments,
)

__all__ = ["Candidate", "FlagSearch", "Phase", "Unit", "contains", "join", "option", "split_arguments"]
