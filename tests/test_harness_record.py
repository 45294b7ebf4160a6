"""Record mode: every assert, raise and error of the validation functions recorded, execution going on."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from harness_twin import job, line_of, make_twin, miles_policy, results, run_plain, run_sandboxed, suite

from app.analysis.model import Event, Outcome

ARGS = "miles/utils/arguments.py"
QWEN = "--hf-checkpoint /root/models/qwen/config.json"

VALIDATOR = """\
assert args.rollout_batch_size > 100, "first assert"
assert args.rollout_batch_size > 200, f"second assert {args.rollout_batch_size}"
if args.colocate:
    raise ValueError("colocate is not allowed here")
total = args.seq_length + 1
if args.hf_config.no_such_key:
    args.unreachable = True
for size in [1, 2, 3]:
    if size > 1:
        assert size < 3, f"size {size} too big"
try:
    int("not a number")
except ValueError:
    handled = True
assert handled, "the handler ran"
for _ in range(3):
    assert False, "same failure thrice"
raise RuntimeError
return args
assert False, "after the return"
"""


def event(repo: Path, kind: Literal["assert", "raise", "error"], marker: str, text: str, exception: str,
          message: str) -> Event:
    return Event(kind=kind, path=ARGS, line=line_of(repo, ARGS, marker), function="miles_validate_args",
                 text=text, exception=exception, message=message)


def test_every_failure_is_recorded_in_order_and_execution_goes_on(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, VALIDATOR)
    found = results(run_sandboxed(repo, job([suite("colocate", f"{QWEN} --colocate")])))["colocate"]
    assert found.outcome == Outcome("rejected", "AssertionError", "first assert", ARGS,
                                    line_of(repo, ARGS, '"first assert"'))
    assert found.events == (
        event(repo, "assert", '"first assert"', "assert args.rollout_batch_size > 100, 'first assert'",
              "AssertionError", "first assert"),
        event(repo, "assert", "second assert", "assert args.rollout_batch_size > 200, "
              "f'second assert {args.rollout_batch_size}'", "AssertionError", "second assert 8"),
        event(repo, "raise", "raise ValueError", "raise ValueError('colocate is not allowed here')",
              "ValueError", "colocate is not allowed here"),
        event(repo, "error", "total = ", "total = args.seq_length + 1", "TypeError",
              "unsupported operand type(s) for +: 'NoneType' and 'int'"),
        event(repo, "error", "no_such_key", "if args.hf_config.no_such_key:", "AttributeError",
              "'FixtureNamespace' object has no attribute 'no_such_key'"),
        event(repo, "assert", "assert size < 3", "assert size < 3, f'size {size} too big'",
              "AssertionError", "size 3 too big"),
        event(repo, "assert", "same failure thrice", "assert False, 'same failure thrice'", "AssertionError",
              "same failure thrice"),
        event(repo, "raise", "raise RuntimeError", "raise RuntimeError", "RuntimeError", ""),
    )


def test_checks_a_suite_passes_record_nothing(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, VALIDATOR)
    found = results(run_plain(repo, job([suite("big", f"{QWEN} --rollout-batch-size 300")])))["big"]
    assert found.outcome == Outcome("rejected", "TypeError",
                                    "unsupported operand type(s) for +: 'NoneType' and 'int'", ARGS,
                                    line_of(repo, ARGS, "total = "))
    assert [(e.kind, e.message) for e in found.events] == [
        ("error", "unsupported operand type(s) for +: 'NoneType' and 'int'"),
        ("error", "'FixtureNamespace' object has no attribute 'no_such_key'"),
        ("assert", "size 3 too big"), ("assert", "same failure thrice"), ("raise", "")]


def test_functions_absent_at_this_revision_are_skipped(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, 'assert args.rollout_batch_size > 100, "too small"\n')
    policy = miles_policy()
    policy["validation"]["functions"] = ["miles.utils.arguments:hf_validate_args", "miles.nowhere:check",
                                         "miles.utils.arguments:RolloutBuffer.missing",
                                         "miles.utils.arguments:miles_validate_args"]
    found = results(run_plain(repo, job([suite("small", QWEN)], policy)))["small"]
    assert [e.message for e in found.events] == ["too small"]


def test_record_mode_that_never_ends_is_cut_short_and_the_outcome_kept(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        while args.rollout_batch_size:
            args.rollout_batch_size = 1 / 0
    """)
    found = results(run_plain(repo, job([suite("loops", QWEN)], miles_policy(suite_seconds=3))))["loops"]
    assert found.outcome.outcome == "rejected"
    assert found.outcome.exception == "ZeroDivisionError"
    assert [(e.kind, e.exception) for e in found.events] == [("error", "ZeroDivisionError")]
