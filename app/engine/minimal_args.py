"""Why a suite breaks, measured: for each blocking new rejection, the smallest set of a suite's arguments
that the head still rejects at the same line, searched in the sandbox (app/analysis/verdict/minimal.py).

One suite per finding is searched: the one with the fewest arguments (every suite of a finding is rejected
at the same line). Each round runs the sets of every finding in one sandboxed harness run: one import of
the head, a fork per set. Bounded by ROUNDS and SECONDS: a search cut short says so.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.analysis.core.model import Finding, MinimalArgs, Suite, SuiteResult
from app.analysis.core.policy import Policy
from app.analysis.verdict.minimal import (
    Candidate,
    FlagSearch,
    Unit,
    contains,
    join,
    option,
    split_arguments,
)
from app.engine.suite_validation import validate_revision
from app.sandbox.interpreter import Interpreter

log = logging.getLogger(__name__)
ROUNDS = 8
SECONDS = 60.0

Validate = Callable[[list[Suite]], Mapping[str, SuiteResult]]


@dataclass
class _Search:
    finding: Finding
    suite: Suite
    units: list[Unit]
    search: FlagSearch
    argvs: list[tuple[str, ...]]  # of every suite of the finding


def explain_rejections(findings: Sequence[Finding], suites: Sequence[Suite],
                       head: Mapping[str, SuiteResult], validate: Validate, *, rounds: int = ROUNDS,
                       seconds: float = SECONDS) -> list[Finding]:
    """FINDINGS, each blocking new rejection with the minimal arguments of one of its suites."""
    by_id = {suite.id: suite for suite in suites}
    searches = [search for finding in findings
                if (search := _start(finding, by_id, head)) is not None]
    deadline = time.monotonic() + seconds
    for _ in range(rounds):
        running = [s for s in searches if not s.search.done]
        if not running or time.monotonic() >= deadline:
            break
        _round(running, validate)
    explained = {id(s.finding): _result(s) for s in searches}
    return [dataclasses.replace(f, minimal_args=explained[id(f)]) if id(f) in explained else f
            for f in findings]


def head_validator(head_tree: Path, policy: Policy, *, allow_unsandboxed: bool,
                   interpreter: Interpreter) -> Validate:
    """The head's outcomes alone: no record mode (the search asks where a set is rejected, and record mode
    would run every rejected set twice), no tracing."""
    outcomes_only = policy.model_copy(update={"validation": policy.validation.model_copy(
        update={"functions": []})})

    def validate(batch: list[Suite]) -> Mapping[str, SuiteResult]:
        results, _ = validate_revision(head_tree, outcomes_only, batch, trace={},
                                       allow_unsandboxed=allow_unsandboxed, interpreter=interpreter)
        return results

    return validate


def _start(finding: Finding, suites: Mapping[str, Suite], head: Mapping[str, SuiteResult]) -> _Search | None:
    """The search of FINDING on its suite with the fewest arguments, when the head rejects that suite at
    the finding's own line (a rejection found in record mode alone has no outcome there to keep)."""
    if finding.kind != "new_rejection" or finding.severity != "blocking" or finding.line is None:
        return None
    rejected = [suites[s] for s in finding.suites if s in suites and s in head
                and _at_line(head[s], finding)]
    if not rejected:
        return None
    suite = min(rejected, key=lambda s: (len(split_arguments(s.argv)), s.id))
    units = split_arguments(suite.argv)
    argvs = [suites[s].argv for s in finding.suites if s in suites]
    # the options every rejected suite passes are where the cause most likely is: tried first
    common = set.intersection(*({option(unit) for unit in split_arguments(s.argv)} for s in rejected))
    focus = tuple(index for index, unit in enumerate(units) if option(unit) in common)
    return _Search(finding, suite, units, FlagSearch(len(units), focus=focus), argvs)


def _at_line(result: SuiteResult, finding: Finding) -> bool:
    outcome = result.outcome
    return outcome.outcome == "rejected" and (outcome.path, outcome.line) == (finding.path, finding.line)


def _round(running: list[_Search], validate: Validate) -> None:
    batch: list[Suite] = []
    asked: list[tuple[_Search, Candidate, str]] = []
    for number, search in enumerate(running):
        for index, candidate in enumerate(search.search.candidates()):
            trial = f"{search.suite.id}~minimal-{number}-{index}"
            batch.append(dataclasses.replace(search.suite, id=trial, argv=join(search.units, candidate)))
            asked.append((search, candidate, trial))
    started = time.monotonic()
    results = validate(batch)
    log.info("minimal arguments: a round of %d sets in %.1f s", len(batch), time.monotonic() - started)
    for search in running:
        search.search.observe({candidate: trial in results and _at_line(results[trial], search.finding)
                               for owner, candidate, trial in asked if owner is search})


def _result(search: _Search) -> MinimalArgs:
    kept = search.search.best
    wanted = [search.units[index] for index in kept]
    every = all(contains(argv, wanted) for argv in search.argvs)
    return MinimalArgs(args=join(search.units, kept), count=len(kept), of=len(search.units),
                       suite=search.suite.id, complete=search.search.complete, every_suite_passes=every)

