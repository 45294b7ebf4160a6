"""A check whose base is unhealthy, run once more with one refine round of its policy.

A policy fitted at one revision goes blind at another: a new CI host directory, an option an upstream
parser now owns. When the check could not analyse and `init`'s refine rules add keys for the base's errors
(app/analysis/starter/policy_refine.py), both revisions are validated again with the refined policy, and
that result, when it could analyse, is the check's, saying what was added. One round only: a second would
be `init`'s loop, and each round costs a whole validation. The policy refined is the one the check was
given, which is the base revision's (or the user's `--policy`), never the head's: the head does not choose
what judges it, nor what the refinement reads (the errors' lines are read in the base's tree).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from app.analysis.core.policy import Policy
from app.analysis.starter.policy_refine import refine_policy
from app.analysis.verdict.report import CheckReport
from app.engine.check_errors import AnalysisError, Unloadable


def with_refinement(check: Callable[[Policy], CheckReport], policy: Policy, base_tree: Path) -> CheckReport:
    """CHECK's report with POLICY, or, when it could not analyse and a refine round adds keys, its report
    with the refined policy if that one could analyse (`refinement` says what was added). A refined check
    that cannot run or is still blind leaves the first answer standing, saying what was tried."""
    started = time.monotonic()
    first: CheckReport | None = None
    try:
        first = check(policy)
    except Unloadable as exc:
        failed, matrix, health = exc, exc.matrix, exc.health
    else:
        if first.health is None or first.health.could_analyse:
            return first
        matrix, health = first.matrix, first.health
    found = refine_policy(policy, matrix.suites, health, base_tree)
    if found is None:
        if first is None:
            raise AnalysisError(str(failed)) from None
        return first
    refined, refinement = found
    try:
        again = check(refined)
    except AnalysisError as exc:  # e.g. an environment the refinement asked for that does not build
        why_not = f"it could not run: {exc}"
    else:
        if again.could_analyse:
            return _whole(replace(again, refinement=refinement), started)
        # still blind: the first run's errors are the ones to read (the refinement may only have moved them)
        why_not = f"it could not analyse either: {again.health.reason if again.health else 'blind'}"
    tried = replace(refinement, why_not=why_not)
    if first is None:
        raise AnalysisError(f"{failed}; {tried.summary()}") from None
    return _whole(replace(first, refinement=tried), started)


def _whole(report: CheckReport, started: float) -> CheckReport:
    """REPORT whose total time is the whole check's, both runs (its steps' times are its own run's)."""
    return replace(report, timing=replace(report.timing, total_s=time.monotonic() - started))
