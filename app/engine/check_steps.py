"""One check, step by step: diff the trees, capture the CI matrix at head, validate both revisions, judge."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from app.analysis.core.model import Matrix, Suite, SuiteResult
from app.analysis.core.policy import Policy, RecordLaunches, parse_policy
from app.analysis.starter.starter import detect, refine, render
from app.analysis.starter.starter_tree import Starter
from app.analysis.verdict.diff import TreeDiff, diff_trees
from app.analysis.verdict.health import Health, assess
from app.analysis.verdict.report import CheckReport, Timing
from app.analysis.verdict.verdict import verdict
from app.engine import validation_cache
from app.engine.environments import EnvironmentProblem, prepare
from app.engine.matrix_capture import capture_matrix
from app.engine.minimal_args import explain_rejections, head_validator
from app.engine.suite_validation import trace_lines, validate_revision
from app.sandbox.interpreter import Interpreter
from app.sandbox.runner import SandboxUnavailable, sandbox_problem
from app.trees.treehash import fingerprints

Progress = Callable[[str, int, int, str], None]  # (step, done, total, what)
MAX_TEXT_BYTES = 2 * 1024 * 1024  # a bigger file is diffed as binary: generated data, not validation code
SANDBOX_HINT = ("to run without it, pass --allow-unsandboxed (the repository's code then runs "
                "unconfined, with your privileges: never with code you do not trust)")


class AnalysisError(Exception):
    """The analysis could not run (no sandbox, repository code that cannot load...): exit status 3."""


class NothingCaptured(AnalysisError):
    """The policy's CI scripts yielded no suite at all: most often a policy that does not fit the
    repository."""


@dataclass(frozen=True)
class _Validated:
    results: dict[str, SuiteResult]
    sandboxed: bool
    seconds: float
    cached: bool = False


def run_check(base_tree: Path, head_tree: Path, policy: Policy, *, base_sha: str | None, head_sha: str | None,
              cache_dir: Path, allow_unsandboxed: bool, progress: Progress | None = None,
              repository: str | None = None) -> CheckReport:
    """Which existing CI suites the head newly rejects; the fast path when no validation path changed.

    `repository` (owner/name, or a local path) scopes the cached matrices: no repository reuses another's.
    """
    started = time.monotonic()
    diff, head_sources = compare_trees(base_tree, head_tree)
    changed = tuple(diff.changed_paths)
    if not policy.touches_validation(list(changed)):
        return CheckReport(base_sha, head_sha, validation_changed=False, changed_paths=changed,
                           timing=Timing(total_s=time.monotonic() - started))
    require_sandbox(allow_unsandboxed)
    # the base's policy, so the base's requirement files: the head never chooses what is installed
    interpreter = analysis_environment(policy, base_tree, cache_dir, progress)
    try:
        matrix, cached, capture_s = _capture(head_tree, policy, cache_dir, allow_unsandboxed, progress,
                                             repository, interpreter)
        trace = trace_lines(diff, policy, head_sources)
        base, head = _validate_both(base_tree, head_tree, policy, matrix.suites, trace, allow_unsandboxed,
                                    progress, cache_dir, interpreter)
    except SandboxUnavailable as exc:
        raise AnalysisError(f"{exc}; {SANDBOX_HINT}") from None
    except PermissionError as exc:  # a tree the sandbox's unprivileged uid cannot read
        raise AnalysisError(str(exc)) from None
    require_loadable(matrix, base.results, head.results)
    findings = verdict(matrix, base.results, head.results, diff, policy, traced=trace)
    health = assess(matrix, base.results, head.results, trace,
                    max_base_failures=policy.health.max_base_failures, fail_open=policy.health.fail_open)
    minimize_started = time.monotonic()
    if health.could_analyse:  # a blind analysis' findings are not worth the search
        findings = explain_rejections(findings, matrix.suites, head.results, head_validator(
            head_tree, policy, allow_unsandboxed=allow_unsandboxed, interpreter=interpreter))
    timing = Timing(capture_s=capture_s, base_s=base.seconds, head_s=head.seconds,
                    minimize_s=time.monotonic() - minimize_started, total_s=time.monotonic() - started)
    return CheckReport(base_sha, head_sha, validation_changed=True, changed_paths=changed, matrix=matrix,
                       base=base.results, head=head.results, findings=tuple(findings), capture_cached=cached,
                       base_cached=base.cached, sandboxed=base.sandboxed and head.sandboxed, timing=timing,
                       health=health)


def run_doctor(tree: Path, policy: Policy, *, cache_dir: Path, allow_unsandboxed: bool,
               progress: Progress | None = None, repository: str | None = None) -> Health:
    """The health of one revision alone: its CI matrix captured, then validated at that revision."""
    return _doctor(tree, policy, cache_dir=cache_dir, allow_unsandboxed=allow_unsandboxed, progress=progress,
                   repository=repository)[1]


def doctor_revision(tree: Path, policy: Policy, *, cache_dir: Path, allow_unsandboxed: bool,
                    progress: Progress | None = None, repository: str | None = None,
                    ) -> tuple[Matrix, Health]:
    """The revision's CI matrix and its health (every suite's outcome is in `base_failures` or accepted):
    what the main health of a default branch keeps."""
    return _doctor(tree, policy, cache_dir=cache_dir, allow_unsandboxed=allow_unsandboxed, progress=progress,
                   repository=repository)


def _doctor(tree: Path, policy: Policy, *, cache_dir: Path, allow_unsandboxed: bool,
            progress: Progress | None, repository: str | None) -> tuple[Matrix, Health]:
    require_sandbox(allow_unsandboxed)
    interpreter = analysis_environment(policy, tree, cache_dir, progress)
    try:
        matrix, _ = capture_matrix(tree, policy, cache_dir=cache_dir, allow_unsandboxed=allow_unsandboxed,
                                   on_progress=_step(progress, "capture"), repository=repository,
                                   interpreter=interpreter)
        results: dict[str, SuiteResult] = {}
        if matrix.suites:  # none: the capture failures are the diagnosis
            results = _validate_cached(tree, policy, matrix.suites, cache_dir, allow_unsandboxed, progress,
                                       interpreter)
    except SandboxUnavailable as exc:
        raise AnalysisError(f"{exc}; {SANDBOX_HINT}") from None
    return matrix, assess(matrix, results, {}, {}, max_base_failures=policy.health.max_base_failures,
                          fail_open=policy.health.fail_open)


def _validate_cached(tree: Path, policy: Policy, suites: tuple[Suite, ...], cache_dir: Path,
                     allow_unsandboxed: bool, progress: Progress | None,
                     interpreter: Interpreter) -> dict[str, SuiteResult]:
    """One revision's untraced validation, kept as a check's base results are (validation_cache): a doctor of
    a commit a check used as its base, or doctored before, reuses them."""
    key = validation_cache.validation_key(tree, policy, suites, interpreter)
    cached = validation_cache.lookup(cache_dir, key, suites)
    if cached is not None:
        return cached
    results, sandboxed = validate_revision(tree, policy, suites, trace={},
                                           allow_unsandboxed=allow_unsandboxed,
                                           on_progress=_step(progress, "validate"), interpreter=interpreter)
    validation_cache.store(cache_dir, key, results, sandboxed=sandboxed)
    return results


def run_init(tree: Path, *, cache_dir: Path, allow_unsandboxed: bool, rounds: int,
             progress: Progress | None = None, repository: str | None = None) -> tuple[Starter, Health]:
    """A starter policy detected from TREE, refined by up to ROUNDS doctor rounds (each adds what the
    last one's errors ask for), with the health of the policy it ends with."""
    starter = detect(tree)
    for done in range(1, rounds + 1):
        policy = parse_policy(render(starter), "the starter policy")
        matrix, health = _doctor(tree, policy, cache_dir=cache_dir, allow_unsandboxed=allow_unsandboxed,
                                 progress=progress, repository=repository)
        refined = refine(starter, matrix.suites, health, tree)
        if not refined.rounds[-1]:
            return refined, health  # the same policy, its last round empty: nothing more to add
        if done == rounds:
            return starter, health  # the policy returned is always the one measured
        starter = refined
    raise ValueError(f"rounds must be at least 1, not {rounds}")


def analysis_environment(policy: Policy, tree: Path, cache_dir: Path,
                         progress: Progress | None = None) -> Interpreter:
    """The interpreter the policy declares (built on first use, a progress step of its own); a problem with
    it is the analysis that cannot run, naming the policy key."""
    try:
        return prepare(policy.harness, tree, cache_dir, progress=progress, used_by=policy_label(policy))
    except EnvironmentProblem as exc:
        raise AnalysisError(str(exc)) from None


def require_sandbox(allow_unsandboxed: bool) -> None:
    problem = sandbox_problem()
    if problem is not None and not allow_unsandboxed:
        raise AnalysisError(f"no sandbox: {problem}; {SANDBOX_HINT}")


def _capture(tree: Path, policy: Policy, cache_dir: Path, allow_unsandboxed: bool,
             progress: Progress | None, repository: str | None,
             interpreter: Interpreter) -> tuple[Matrix, bool, float]:
    started = time.monotonic()
    on_progress = _step(progress, "capture")
    matrix, cached = capture_matrix(tree, policy, cache_dir=cache_dir, allow_unsandboxed=allow_unsandboxed,
                                    on_progress=on_progress, repository=repository, interpreter=interpreter)
    if not matrix.suites:
        reasons = "; ".join(f"{f.script}: {f.reason}" for f in matrix.failed[:3])
        globs = [glob for source in policy.matrix.sources if isinstance(source, RecordLaunches)
                 for glob in source.scripts]
        raise NothingCaptured(f"no CI suite captured at head ({matrix.scripts} CI scripts match "
                              f"{', '.join(globs) or 'no record_launches source'}"
                              f"{'; ' + reasons if reasons else ''}): nothing to replay")
    return matrix, cached, time.monotonic() - started


def _step(progress: Progress | None, step: str) -> Callable[[int, int, str], None] | None:
    if progress is None:
        return None
    return lambda done, total, what: progress(step, done, total, what)


def _validate_both(base_tree: Path, head_tree: Path, policy: Policy, suites: tuple[Suite, ...],
                   trace: dict[str, list[int]], allow_unsandboxed: bool, progress: Progress | None,
                   cache_dir: Path, interpreter: Interpreter) -> tuple[_Validated, _Validated]:
    """Both revisions at once, each in its own sandbox; only the head is traced (its lines changed). The
    base's results of an earlier check of the same job are reused (validation_cache)."""
    def validate(tree: Path, step: str, traced: dict[str, list[int]]) -> _Validated:
        started = time.monotonic()
        results, sandboxed = validate_revision(tree, policy, suites, trace=traced,
                                               allow_unsandboxed=allow_unsandboxed,
                                               on_progress=_step(progress, step), interpreter=interpreter)
        return _Validated(results, sandboxed, time.monotonic() - started)

    def validate_base() -> _Validated:
        started = time.monotonic()
        key = validation_cache.validation_key(base_tree, policy, suites, interpreter)
        cached = validation_cache.lookup(cache_dir, key, suites)
        if cached is not None:
            return _Validated(cached, True, time.monotonic() - started, cached=True)
        validated = validate(base_tree, "base", {})
        validation_cache.store(cache_dir, key, validated.results, sandboxed=validated.sandboxed)
        return validated

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="prtriage-validate") as pool:
        base = pool.submit(validate_base)
        head = pool.submit(validate, head_tree, "head", trace)
        return base.result(), head.result()


def require_loadable(matrix: Matrix, base: dict[str, SuiteResult], head: dict[str, SuiteResult]) -> None:
    """Every suite errored at base: the code does not load here, and no head result can be judged."""
    if not all(base[s.id].outcome.outcome == "error" for s in matrix.suites):
        return
    both = all(head[s.id].outcome.outcome == "error" for s in matrix.suites)
    where = "either revision" if both else "the base revision, so nothing can be compared"
    results = [*base.values(), *head.values()] if both else list(base.values())
    reasons = list(dict.fromkeys(r.outcome.message or "no reason given" for r in results))
    raise AnalysisError(f"the validation code could not run at {where}: " + " | ".join(reasons[:3]))


def compare_trees(base_tree: Path, head_tree: Path) -> tuple[TreeDiff, dict[str, str]]:
    """The diff of two trees, and the head text of each changed text file.

    Files are compared by hash first; only those whose bytes differ are read as text.
    """
    base_prints, head_prints = fingerprints(base_tree), fingerprints(head_tree)
    every = base_prints.keys() | head_prints.keys()
    differing = {p for p in every if base_prints.get(p) != head_prints.get(p)}
    base_texts = {p: _text(base_tree / p) for p in differing if p in base_prints}
    head_texts = {p: _text(head_tree / p) for p in differing if p in head_prints}
    head_sources = {p: text for p, text in head_texts.items() if text is not None}
    return diff_trees(base_texts, head_texts), head_sources


def _text(path: Path) -> str | None:
    """The file as text; None for a binary, oversized or unreadable file, or a symlink."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_TEXT_BYTES:
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def policy_label(policy: Policy) -> str:
    """How `prtriage env list` names the policies that used an environment: by what it validates."""
    validated = ("launches to their boundary" if policy.validation.to_boundary
                 else " or ".join(policy.validation.entries))
    return f"{validated} ({', '.join(policy.validation.paths[:2])})"
