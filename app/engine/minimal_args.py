"""Why a suite breaks, measured: for each blocking new rejection, the smallest set of a suite's arguments
that the head still rejects at the same line, searched in the sandbox (app/analysis/verdict/minimal.py).

One suite per finding is searched: the one with the fewest arguments (every suite of a finding is rejected
at the same line). Two ways to run the same search (FlagSearch):
- `in_the_warm_leader` (what a check does): one sandboxed harness run for the whole search, which imports
  the head once, warms up with the searched suite and forks a child per set, round after round
  (app/sandbox/harness/minimize.py). The sandbox says which arguments it kept; the host believes only
  indexes of the arguments it sent (the head's code runs there: it can at worst misexplain its own
  rejection, never change a verdict, which the head's suite results decided before);
- `in_rounds`: the host drives the search, a harness run (an import of the head) per round.
Bounded by ROUNDS and SECONDS: a search cut short says so.
"""

from __future__ import annotations

import dataclasses
import logging
import os
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
from app.sandbox.runner import SandboxSpec, run_harness

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
    best: Candidate = ()  # what the searcher found: the smallest set seen rejected
    complete: bool = False
    rounds: list[int] = dataclasses.field(default_factory=list)  # the sets each round tried

    def __post_init__(self) -> None:
        self.best = tuple(range(len(self.units)))  # the whole suite, until the searcher says better


Searcher = Callable[[list[_Search], int, float], None]  # runs each search to its end or the bound


def explain_rejections(findings: Sequence[Finding], suites: Sequence[Suite],
                       head: Mapping[str, SuiteResult], searcher: Searcher, *, rounds: int = ROUNDS,
                       seconds: float = SECONDS) -> list[Finding]:
    """FINDINGS, each blocking new rejection with the minimal arguments of one of its suites."""
    by_id = {suite.id: suite for suite in suites}
    searches = [search for finding in findings
                if (search := _start(finding, by_id, head)) is not None]
    if searches:
        searcher(searches, rounds, seconds)
    explained = {id(s.finding): _result(s) for s in searches}
    return [dataclasses.replace(f, minimal_args=explained[id(f)]) if id(f) in explained else f
            for f in findings]


def in_rounds(validate: Validate) -> Searcher:
    """The host drives the search: each round's sets in one call of VALIDATE (a harness run each)."""
    def run(searches: list[_Search], rounds: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        for _ in range(rounds):
            running = [s for s in searches if not s.search.done]
            if not running or time.monotonic() >= deadline:
                break
            _round(running, validate)
        for search in searches:
            search.best, search.complete = search.search.best, search.search.complete

    return run


def in_the_warm_leader(head_tree: Path, policy: Policy, *, allow_unsandboxed: bool,
                       interpreter: Interpreter) -> Searcher:
    """The whole search in one sandboxed harness run at the head (app/sandbox/harness/minimize.py)."""
    def run(searches: list[_Search], rounds: int, seconds: float) -> None:
        by_id = {search.suite.id: search for search in searches}
        job = {"policy": _outcomes_only(policy).model_dump(mode="json", by_alias=True),
               "workers": os.cpu_count() or 1, "trace": {},
               "suites": [_searched(search) for search in searches],
               "minimal": {"rounds": rounds, "seconds": seconds}}
        started = time.monotonic()
        run = run_harness(SandboxSpec(program="validate.py", repo_dir=head_tree, job=job,
                                      limits=policy.harness.limits, allow_unsandboxed=allow_unsandboxed,
                                      interpreter=interpreter))
        for message in run.messages:
            search = by_id.get(str(message.get("search"))) if message.get("type") == "minimal" else None
            if search is not None:
                _believe(search, message)
                log.info("minimal arguments of %s: rounds (sets, seconds) %s", search.suite.id,
                         message.get("rounds"))
        log.info("minimal arguments: %d searches in one harness run, %.1f s (%s)", len(searches),
                 time.monotonic() - started, run.ended or "ended well")

    return run


def head_validator(head_tree: Path, policy: Policy, *, allow_unsandboxed: bool,
                   interpreter: Interpreter) -> Validate:
    """The head's outcomes alone, a harness run per call (for `in_rounds`)."""
    outcomes_only = _outcomes_only(policy)

    def validate(batch: list[Suite]) -> Mapping[str, SuiteResult]:
        results, _ = validate_revision(head_tree, outcomes_only, batch, trace={},
                                       allow_unsandboxed=allow_unsandboxed, interpreter=interpreter)
        return results

    return validate


def _outcomes_only(policy: Policy) -> Policy:
    """No record mode (the search asks where a set is rejected, and record mode would run every rejected
    set twice), and no tracing (the job's trace is empty)."""
    return policy.model_copy(update={"validation": policy.validation.model_copy(update={"functions": []})})


def _searched(search: _Search) -> dict[str, object]:
    focus = search.search.focus
    return {**search.suite.to_json(), "units": [list(unit) for unit in search.units],
            "focus": list(focus) if focus is not None else None, "path": search.finding.path,
            "line": search.finding.line}


def _believe(search: _Search, message: Mapping[str, object]) -> None:
    """The sandbox's answer, when it is indexes of the searched arguments, ascending, each once."""
    kept, complete, count = message.get("kept"), message.get("complete"), len(search.units)
    if not isinstance(kept, list) or not isinstance(complete, bool) \
            or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < count for i in kept) \
            or kept != sorted(set(kept)):
        log.warning("minimal arguments: ignored a malformed answer of the sandbox: %.200r", message)
        return
    search.best, search.complete = tuple(kept), complete
    sets = message.get("sets")  # each round's sets of this search: what it cost, never what it found
    if isinstance(sets, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                      for n in sets):
        search.rounds = sets


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
        search.rounds.append(sum(1 for owner, _, _ in asked if owner is search))
        search.search.observe({candidate: trial in results and _at_line(results[trial], search.finding)
                               for owner, candidate, trial in asked if owner is search})


def _result(search: _Search) -> MinimalArgs:
    kept = search.best
    wanted = [search.units[index] for index in kept]
    every = all(contains(argv, wanted) for argv in search.argvs)
    return MinimalArgs(args=join(search.units, kept), count=len(kept), of=len(search.units),
                       suite=search.suite.id, complete=search.complete, every_suite_passes=every,
                       sets=sum(search.rounds), rounds=len(search.rounds))

