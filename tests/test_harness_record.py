"""Record mode: every assert, raise and error of the validation functions recorded, execution going on."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Literal

from harness_twin import (
    ARGUMENTS,
    job,
    line_of,
    make_twin,
    miles_policy,
    results,
    run_plain,
    run_sandboxed,
    suite,
)

from app.analysis.core.model import Event, Outcome

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


CHECKS = '''\
def optional_check(args):
    raise ValueError("the caller catches this")


def strict_check(args):
    assert args.rollout_batch_size > 100, "strict"
'''


LAZY = '''\
from miles.utils.checks import strict_check


def run_strict(args):
    try:
        strict_check(args)
    except AssertionError:
        pass
'''


def with_checks(tmp_path: Path, validate_body: str) -> Path:
    """The twin whose arguments module imports miles.utils.checks at its top: record mode can rewrite it."""
    source = ARGUMENTS.replace("import argparse\n", "import argparse\nimport miles.utils.checks\n")
    body = textwrap.indent(textwrap.dedent(validate_body), "    ").rstrip("\n")
    return make_twin(tmp_path, files={ARGS: source.replace("{validate_body}", body),
                                      "miles/utils/checks.py": CHECKS, "miles/utils/lazy.py": LAZY})


def checked_policy() -> dict[str, Any]:
    policy = miles_policy()
    policy["validation"]["functions"] = ["miles.utils.arguments:miles_validate_args",
                                         "miles.utils.checks:optional_check",
                                         "miles.utils.checks:strict_check"]
    return policy


def test_an_accepted_suite_is_not_replayed_in_record_mode(tmp_path: Path) -> None:
    # Replayed, the caught raise would be recorded: an exception the repository handles is no rejection.
    repo = with_checks(tmp_path, """\
        try:
            miles.utils.checks.optional_check(args)
        except ValueError:
            pass
        assert not args.colocate, "no colocate"
    """)
    found = results(run_plain(repo, job([suite("plain", QWEN), suite("colocate", f"{QWEN} --colocate")],
                                        checked_policy())))
    assert found["plain"].outcome == Outcome("accepted")
    assert found["plain"].events == ()
    assert [(e.kind, e.message) for e in found["colocate"].events] == [("raise", "the caller catches this"),
                                                                       ("assert", "no colocate")]


def test_record_mode_also_binds_in_modules_a_suite_imported_itself(tmp_path: Path) -> None:
    # The leader finds the bindings once; `lazy` is imported only by the colocate suite, in its own child.
    repo = with_checks(tmp_path, """\
        if args.colocate:
            from miles.utils.lazy import run_strict
            run_strict(args)
        assert not args.colocate, "no colocate"
    """)
    found = results(run_plain(repo, job([suite("plain", QWEN), suite("colocate", f"{QWEN} --colocate")],
                                        checked_policy())))
    assert found["plain"].outcome == Outcome("accepted")
    assert [(e.kind, e.function, e.message) for e in found["colocate"].events] == [
        ("assert", "strict_check", "strict"), ("assert", "miles_validate_args", "no colocate")]
