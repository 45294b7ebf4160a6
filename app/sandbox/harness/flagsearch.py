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
A large focus (the arguments every rejected suite passes: 56 of #2077's 85) that is rejected alone skips
1: its pieces are left out instead, then the pieces of the pieces that were needed (delta debugging's
complements, each level in one round), and 2 goes on with one argument a piece: fewer sets when a few
arguments are needed among many. Every step stands on a set known rejected (leaving out several spare
pieces at once is tried, and undone when it goes too far), so arguments that stand for each other never
both go. A set whose outcome is known (tried before) is not tried again.
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
CHUNKS = 8  # pieces the first round leaves out of a large focus, each alone
SPLIT = 3  # pieces a needed piece is cut into, the next round
LARGE = 16  # a focus of at least this many arguments is cut into pieces, not left out one at a time


@dataclass
class FlagSearch:
    """The search over COUNT arguments, all of which together are rejected (the suite's own argv).

    FOCUS, when given, are the arguments likely to matter (those every rejected suite passes): the first
    round also tries them alone, and when they are rejected alone the others are never tried one by one.
    A large focus (LARGE arguments or more) is not left out an argument at a time either: the first round
    leaves out each of CHUNKS pieces of it, and each piece whose absence ends the rejection is cut in SPLIT
    the next round, until every piece is one argument (delta debugging's complements, all of a round at
    once); a few arguments needed among many cost a few sets per level instead of a set per argument.
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
    _pieces: list[Candidate] = field(default_factory=list)  # what "alone" leaves out of `kept`, each alone
    _fallback: tuple[Candidate, list[Candidate]] | None = None  # where to go back to when leaving out
    # every spare piece at once fails: a set known rejected, and the pieces to leave out of it
    _known: dict[Candidate, bool] = field(default_factory=dict)  # every set tried, and its outcome
    _tried: set[Candidate] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.best = self.universe = tuple(range(self.count))
        self._known[self.universe] = True
        if self.focus is not None and len(self.focus) >= self.count:
            self.focus = None
        self._pending = self.focus if self.focus is not None else self.universe
        if self.focus is not None and len(self.focus) >= LARGE:
            self._pending, self._pieces = (), _cut(self.focus, CHUNKS)

    @property
    def done(self) -> bool:
        return self.phase == "done"

    def candidates(self) -> list[Candidate]:
        """The sets to try this round (none when the search is over): a set whose outcome is known (tried
        before, with the same arguments) is not tried again."""
        return [candidate for candidate in self.wanted() if candidate not in self._known]

    @property
    def settling(self) -> bool:
        """Whether this round asks whether `kept` is the answer: `kept` and each of its arguments left out,
        the very sets that say a set is 1-minimal (the search completes with `kept` when they do)."""
        return self.phase == "alone" and all(len(piece) == 1 for piece in self._pieces)

    def wanted(self) -> list[Candidate]:
        """The sets this round asks about, those tried before too."""
        everything = tuple(range(self.count))
        if self.phase == "singles":
            focus = [self.focus] if self.focus is not None else []
            pieces = [_leave_out(self.focus, piece) for piece in self._pieces] if self.focus else []
            return [*focus, *pieces, *(_without(everything, index) for index in self._pending)]
        if self.phase == "alone":
            return [self.kept, *(_leave_out(self.kept, piece) for piece in self._pieces)]
        if self.phase == "augment":
            return [tuple(sorted((*self.kept, index))) for index in self.universe if index not in self.kept]
        return []

    def observe(self, rejected: Mapping[Candidate, bool]) -> None:
        """What this round's sets did at the head: True for a set still rejected at the finding's line."""
        self.rounds += 1
        self._known.update(rejected)
        for candidate, still in rejected.items():
            if still and len(candidate) < len(self.best):
                self.best = candidate
        if self.phase == "singles":
            self._after_singles()
        elif self.phase == "alone":
            self._after_alone()
        elif self.phase == "augment":
            self._after_augment()

    def _rejected(self, candidate: Candidate) -> bool:
        return self._known.get(candidate, False)

    def _after_singles(self) -> None:
        everything = tuple(range(self.count))
        self._needed += tuple(i for i in self._pending if not self._rejected(_without(everything, i)))
        if self.focus is not None:
            focus, self.focus = self.focus, None
            if self._rejected(focus):  # the rest is not needed: the search stays within the focus
                self.universe = focus
                if self._pieces:  # a large focus: its pieces were left out this round already
                    self.kept, self.phase = focus, "alone"
                    self._after_alone()
                    return
            else:  # the focus is not enough: leave the others out one at a time too, next round
                self._pending = everything if self._pieces else tuple(i for i in everything if i not in focus)
                self._pieces = []
                return
        self.kept = tuple(sorted(self._needed))
        self._pieces = [(index,) for index in self.kept]
        if self.kept == everything:  # every argument is needed: the whole suite is minimal
            self.phase, self.complete = "done", True
        else:
            self.phase = "alone"

    def _after_alone(self) -> None:
        self._tried.add(self.kept)
        if not self._rejected(self.kept):
            if self._fallback is not None:  # leaving out all the spare ones at once went too far
                (self.kept, self._pieces), self._fallback = self._fallback, None
                return
            self.phase = "augment"
            return
        self._fallback = None
        spare = [piece for piece in self._pieces if self._rejected(_leave_out(self.kept, piece))]
        needed = [part for piece in self._pieces if piece not in spare for part in _cut(piece, SPLIT)]
        if not spare:
            if all(len(piece) == 1 for piece in self._pieces):
                self.phase, self.complete, self.best = "done", True, self.kept
            else:  # each piece holds a needed argument: cut them smaller
                self._pieces = needed
            return
        # each is spare alone: all of them at once most often too (else back to leaving out the first)
        fallback = (_leave_out(self.kept, spare[0]), [*needed, *spare[1:]])
        self.kept = _leave_out(self.kept, tuple(index for piece in spare for index in piece))
        self._pieces = needed
        self._fallback = fallback if len(spare) > 1 else None
        if self.kept in self._tried:
            self.phase = "done"

    def _after_augment(self) -> None:
        grown = [candidate for candidate in self.wanted() if self._rejected(candidate)]
        if not grown:  # two or more arguments are missing together: cut short, the best seen stands
            self.phase = "done"
            return
        self.kept, self.phase = grown[0], "alone"
        self._pieces = [(index,) for index in self.kept]


def _cut(kept: Candidate, parts: int) -> list[Candidate]:
    """KEPT in PARTS pieces of about the same size, in order (fewer when it holds fewer arguments)."""
    parts = min(parts, len(kept))
    return [kept[len(kept) * part // parts:len(kept) * (part + 1) // parts] for part in range(parts)]


def _leave_out(kept: Candidate, piece: Candidate) -> Candidate:
    return tuple(index for index in kept if index not in piece)


def _without(kept: Candidate, index: int) -> Candidate:
    return tuple(other for other in kept if other != index)
