"""Host side of validation: run the validate harness on one revision's tree and collect a result per suite.

A suite the harness never reported is an `error` carrying the run's reason: never `accepted`.
"""

from __future__ import annotations

import ast
import logging
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from app.analysis.core.model import Outcome, Suite, SuiteResult
from app.analysis.core.policy import Policy, path_matches
from app.analysis.verdict.diff import TreeDiff
from app.engine.environments import prepare
from app.sandbox.interpreter import Interpreter
from app.sandbox.messages import OnProgress, progress_relay, stopped_reason
from app.sandbox.runner import SandboxSpec, run_harness

log = logging.getLogger(__name__)


def validate_revision(tree: Path, policy: Policy, suites: Iterable[Suite], *, trace: Mapping[str, list[int]],
                      allow_unsandboxed: bool, on_progress: OnProgress | None = None,
                      interpreter: Interpreter | None = None) -> tuple[dict[str, SuiteResult], bool]:
    """Every suite's result at this revision, and whether the harness ran sandboxed; INTERPRETER is the
    analysis environment (default: the one the policy declares, in $PRTRIAGE_ENV_DIR)."""
    suites = list(suites)
    job = {"policy": policy.model_dump(mode="json", by_alias=True), "workers": os.cpu_count() or 1,
           "suites": [s.to_json() for s in suites], "trace": {p: sorted(ls) for p, ls in trace.items()}}
    spec = SandboxSpec(program="validate.py", repo_dir=tree, job=job, limits=policy.harness.limits,
                       allow_unsandboxed=allow_unsandboxed,
                       interpreter=interpreter or prepare(policy.harness, tree, None))
    run = run_harness(spec, on_message=progress_relay(on_progress))
    reason = stopped_reason(run, step="validation", unit="suite")
    return collect_results(suites, run.messages, reason), run.sandboxed


def collect_results(suites: list[Suite], messages: Iterable[dict[str, Any]],
                    reason: str) -> dict[str, SuiteResult]:
    """The one well-formed report of each requested suite; the others are errors with `reason`.

    The harness reports each suite exactly once. A suite reported twice, or one nobody asked for, means
    something other than the harness wrote to its channel: then no report of the run is believed, and
    every suite is an error (the revision could not be analysed), never the first report that came.
    """
    wanted = {s.id for s in suites}
    results: dict[str, SuiteResult] = {}
    reports: Counter[str] = Counter()
    for message in messages:
        if message.get("type") != "suite":
            continue
        reports[str(message.get("suite_id"))[:200]] += 1
        result = _parse_suite(message)
        if result is not None and result.suite_id in wanted:
            results.setdefault(result.suite_id, result)
    if tampered := _tampering(reports, wanted):
        return {s.id: SuiteResult(s.id, Outcome("error", message=tampered)) for s in suites}
    missing = Outcome("error", message=reason)
    return {s.id: results.get(s.id) or SuiteResult(s.id, missing) for s in suites}


def _tampering(reports: Counter[str], wanted: set[str]) -> str | None:
    """Why the run's reports cannot be believed, None when each suite was reported at most once."""
    twice = sorted(suite for suite, count in reports.items() if count > 1)
    unknown = sorted(suite for suite in reports if suite not in wanted)
    if not twice and not unknown:
        return None
    what = [f"suite {suite} was reported {reports[suite]} times" for suite in twice[:3]]
    what += [f"suite {suite} was reported but never asked for" for suite in unknown[:3]]
    log.warning("validation results not believed: %s", "; ".join(what))
    return ("the validation results cannot be believed, something other than the harness wrote to its "
            f"channel: {'; '.join(what)}")


def _parse_suite(message: dict[str, Any]) -> SuiteResult | None:
    try:
        return SuiteResult.from_json({k: v for k, v in message.items() if k != "type"})
    except (KeyError, TypeError, ValueError, AttributeError):
        log.warning("ignored a malformed suite result: %.200r", message)
        return None


def trace_lines(diff: TreeDiff, policy: Policy, head_sources: Mapping[str, str], *,
                learned: frozenset[str] = frozenset()) -> dict[str, list[int]]:
    """The changed statements of validation code that a suite can run, by their first head line; validation
    code is what `validation.paths` names and the modules validation imported at the base (LEARNED).

    Blank lines, comments, docstrings and module-level code (it runs once, at import) are never reported
    as hit by a suite, so they are not traced: they would all look unexercised.
    """
    trace: dict[str, list[int]] = {}
    for path in diff.changed_paths:
        source = head_sources.get(path)
        if source is None or not path.endswith(".py") \
                or not (path in learned or any(path_matches(path, g) for g in policy.validation.path_globs)):
            continue
        owners = statement_starts(source, path)
        changed = diff.changed_lines(path)
        lines = sorted(changed) if owners is None else sorted({owners[n] for n in changed if n in owners})
        if lines:
            trace[path] = lines
    return trace


def statement_starts(source: str, path: str) -> dict[int, int] | None:
    """Each code line of a function body -> the first line of the innermost statement holding it.

    None when the source does not parse. Parsing runs none of the code: safe on untrusted source.
    """
    try:
        module = ast.parse(source, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    functions = [n for n in ast.walk(module) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    spans = {(s.lineno, s.end_lineno or s.lineno) for function in functions for top in function.body
             for s in ast.walk(top) if isinstance(s, ast.stmt) and not _is_constant(s)}
    text = source.splitlines()
    owners: dict[int, int] = {}
    for first, last in sorted(spans, key=lambda span: span[0] - span[1]):  # widest first: innermost wins
        for line in range(first, last + 1):
            code = text[line - 1].strip() if line <= len(text) else ""
            if code and not code.startswith("#"):
                owners[line] = first
    return owners


def _is_constant(statement: ast.stmt) -> bool:
    """A docstring or a bare constant: compiled to nothing, never reported as run."""
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
