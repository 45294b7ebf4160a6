"""Why a suite breaks: the smallest set of its arguments the head still rejects at the finding's line.

The search on its own (pure, against validators written as Python predicates), then the real thing: the
example's check in the sandbox names `--colocate --disable-weights-backuper --lora-rank 16`, in every
form of the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from analysis_envs import environment_of
from needs import working_sandbox

from app.analysis.core.model import Finding, MinimalArgs, Outcome, Suite, SuiteResult
from app.analysis.core.policy import Policy, parse_policy
from app.analysis.verdict.minimal import FlagSearch, contains, split_arguments
from app.analysis.verdict.report import CheckReport
from app.analysis.verdict.workflow_commands import annotation
from app.engine.minimal_args import explain_rejections, head_validator, in_rounds, in_the_warm_leader
from app.sandbox.harness.flagsearch import CHUNKS
from app.sandbox.interpreter import Interpreter
from app.triage.pr_report import check_output, comment_markdown

PROJECT = Path(__file__).resolve().parents[1]
EXAMPLE = PROJECT / "examples" / "incident"


@pytest.mark.parametrize(("argv", "units"), [
    (["--a", "1", "--b", "--c", "x", "y"], [("--a", "1"), ("--b",), ("--c", "x", "y")]),
    (["train", "--lr", "-0.5", "--shift", "-1", "-v"], [("train",), ("--lr", "-0.5"), ("--shift", "-1"),
                                                        ("-v",)]),
    (["--input", "-", "--x=3"], [("--input", "-"), ("--x=3",)]),
    ([], []),
])
def test_arguments_are_options_with_their_values(argv: list[str], units: list[tuple[str, ...]]) -> None:
    assert split_arguments(argv) == units


def test_a_suite_passes_a_set_when_it_passes_each_of_its_options_whatever_the_values() -> None:
    assert contains(["--a", "1", "--b"], [("--b",), ("--a", "1")])
    assert contains(["--a=2", "--b"], [("--a", "1")])  # a rank of 32 here, 16 there: the same option
    assert not contains(["--a", "2"], [("--a", "1"), ("--b",)])


def search(count: int, rejected: Callable[[set[int]], bool], rounds: int = 20) -> FlagSearch:
    flags = FlagSearch(count)
    while not flags.done and flags.rounds < rounds:
        flags.observe({candidate: rejected(set(candidate)) for candidate in flags.candidates()})
    return flags


def test_two_arguments_needed_together_are_found_in_two_rounds() -> None:
    found = search(10, lambda kept: {2, 5} <= kept)
    assert (found.best, found.complete, found.rounds) == ((2, 5), True, 2)


def test_two_arguments_that_stand_for_each_other_then_one_of_them_is_added() -> None:
    """`--colocate` turns offload on, which `--offload-train` asks for too: neither is needed alone."""
    found = search(6, lambda kept: 3 in kept and bool(kept & {1, 4}))
    assert (found.best, found.complete) == ((1, 3), True)


def test_a_suite_whose_every_argument_is_needed_is_minimal_itself() -> None:
    found = search(3, lambda kept: kept == {0, 1, 2})
    assert (found.best, found.complete, found.rounds) == ((0, 1, 2), True, 1)


def test_no_argument_needed_is_the_empty_set() -> None:
    found = search(4, lambda kept: True)
    assert (found.best, found.complete) == ((), True)


def test_arguments_needed_only_beside_others_are_left_out_together() -> None:
    """6 is needed while 3 is there (3 without 6 fails elsewhere), 7 while 4 is: once 3 and 4 are gone,
    both are spare, and one round leaves both out."""
    def rejected(kept: set[int]) -> bool:
        return {2, 5} <= kept and not (3 in kept and 6 not in kept) and not (4 in kept and 7 not in kept)

    found = search(9, rejected)
    assert (found.best, found.complete, found.rounds) == ((2, 5), True, 3)


def test_leaving_out_every_spare_one_at_once_can_go_too_far_then_one_at_a_time() -> None:
    """1 and 2 stand for each other, but each is needed beside an argument (3, 4) that the first round
    keeps: once those are gone, each alone is spare, both together are not."""
    def rejected(kept: set[int]) -> bool:
        return 0 in kept and bool(kept & {1, 2}) and not (1 not in kept and 3 in kept) \
            and not (2 not in kept and 4 in kept)

    found = search(5, rejected)
    assert (found.best, found.complete, found.rounds) == ((0, 2), True, 4)


def test_a_focus_rejected_alone_spares_trying_the_other_arguments() -> None:
    flags = FlagSearch(8, focus=(1, 3, 5))
    assert flags.candidates() == [(1, 3, 5), *(tuple(i for i in range(8) if i != j) for j in (1, 3, 5))]
    while not flags.done:
        flags.observe({c: {3, 5} <= set(c) for c in flags.candidates()})
    assert (flags.best, flags.complete, flags.rounds) == ((3, 5), True, 2)


def test_a_focus_that_is_not_enough_then_the_others_are_tried() -> None:
    found = FlagSearch(6, focus=(0, 1))
    while not found.done:
        found.observe({c: {1, 4} <= set(c) for c in found.candidates()})
    assert (found.best, found.complete, found.rounds) == ((1, 4), True, 3)


def test_what_a_single_addition_cannot_find_is_cut_short_with_the_best_seen() -> None:
    found = search(6, lambda kept: 0 in kept and ({1, 2} <= kept or {3, 4} <= kept))
    assert not found.complete and found.done
    assert len(found.best) == 5 and 0 in found.best


def searched(flags: FlagSearch, rejected: Callable[[set[int]], bool]) -> tuple[FlagSearch, list[int]]:
    """FLAGS to its end against REJECTED, and how many sets each round tried."""
    sets = []
    while not flags.done and flags.rounds < 20:
        candidates = flags.candidates()
        sets.append(len(candidates))
        flags.observe({candidate: rejected(set(candidate)) for candidate in candidates})
    return flags, sets


LARGE_FOCUS = tuple(range(4, 60))  # 56 arguments every rejected suite passes, of 64: #2077's shape


def test_a_large_focus_is_cut_into_pieces_and_finds_what_one_at_a_time_finds() -> None:
    """Five arguments needed among 56: each piece whose absence ends the rejection is cut smaller, round
    after round; the answer is the one-at-a-time search's, for fewer sets."""
    needed = {9, 23, 24, 40, 57}
    flags = FlagSearch(64, focus=LARGE_FOCUS)
    pieces = [LARGE_FOCUS[i:i + len(LARGE_FOCUS) // CHUNKS] for i in range(0, 56, 56 // CHUNKS)]
    assert flags.candidates() == [LARGE_FOCUS, *(tuple(i for i in LARGE_FOCUS if i not in piece)
                                                 for piece in pieces)]
    found, sets = searched(flags, lambda kept: needed <= kept)
    assert (found.best, found.complete) == (tuple(sorted(needed)), True)
    one_at_a_time = search(64, lambda kept: needed <= kept)
    assert one_at_a_time.best == found.best
    assert sum(sets) < 56 and len(sets) <= 8


def test_arguments_that_stand_for_each_other_in_two_pieces_are_not_both_left_out() -> None:
    """`--colocate` and `--offload-train` both turn offload on: the piece of each is spare alone, the two
    together are not; the search goes back to leaving out the first alone and keeps the other."""
    def rejected(kept: set[int]) -> bool:
        return 30 in kept and bool(kept & {5, 55})

    found, _ = searched(FlagSearch(64, focus=LARGE_FOCUS), rejected)
    assert found.complete and len(found.best) == 2 and 30 in found.best
    assert rejected(set(found.best)) and not any(rejected(set(found.best) - {i}) for i in found.best)


def test_needed_only_beside_another_argument_inside_a_large_focus_is_left_out_once_that_one_is() -> None:
    """Leaving out 11 alone makes the suite fail elsewhere while 50 is there: the pieces holding 11 look
    needed until 50's piece is gone, then 11 is left out too."""
    def rejected(kept: set[int]) -> bool:
        return {20, 33} <= kept and not (50 in kept and 11 not in kept)

    found, _ = searched(FlagSearch(64, focus=LARGE_FOCUS), rejected)
    assert (found.best, found.complete) == ((20, 33), True)


def test_a_large_focus_that_is_not_enough_then_every_argument_is_left_out_alone() -> None:
    flags = FlagSearch(64, focus=LARGE_FOCUS)
    found, sets = searched(flags, lambda kept: {1, 30} <= kept)
    assert (found.best, found.complete) == ((1, 30), True)
    assert sets[1] == 64  # the second round: each of the suite's arguments left out, the search's old way


def test_a_set_tried_before_is_not_tried_again() -> None:
    """The needed ones of three, 0 and 1, are the suite less 2, tried the first round: the second round
    tries only each of them left out."""
    flags = FlagSearch(3)
    flags.observe({candidate: {0, 1} <= set(candidate) for candidate in flags.candidates()})
    assert flags.kept == (0, 1) and flags.candidates() == [(1,), (0,)]
    flags.observe({candidate: False for candidate in flags.candidates()})
    assert (flags.best, flags.complete, flags.rounds) == ((0, 1), True, 2)


# The search against a validator, as the engine runs it

ARGV = ("--num-gpus", "8", "--colocate", "--disable-weights-backuper", "--lora-rank", "16", "--lr", "1e-5")
LINE = 21


def validator(calls: list[int]) -> Callable[[list[Suite]], Mapping[str, SuiteResult]]:
    """The example's head in Python: LoRA, offload (which --colocate turns on) and no weights backuper are
    rejected at line 21; no --num-gpus at line 17."""
    def validate(batch: list[Suite]) -> Mapping[str, SuiteResult]:
        calls.append(len(batch))
        results = {}
        for suite in batch:
            words = set(suite.argv)
            if "--num-gpus" not in words:
                outcome = Outcome("rejected", "AssertionError", "--num-gpus", "arguments.py", 17)
            elif {"--lora-rank", "--colocate", "--disable-weights-backuper"} <= words:
                outcome = Outcome("rejected", "AssertionError", "LoRA", "arguments.py", LINE)
            else:
                outcome = Outcome("accepted")
            results[suite.id] = SuiteResult(suite.id, outcome)
        return results

    return validate


def finding(*suites: str) -> Finding:
    return Finding("new_rejection", "blocking", "AssertionError: LoRA", scripts=("ci/e2e.py",),
                   suites=suites, path="arguments.py", line=LINE, in_diff=True)


def test_each_blocking_rejection_gets_the_arguments_it_needs_from_its_shortest_suite() -> None:
    short = Suite("ci/e2e.py#1", "ci/e2e.py", ARGV)
    long = Suite("ci/e2e.py#2", "ci/e2e.py", (*ARGV, "--seed", "3"))
    head = {s.id: SuiteResult(s.id, Outcome("rejected", "AssertionError", "LoRA", "arguments.py", LINE))
            for s in (short, long)}
    calls: list[int] = []
    [explained] = explain_rejections([finding(long.id, short.id)], [short, long], head,
                                     in_rounds(validator(calls)))
    assert explained.minimal_args == MinimalArgs(
        args=("--num-gpus", "8", "--colocate", "--disable-weights-backuper", "--lora-rank", "16"), count=4,
        of=5, suite=short.id, complete=True, every_suite_passes=True)
    # a round per batch: each argument left out, then each needed one left out of them (the needed ones
    # alone are the suite less its spare argument, tried the round before: not tried again)
    assert calls == [5, 4]


def test_the_bound_cuts_the_search_short_and_says_so() -> None:
    short = Suite("ci/e2e.py#1", "ci/e2e.py", ARGV)
    head = {short.id: SuiteResult(short.id, Outcome("rejected", "AssertionError", "LoRA", "arguments.py",
                                                    LINE))}
    [explained] = explain_rejections([finding(short.id)], [short], head, in_rounds(validator([])), rounds=1)
    assert explained.minimal_args is not None and not explained.minimal_args.complete


def test_warnings_and_rejections_elsewhere_are_left_as_they_are() -> None:
    suite = Suite("ci/e2e.py#1", "ci/e2e.py", ARGV)
    head = {suite.id: SuiteResult(suite.id, Outcome("rejected", "AssertionError", "x", "arguments.py", 99))}
    warning = Finding("new_rejection", "warning", "x", suites=(suite.id,), path="arguments.py", line=LINE)
    elsewhere = finding(suite.id)  # the head rejects this suite at line 99, not 21: record mode found it
    calls: list[int] = []
    explained = explain_rejections([warning, elsewhere], [suite], head, in_rounds(validator(calls)))
    assert explained == [warning, elsewhere]
    assert calls == []


# The real check, in the sandbox


def test_the_example_check_names_the_three_arguments_the_new_assert_rejects(tmp_path: Path) -> None:
    working_sandbox()
    done = subprocess.run([sys.executable, "-m", "app.cli", "check", "--base-tree", str(EXAMPLE / "base"),
                           "--head-tree", str(EXAMPLE / "head"), "--policy", str(EXAMPLE / "policy.yml"),
                           "--format", "json", "--cache-dir", str(tmp_path / "cache")], cwd=PROJECT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    [blocking] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert blocking["minimal_args"] == {
        "args": ["--colocate", "--disable-weights-backuper", "--lora-rank", "16"], "count": 3, "of": 4,
        "suite": "ci/test_e2e.py#2", "complete": True, "every_suite_passes": True, "sets": 7, "rounds": 2}
    assert report["timing"]["minimize_s"] > 0
    # the sandbox's processes are counted, through bubblewrap and the reaper: the import and the sets
    assert 0 < report["timing"]["minimize_cpu_s"] < report["timing"]["total_s"] * (os.cpu_count() or 1)
    explained = Finding.from_json(blocking)
    said = "`--colocate --disable-weights-backuper --lora-rank 16`, 3 of 4 arguments; every listed suite"
    comment = comment_markdown(CheckReport(None, None, validation_changed=True, findings=(explained,)))
    assert f"Rejected because of {said} passes these." in comment
    [spec] = check_output(CheckReport(None, None, validation_changed=True, findings=(explained,))).annotations
    assert f"rejected because of {said} passes these" in spec.message
    assert f"rejected because of {said} passes these" in annotation(explained)


# The whole search in the warm leader of the head against the host's rounds, on a toy repository

TOY = '''import argparse


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    for flag in ("--a", "--b", "--c", "--d", "--e", "--f"):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--rank", type=int, default=0)
    args = parser.parse_args(argv)
    assert not (args.rank and args.c and (args.a or args.d)), "a rank with c, and a or d"
    return args
'''
TOY_LINE = 10  # the assert: `--a` and `--d` stand for each other, so neither is needed alone
TOY_ARGV = ("--a", "--b", "--c", "--d", "--e", "--f", "--rank", "8")


def toy_search(tmp_path: Path, source: str = TOY, line: int = TOY_LINE, argv: tuple[str, ...] = TOY_ARGV,
               ) -> tuple[Path, Policy, Interpreter, Suite, Finding, dict[str, SuiteResult]]:
    tree = tmp_path / "head"
    tree.mkdir()
    (tree / "arguments.py").write_text(source)
    policy = parse_policy("version: 1\nvalidation:\n  paths: [arguments.py]\n  entry: arguments:parse_args\n"
                          "matrix:\n  sources: []\n", "the toy policy")
    interpreter = environment_of(policy.harness)
    suite = Suite("ci/toy.sh#1", "ci/toy.sh", argv)
    rejected = Outcome("rejected", "AssertionError", "a rank with c, and a or d", "arguments.py", line)
    toy = Finding("new_rejection", "blocking", "AssertionError: a rank", scripts=("ci/toy.sh",),
                  suites=(suite.id,), path="arguments.py", line=line, in_diff=True)
    return tree, policy, interpreter, suite, toy, {suite.id: SuiteResult(suite.id, rejected)}


def test_the_search_in_the_warm_leader_finds_what_the_rounds_find(tmp_path: Path) -> None:
    working_sandbox()
    tree, policy, interpreter, suite, toy, head = toy_search(tmp_path)
    [by_rounds] = explain_rejections([toy], [suite], head, in_rounds(head_validator(
        tree, policy, allow_unsandboxed=False, interpreter=interpreter)))
    [in_leader] = explain_rejections([toy], [suite], head, in_the_warm_leader(
        tree, policy, allow_unsandboxed=False, interpreter=interpreter))
    assert in_leader.minimal_args == by_rounds.minimal_args == MinimalArgs(
        args=("--a", "--c", "--rank", "8"), count=3, of=7, suite=suite.id, complete=True,
        every_suite_passes=True)


LEARNING = '''import argparse


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    for flag in ("--a", "--b", "--c"):
        parser.add_argument(flag, action="store_true")
    args = parser.parse_args(argv)
    if args.a:
        args.upstream_rank  # defined by a parser this tree lacks: the harness learns it, then retries
    assert not (hasattr(args, "upstream_rank") and args.c), "c with an upstream rank"
    return args
'''


def host_and_leader(tmp_path: Path, source: str, line: int,
                    flags: tuple[str, ...]) -> tuple[Finding, Finding]:
    """The toy's rejection explained by the host's rounds and by the warm leader's search."""
    working_sandbox()
    tree, policy, interpreter, suite, toy, head = toy_search(tmp_path, source, line, flags)
    [by_rounds] = explain_rejections([toy], [suite], head, in_rounds(head_validator(
        tree, policy, allow_unsandboxed=False, interpreter=interpreter)))
    [in_leader] = explain_rejections([toy], [suite], head, in_the_warm_leader(
        tree, policy, allow_unsandboxed=False, interpreter=interpreter))
    return by_rounds, in_leader


def test_what_the_warm_up_learned_never_changes_the_answer(tmp_path: Path) -> None:
    """Sets start knowing what the whole suite learned: here `--c` alone would then look rejected, though a
    suite without `--a` never learns `upstream_rank`. Asked from scratch, that answer does not hold, and the
    search runs again learning as a suite does: the same set as the host's rounds."""
    by_rounds, in_leader = host_and_leader(tmp_path, LEARNING, 11, ("--a", "--b", "--c"))
    assert in_leader.minimal_args == by_rounds.minimal_args
    assert in_leader.minimal_args is not None and in_leader.minimal_args.args == ("--a", "--c")


ALWAYS_LEARNING = '''import argparse


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    for flag in ("--a", "--b", "--c", "--d"):
        parser.add_argument(flag, action="store_true")
    args = parser.parse_args(argv)
    args.upstream_rank  # every suite learns it (a parser this tree lacks), then retries
    assert not (args.a and args.c), "a with c"
    return args
'''


def test_an_answer_that_holds_from_scratch_costs_no_round_of_its_own(tmp_path: Path) -> None:
    """Every set learns what the warm-up learned, so sets start knowing it; the round that settles the
    answer (the set found and each of its arguments left out) is asked from scratch, which is the
    confirmation: the search costs the sets and rounds of the host's rounds (each from scratch), 4 sets
    leaving out each argument and 3 settling, not 3 more to confirm in a round of their own."""
    by_rounds, in_leader = host_and_leader(tmp_path, ALWAYS_LEARNING, 10, ("--a", "--b", "--c", "--d"))
    assert in_leader.minimal_args == by_rounds.minimal_args
    assert in_leader.minimal_args is not None and in_leader.minimal_args.args == ("--a", "--c")
    assert in_leader.minimal_args.complete
    assert by_rounds.minimal_args is not None
    assert (in_leader.minimal_args.sets, in_leader.minimal_args.rounds) \
        == (by_rounds.minimal_args.sets, by_rounds.minimal_args.rounds) == (7, 2)


@pytest.mark.parametrize(("rounds", "seconds", "count"), [(1, 60.0, 6), (8, 0.0, 7)])
def test_the_search_in_the_warm_leader_stays_within_its_bound(tmp_path: Path, rounds: int, seconds: float,
                                                              count: int) -> None:
    """One round only leaves out each argument alone (the smallest set it saw rejected has 6 of 7; the search
    needs 4 rounds); no time, no round: the whole suite. Both said to be cut short."""
    working_sandbox()
    tree, policy, interpreter, suite, toy, head = toy_search(tmp_path)
    [explained] = explain_rejections([toy], [suite], head, in_the_warm_leader(
        tree, policy, allow_unsandboxed=False, interpreter=interpreter), rounds=rounds, seconds=seconds)
    assert explained.minimal_args is not None
    assert (explained.minimal_args.count, explained.minimal_args.complete) == (count, False)
