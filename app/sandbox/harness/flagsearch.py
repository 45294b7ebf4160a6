"""Why a suite breaks: the search for the smallest set of its arguments that the head still rejects at
the same line. Pure and standard library alone: the host (app/analysis/verdict/minimal.py re-exports it) and
the validate harness inside the sandbox (minimize.py, which runs the whole search in the warm leader of the
head) run the same search.

A suite's argv is cut into arguments (an option with the values after it, `--lora-rank 16`); the search
proposes sets of arguments to try, a round at a time, and is told which of them the head still rejects at
the finding's line. Each round is a fork per set of the warm harness, so the search asks for many sets per
round and few rounds, unlike textbook delta debugging's one test at a time:
1. drop each argument alone: those whose absence ends the rejection are necessary;
2. try the necessary ones alone, and each of them left out (is every one needed?);
3. when they are not enough (two arguments each stand for the other: `--colocate` turns offload on
   that `--offload-train` also asks for), add each other argument to them in turn, then back to 2.
The result is 1-minimal (no argument of it can be left out) when the search completes; a search cut
short by its bound reports the smallest set it saw rejected, and says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Unit = tuple[str, ...]  # one argument: an option and its values, or a leading positional word
Candidate = tuple[int, ...]  # the indexes of the arguments kept, ascending
_NUMBER = re.compile(r"-\.?\d")  # "-1", "-0.5": a value, not an option


def split_arguments(argv: Sequence[str]) -> list[Unit]:
    """ARGV as arguments: each option with the words after it up to the next option."""
    units: list[list[str]] = []
    for word in argv:
        if (word.startswith("-") and word != "-" and not _NUMBER.match(word)) or not units:
            units.append([word])
        else:
            units[-1].append(word)
    return [tuple(unit) for unit in units]


def join(units: Sequence[Unit], kept: Candidate) -> tuple[str, ...]:
    return tuple(word for index in kept for word in units[index])


def option(unit: Unit) -> str:
    """The option an argument sets (`--lr` of `--lr 1e-5` and of `--lr=1e-5`), or its word."""
    return unit[0].split("=", 1)[0]


def contains(argv: Sequence[str], wanted: Sequence[Unit]) -> bool:
    """Whether ARGV passes every option of WANTED (with whatever values: suites differ in their ranks and
    sizes, and the option is what the rejection is about)."""
    have = {option(unit) for unit in split_arguments(argv)}
    return all(option(unit) in have for unit in wanted)


Phase = Literal["singles", "alone", "augment", "done"]


@dataclass
class FlagSearch:
    """The search over COUNT arguments, all of which together are rejected (the suite's own argv).

    FOCUS, when given, are the arguments likely to matter (those every rejected suite passes): the first
    round also tries them alone, and when they are rejected alone the others are never tried one by one.
    """

    count: int
    focus: Candidate | None = None
    phase: Phase = "singles"
    kept: Candidate = ()  # the set the search stands on
    best: Candidate = ()  # the smallest set seen rejected
    complete: bool = False
    rounds: int = 0
    universe: Candidate = ()  # the arguments the search draws from
    _pending: Candidate = ()  # arguments still to be left out one at a time
    _needed: Candidate = ()  # arguments whose absence ended the rejection
    _fallback: Candidate | None = None  # where to go back to when leaving out every spare one fails
    _tried: set[Candidate] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.best = self.universe = tuple(range(self.count))
        if self.focus is not None and len(self.focus) >= self.count:
            self.focus = None
        self._pending = self.focus if self.focus is not None else self.universe

    @property
    def done(self) -> bool:
        return self.phase == "done"

    def candidates(self) -> list[Candidate]:
        """The sets to try this round (none when the search is over)."""
        everything = tuple(range(self.count))
        if self.phase == "singles":
            focus = [self.focus] if self.focus is not None else []
            return [*focus, *(_without(everything, index) for index in self._pending)]
        if self.phase == "alone":
            return [self.kept, *(_without(self.kept, index) for index in self.kept)]
        if self.phase == "augment":
            return [tuple(sorted((*self.kept, index))) for index in self.universe if index not in self.kept]
        return []

    def observe(self, rejected: Mapping[Candidate, bool]) -> None:
        """What this round's sets did at the head: True for a set still rejected at the finding's line."""
        self.rounds += 1
        for candidate, still in rejected.items():
            if still and len(candidate) < len(self.best):
                self.best = candidate
        if self.phase == "singles":
            self._after_singles(rejected)
        elif self.phase == "alone":
            self._after_alone(rejected)
        elif self.phase == "augment":
            self._after_augment(rejected)

    def _after_singles(self, rejected: Mapping[Candidate, bool]) -> None:
        everything = tuple(range(self.count))
        self._needed += tuple(i for i in self._pending if not rejected.get(_without(everything, i)))
        if self.focus is not None:
            focus, self.focus = self.focus, None
            if rejected.get(focus):  # the rest is not needed: the search stays within the focus
                self.universe = focus
            else:  # the focus is not enough: leave the others out one at a time too, next round
                self._pending = tuple(i for i in everything if i not in focus)
                return
        self.kept = tuple(sorted(self._needed))
        if self.kept == everything:  # every argument is needed: the whole suite is minimal
            self.phase, self.complete = "done", True
        else:
            self.phase = "alone"

    def _after_alone(self, rejected: Mapping[Candidate, bool]) -> None:
        self._tried.add(self.kept)
        if not rejected.get(self.kept):
            if self._fallback is not None:  # leaving out all the spare ones at once went too far
                self.kept, self._fallback = self._fallback, None
                return
            self.phase = "augment"
            return
        self._fallback = None
        spare = [index for index in self.kept if rejected.get(_without(self.kept, index))]
        if not spare:
            self.phase, self.complete, self.best = "done", True, self.kept
            return
        # each is spare alone: all of them at once most often too (else back to leaving out the first)
        fallback = _without(self.kept, spare[0])
        self.kept = tuple(index for index in self.kept if index not in spare)
        self._fallback = fallback if len(spare) > 1 else None
        if self.kept in self._tried:
            self.phase = "done"

    def _after_augment(self, rejected: Mapping[Candidate, bool]) -> None:
        grown = [candidate for candidate in self.candidates() if rejected.get(candidate)]
        if not grown:  # two or more arguments are missing together: cut short, the best seen stands
            self.phase = "done"
            return
        self.kept, self.phase = grown[0], "alone"


def _without(kept: Candidate, index: int) -> Candidate:
    return tuple(other for other in kept if other != index)
