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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import common, flagsearch, suiterun, tolerant
else:
    import common
    import flagsearch
    import suiterun
    import tolerant

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
    fresh: dict[tuple[int, ...], bool] = field(default_factory=dict)  # sets tried from scratch: rejected?
    sets: list[int] = field(default_factory=list)  # how many sets of it each round it took part in tried


Asked = tuple[_Search, tuple[int, ...], str, bool]  # a search, a set, its trial's id, from scratch?


def search(revision: suiterun.Revision, searches: list[dict[str, Any]], send: Send, bound: Bound) -> None:
    """Every search of SEARCHES (one environment) to its end or its bound; the result of each is sent.

    Each set starts knowing the attributes the warm-up (the whole suite) learned: learning them again, a
    retry of the entry each, would double what a set costs. Whether that changed an answer is asked from
    scratch, as a suite runs: the set found, and each of its arguments left out when it is said to be
    minimal. The round that asks exactly those sets (flagsearch's `settling`) asks them from scratch
    already: a search that completes there needs no round of its own to confirm, one more trip through
    the forks for the same sets. A search whose answer does not hold is searched again, learning as a
    suite does.
    """
    learned = dict(tolerant.ledger.learned)  # the warm-up ran the whole suite in this process
    deadline = time.monotonic() + bound.seconds
    rounds: list[tuple[int, float]] = []  # each round's sets and seconds, for the host's log
    running = [_start(raw) for raw in searches]
    _rounds(revision, running, send, bound, deadline, rounds, learned)
    if learned:
        doubtful = _unconfirmed(revision, running, send, bound, rounds)
        again = [_start(each.suite, each.sets) for each in doubtful]
        _rounds(revision, again, send, bound, deadline, rounds, {})
        running = [each for each in running if each not in doubtful] + again
    for each in running:
        send({"kind": "found", "search": each.suite["id"], "kept": list(each.flags.best),
              "complete": each.flags.complete, "sets": each.sets, "rounds": rounds})


def _rounds(revision: suiterun.Revision, running: list[_Search], send: Send, bound: Bound, deadline: float,
            rounds: list[tuple[int, float]], learned: Mapping[str, Any]) -> None:
    for _ in range(bound.rounds):
        active = [s for s in running if not s.flags.done]
        if not active or time.monotonic() >= deadline:
            return
        started = time.monotonic()
        rounds.append((_round(revision, active, send, bound, learned), round(time.monotonic() - started, 3)))


def _start(raw: dict[str, Any], sets: list[int] | None = None) -> _Search:
    """The search of RAW, from its start (SETS: what it tried before, when it is searched again)."""
    units = [tuple(str(word) for word in unit) for unit in raw["units"]]
    focus = raw.get("focus")
    flags = flagsearch.FlagSearch(len(units),
                                  focus=tuple(int(i) for i in focus) if focus is not None else None)
    return _Search(raw, units, (raw.get("path"), raw.get("line")), flags, sets=list(sets or []))


def _round(revision: suiterun.Revision, active: list[_Search], send: Send, bound: Bound,
           learned: Mapping[str, Any]) -> int:
    """One round of every active search; returns how many sets it tried. A settling round (one that may
    complete the search) is asked from scratch when the others start knowing what the warm-up learned,
    and asks again, from scratch, the sets of it tried knowing that."""
    asked: list[Asked] = []
    for number, each in enumerate(active):
        scratch = bool(learned) and each.flags.settling
        sets = [kept for kept in each.flags.wanted() if kept not in each.fresh] if scratch \
            else each.flags.candidates()
        asked += [(each, kept, f"{each.suite['id']}~minimal-{number}-{index}", scratch)
                  for index, kept in enumerate(sets)]
    where = _try(revision, asked, send, bound, learned)
    for each in active:
        each.flags.observe(_rejected(each, asked, where))
    return len(asked)


def _unconfirmed(revision: suiterun.Revision, running: list[_Search], send: Send, bound: Bound,
                 rounds: list[tuple[int, float]]) -> list[_Search]:
    """The searches whose answer does not hold from scratch: the set found is not rejected at the line, or
    (a complete search) one of its arguments can be left out. Only the sets not yet tried from scratch
    are tried (a search that completed in a settling round tried them all)."""
    asked: list[Asked] = []
    for number, each in enumerate(running):
        asked += [(each, kept, f"{each.suite['id']}~confirm-{number}-{index}", True)
                  for index, kept in enumerate(_proof(each)) if kept not in each.fresh]
    if asked:
        started = time.monotonic()
        where = _try(revision, asked, send, bound, {})
        rounds.append((len(asked), round(time.monotonic() - started, 3)))
        for each in running:
            _rejected(each, asked, where)
    doubtful = []
    for each in running:
        said = [each.fresh[kept] for kept in _proof(each)]
        if not said[0] or any(said[1:]):
            doubtful.append(each)
    return doubtful


def _proof(each: _Search) -> list[tuple[int, ...]]:
    """The sets that hold the answer from scratch: the set found, and (a complete search: said to be
    minimal) each of its arguments left out."""
    best = each.flags.best
    return [best, *(tuple(i for i in best if i != left) for left in best)] if each.flags.complete else [best]


def _rejected(each: _Search, asked: list[Asked], where: Mapping[str, Any]) -> dict[tuple[int, ...], bool]:
    """EACH's sets of ASKED, whether each is rejected at the search's line; those from scratch noted."""
    rejected = {kept: where.get(trial) == each.where for owner, kept, trial, _ in asked if owner is each}
    if rejected:
        each.sets.append(len(rejected))
    each.fresh.update({kept: rejected[kept] for owner, kept, _, fresh in asked if owner is each and fresh})
    return rejected


def _try(revision: suiterun.Revision, asked: list[Asked], send: Send, bound: Bound,
         learned: Mapping[str, Any]) -> dict[str, tuple[Any, Any] | None]:
    """Where each set is rejected (None: not rejected), its sets forked from this process at most `workers`
    at once, each starting with LEARNED learned but those asked from scratch."""
    batch = [{**each.suite, "id": trial, "argv": list(flagsearch.join(each.units, candidate))}
             for each, candidate, trial, _ in asked]
    scratch = {trial for _, _, trial, fresh in asked if fresh}
    where: dict[str, tuple[Any, Any] | None] = {}

    def reached(trial: dict[str, Any], result: dict[str, Any]) -> None:
        outcome = result.get("outcome")
        rejected = isinstance(outcome, dict) and outcome.get("outcome") == "rejected"
        where[trial["id"]] = (outcome["path"], outcome["line"]) if isinstance(outcome, dict) and rejected \
            else None
        send({"kind": "found", "tried": trial["id"]})

    def failed(trial: dict[str, Any], why: str) -> None:  # a crash or a timeout: not rejected there
        send({"kind": "found", "tried": trial["id"]})

    common.run_forked(batch, lambda trial: {"outcome": suiterun.outcome_only(
                          revision, trial, {} if trial["id"] in scratch else learned)},
                      workers=bound.workers, timeout=bound.suite_seconds, on_result=reached,
                      on_failure=failed)
    return where
