"""One suite through one revision's validation: outcome mode (learning, traced), then record mode.

Runs INSIDE the sandbox next to the repository's code, in the forked child of a group leader: imports
nothing of `app`, only the standard library and sibling harness modules.

Record mode runs only for a suite that outcome mode did not accept. An accepted run raised nothing: what
record mode could record there are exceptions the repository caught itself, which are no rejections; the
verdict compares record-mode events only for suites that both revisions reject (the noise record mode is
for), and a suite accepted at one revision is judged by its outcomes.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import (
        assumption,
        boundary,
        common,
        fsfakes,
        imported,
        linewatch,
        record,
        tolerant,
    )
else:
    import assumption
    import boundary
    import common
    import fsfakes
    import imported
    import linewatch
    import record
    import tolerant

MAX_MESSAGE = 2000
TAIL_CHARS = 8192  # of stderr, kept while the entry runs
MAX_USAGE_CHARS = 600
BOX_CHARS = "│╭╮╰╯─┃━┏┓┗┛ \t"  # the frame tyro (rich) draws around its errors
MAX_LEARNING_RETRIES = 200
RECORD_SHARE = 0.5  # of the suite's remaining time: what is left after it still reports the outcome


class RecordTimeout(BaseException):
    """Record mode ran out of time (a rewritten loop that never ends); a BaseException: nothing catches it."""


@dataclass
class Revision:
    """What a group leader prepared once: the entry callable and the record-mode rewrites."""

    repo: str
    entry: Callable[[], Any]
    base_env: dict[str, str]
    suite_seconds: float
    rewrites: record.Rewrites
    to_boundary: bool = False  # the entry is the suite's own launch, run until a training boundary


def warm_up(revision: Revision, suite: dict[str, Any] | None) -> None:
    """In a leader, before it forks: lazy imports and caches done once (by running `suite`), and record
    mode's bindings found once, so that each child only swaps them."""
    if suite is not None:
        run_suite(revision, suite)
    revision.rewrites.find_bindings()


def run_suite(revision: Revision, suite: dict[str, Any]) -> dict[str, Any]:
    """The suite's SuiteResult as JSON."""
    started = time.monotonic()
    fsfakes.fresh_overlay()  # what another suite wrote under /root/ is not this suite's CI host
    tolerant.ledger.reset()
    linewatch.reset()
    outcome = outcome_mode(revision, suite)
    lines_hit = linewatch.lines_hit()  # outcome mode's run only, as the suite's job would run
    upstream = tolerant.ledger.upstream_stood_in
    assumed = tolerant.ledger.assumed
    learned = [{"name": n, "path": p, "line": line, "upstream": upstream, "assumed": n in assumed,
                "value": assumed.get(n)} for n, (p, line) in tolerant.ledger.learned_at.items()]
    events: list[dict[str, Any]] = []
    if outcome["outcome"] != "accepted":
        remaining = revision.suite_seconds - (time.monotonic() - started)
        events = record_mode(revision, suite, max(0.1, remaining * RECORD_SHARE))
    result = {"suite_id": suite["id"], "token": suite.get("token"), "outcome": outcome, "events": events,
              "known_flags": tolerant.ledger.known_flags(suite["argv"]),
              "tolerated_flags": list(tolerant.ledger.tolerated_flags), "learned": learned,
              "lines_hit": lines_hit, "drift": list(tolerant.skipped),
              "imported": imported.repo_modules(revision.repo)}
    # the assumed options the rejection rests on: no blocking finding there (assumption.py)
    rests_on = assumption.rests_on(outcome, tolerant.ledger.assumed_read_at, revision.repo)
    return {**result, "rejection_assumes": rests_on}


def outcome_only(revision: Revision, suite: dict[str, Any],
                 learned: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The suite's outcome alone, from the same fresh state as `run_suite`'s but for the attributes LEARNED
    already (minimize.py's sets: no record mode, nothing learned or imported to report)."""
    fsfakes.fresh_overlay()
    tolerant.ledger.reset()
    tolerant.learn_ahead(learned or {})
    linewatch.reset()
    return outcome_mode(revision, suite)


def outcome_mode(revision: Revision, suite: dict[str, Any]) -> dict[str, Any]:
    """Call the entry as the suite's job would, learning missing Namespace attributes and retrying."""
    failure = call_entry(revision, suite)
    retries = 0
    while failure is not None and retries < MAX_LEARNING_RETRIES \
            and tolerant.learn_from(failure, common.repo_frame(failure.__traceback__, revision.repo)):
        failure = call_entry(revision, suite)
        retries += 1
    if failure is None:
        return _accepted(revision)
    path, line = common.repo_frame(failure.__traceback__, revision.repo)
    return {"outcome": "rejected", "exception": type(failure).__name__,
            "message": _message(failure)[:MAX_MESSAGE], "path": path, "line": line}


def _accepted(revision: Revision) -> dict[str, Any]:
    """Accepted; for a launch run to its boundary, where it stopped (or that it ran to its end)."""
    accepted: dict[str, Any] = {"outcome": "accepted", "exception": None, "message": None, "path": None,
                                "line": None}
    if revision.to_boundary:
        stop = boundary.reached()
        if stop is None:
            accepted["message"] = "ran to its end without reaching a training boundary"
        else:
            (crossed, (accepted["path"], accepted["line"])) = stop
            accepted["message"] = f"reached the training boundary {crossed.name} ({crossed.why})"
    return accepted


def record_mode(revision: Revision, suite: dict[str, Any], seconds: float) -> list[dict[str, Any]]:
    """Run the entry again with the validation functions rewritten; what it returns or raises is moot."""
    if not revision.rewrites:
        return []
    record.recorder.reset()
    originals = revision.rewrites.install()
    previous = signal.signal(signal.SIGALRM, _out_of_time)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        call_entry(revision, suite)
    except RecordTimeout:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        record.restore(originals)  # a warm-up leader goes on with the original functions
    return record.recorder.recorded()


def call_entry(revision: Revision, suite: dict[str, Any]) -> BaseException | None:
    """The exception the entry ended with, None when it returned."""
    set_environment(revision.base_env, suite)
    sys.argv = [_entry_path(revision.repo, suite.get("entry") or ""), *suite["argv"]]
    printed, stderr = _Tail(sys.stderr), sys.stderr
    sys.stderr = printed
    state = imported.ModuleState(revision.repo) if revision.to_boundary else None
    try:
        with boundary.armed() if revision.to_boundary else contextlib.nullcontext():
            revision.entry()
    except boundary.TrainingBoundary:
        return None
    except (Exception, SystemExit) as exc:
        if revision.to_boundary and boundary.reached() is not None:
            return None  # the launch caught the boundary and failed after it: training, not validation
        if revision.to_boundary and _names_ci_file(revision, suite, exc):
            return None
        return _with_usage_error(exc, printed.text())
    finally:
        sys.stderr = stderr
        if state is not None:
            state.restore()
    return None


def _names_ci_file(revision: Revision, suite: dict[str, Any], failure: BaseException) -> bool:
    """FAILURE names a file on CI's hosts that the suite's own launch named: noted as its boundary."""
    given = [*map(str, suite["argv"]), *map(str, (suite.get("env") or {}).values())]
    path = boundary.ci_file_named(failure, given)
    if path is None:
        return False
    boundary.note_reached(path, boundary.FILES, common.repo_frame(failure.__traceback__, revision.repo))
    return True


class _Tail(io.TextIOBase):
    """stderr as it was, keeping its last TAIL_CHARS: what a parser printed before it exited."""

    def __init__(self, through: Any) -> None:
        self.through, self.kept = through, ""

    def write(self, text: str) -> int:
        self.kept = (self.kept + text)[-TAIL_CHARS:]
        return self.through.write(text)

    def flush(self) -> None:
        self.through.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        """The real stream's descriptor: `faulthandler.enable()` at a module's import writes to it."""
        return int(self.through.fileno())

    def text(self) -> str:
        return self.kept


def _with_usage_error(exc: BaseException, printed: str) -> BaseException:
    """A parser's `SystemExit: 2` says nothing; the error it printed (tyro's last framed box, argparse's
    `error:` line) becomes its message, and its traceback stays (errors are grouped by where they rose)."""
    if not isinstance(exc, SystemExit) or exc.code in (None, 0) or not isinstance(exc.code, int):
        return exc
    said = _usage_error(printed.splitlines())
    if not said:
        return exc
    return SystemExit(f"{exc.code}: {said[:MAX_USAGE_CHARS]}").with_traceback(exc.__traceback__)


def _usage_error(lines: list[str]) -> str:
    box = max((i for i, line in enumerate(lines) if line.lstrip().startswith("╭")), default=None)
    if box is not None:  # log lines before the box are no part of the error
        lines = lines[box:]
    said = [line.strip(BOX_CHARS) for line in lines]
    said = [line for line in said if line and not line.lower().startswith(("usage:", "for full helptext"))]
    errors = [line for line in said if "error:" in line.lower()]
    return " ".join(said if box is not None else errors[-1:] or said[-3:])


def set_environment(base_env: dict[str, str], suite: dict[str, Any]) -> None:
    """Exactly the sandbox's environment plus the suite's: nothing left over from another suite."""
    os.environ.clear()
    os.environ.update(base_env)
    os.environ.update(suite.get("env") or {})


def _entry_path(repo: str, entry: str) -> str:
    return os.path.join(repo, entry) if entry else repo  # an absolute entry stays as it is


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"


def _out_of_time(signum: int, frame: FrameType | None) -> None:
    raise RecordTimeout()
