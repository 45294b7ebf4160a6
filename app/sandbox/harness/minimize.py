"""Why a suite breaks, searched whole in the warm leader of the head: a fork per set, no import per round.

Runs INSIDE the sandbox, in a warm leader (leader.run_searches) that imported the head once and warmed up
with the searched suite: imports nothing of `app`, only the standard library and sibling harness modules.
Each search is the host's (app/engine/minimal_args.py): a suite the head rejects at a line, its argv cut
into arguments, the arguments tried first (`focus`). The rounds of the search (flagsearch.FlagSearch, the
very search the host would drive a sandbox run at a time) each fork a child per set from this warm
leader; a set counts as rejected when its outcome is a rejection at the search's line. Bounded by `rounds`
and `seconds`, checked before each round. Sends a `found` line per set tried (the parents' stall limits
start again with it) and one per search at the end: the kept arguments' indexes and whether it completed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import common, flagsearch, suiterun
else:
    import common
    import flagsearch
    import suiterun

Send = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Bound:
    rounds: int
    seconds: float
    workers: int
    suite_seconds: float  # each set's own limit, as a suite's


@dataclass
class _Search:
    suite: dict[str, Any]  # the searched suite: its id, entry, environment and whole argv
    units: list[tuple[str, ...]]
    where: tuple[str | None, int | None]  # the line the head rejects the suite at
    flags: flagsearch.FlagSearch


def search(revision: suiterun.Revision, searches: list[dict[str, Any]], send: Send, bound: Bound) -> None:
    """Every search of SEARCHES (one environment) to its end or its bound; the result of each is sent."""
    running = [_start(raw) for raw in searches]
    deadline = time.monotonic() + bound.seconds
    rounds: list[tuple[int, float]] = []  # each round's sets and seconds, for the host's log
    for _ in range(bound.rounds):
        active = [s for s in running if not s.flags.done]
        if not active or time.monotonic() >= deadline:
            break
        started = time.monotonic()
        rounds.append((_round(revision, active, send, bound), round(time.monotonic() - started, 3)))
    for each in running:
        send({"kind": "found", "search": each.suite["id"], "kept": list(each.flags.best),
              "complete": each.flags.complete, "rounds": rounds})


def _start(raw: dict[str, Any]) -> _Search:
    units = [tuple(str(word) for word in unit) for unit in raw["units"]]
    focus = raw.get("focus")
    flags = flagsearch.FlagSearch(len(units),
                                  focus=tuple(int(i) for i in focus) if focus is not None else None)
    return _Search(raw, units, (raw.get("path"), raw.get("line")), flags)


def _round(revision: suiterun.Revision, active: list[_Search], send: Send, bound: Bound) -> int:
    """One round of every active search, its sets forked from this process at most `workers` at once;
    returns how many sets it tried."""
    batch: list[dict[str, Any]] = []
    asked: list[tuple[_Search, tuple[int, ...], str]] = []
    for number, each in enumerate(active):
        for index, candidate in enumerate(each.flags.candidates()):
            trial = f"{each.suite['id']}~minimal-{number}-{index}"
            batch.append({**each.suite, "id": trial, "argv": list(flagsearch.join(each.units, candidate))})
            asked.append((each, candidate, trial))
    where: dict[str, tuple[Any, Any] | None] = {}

    def reached(trial: dict[str, Any], result: dict[str, Any]) -> None:
        outcome = result.get("outcome")
        rejected = isinstance(outcome, dict) and outcome.get("outcome") == "rejected"
        where[trial["id"]] = (outcome["path"], outcome["line"]) if isinstance(outcome, dict) and rejected \
            else None
        send({"kind": "found", "tried": trial["id"]})

    def failed(trial: dict[str, Any], why: str) -> None:  # a crash or a timeout: not rejected there
        send({"kind": "found", "tried": trial["id"]})

    common.run_forked(batch, lambda trial: {"outcome": suiterun.outcome_only(revision, trial)},
                      workers=bound.workers, timeout=bound.suite_seconds, on_result=reached,
                      on_failure=failed)
    for each in active:
        each.flags.observe({candidate: where.get(trial) == each.where
                            for owner, candidate, trial in asked if owner is each})
    return len(batch)
