"""One check, step by step: diff the trees, capture the CI matrix at head, validate both revisions, judge."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from app.analysis.core.model import Matrix, Suite, SuiteResult
from app.analysis.core.policy import Policy, parse_policy
from app.analysis.sources.record_launches_keys import RecordLaunches
from app.analysis.starter.starter import detect, refine, render
from app.analysis.starter.starter_tree import Starter
from app.analysis.verdict.diff import TreeDiff, diff_trees
from app.analysis.verdict.health import Health, assess
from app.analysis.verdict.report import CheckReport, Timing
from app.analysis.verdict.verdict import verdict
from app.engine import validation_cache
from app.engine.check_errors import AnalysisError, NothingCaptured, Unloadable
from app.engine.environments import EnvironmentProblem, prepare
from app.engine.matrix_capture import capture_matrix
from app.engine.minimal_args import explain_rejections, in_the_warm_leader
from app.engine.refined_check import with_refinement
from app.engine.suite_validation import trace_lines, validate_revision
from app.sandbox.interpreter import Interpreter
from app.sandbox.runner import SandboxUnavailable, sandbox_problem
from app.trees.treehash import fingerprints, tree_digest

Progress = Callable[[str, int, int, str], None]  # (step, done, total, what)
MAX_TEXT_BYTES = 2 * 1024 * 1024  # a bigger file is diffed as binary: generated data, not validation code
SANDBOX_HINT = ("to run without it, pass --allow-unsandboxed (the repository's code then runs "
                "unconfined, with your privileges: never with code you do not trust)")


@dataclass(frozen=True)
class _Validated:
    results: dict[str, SuiteResult]
    sandboxed: bool
    seconds: float
    cached: bool = False


__all__ = ["AnalysisError", "NothingCaptured", "run_check"]


def run_check(base_tree: Path, head_tree: Path, policy: Policy, *, base_sha: str | None, head_sha: str | None,
              cache_dir: Path, allow_unsandboxed: bool, progress: Progress | None = None,
              repository: str | None = None) -> CheckReport:
    """Which existing CI suites the head newly rejects; the fast path when no validation path changed.
    A base too blind to judge is checked once more with one refine round of POLICY (refined_check).

    `repository` (owner/name, or a local path) scopes the cached matrices: no repository reuses another's.
    """
    def check(using: Policy) -> CheckReport:
        return _check(base_tree, head_tree, using, base_sha=base_sha, head_sha=head_sha, cache_dir=cache_dir,
                      allow_unsandboxed=allow_unsandboxed, progress=progress, repository=repository)

    return with_refinement(check, policy, base_tree)


def _check(base_tree: Path, head_tree: Path, policy: Policy, *, base_sha: str | None, head_sha: str | None,
           cache_dir: Path, allow_unsandboxed: bool, progress: Progress | None,
           repository: str | None) -> CheckReport:
    started = time.monotonic()
    base_prints = fingerprints(base_tree)
    diff, head_sources = compare_trees(base_tree, head_tree, base_prints=base_prints)
    changed = tuple(diff.changed_paths)
    learned_key = validation_cache.learned_key(tree_digest(base_prints), policy)
    learned = validation_cache.lookup_learned(cache_dir, learned_key)
    because = analysed_because(policy, changed, learned)
    if because is None:
        return CheckReport(base_sha, head_sha, validation_changed=False, changed_paths=changed,
                           timing=Timing(total_s=time.monotonic() - started), learned_paths=learned)
    require_sandbox(allow_unsandboxed)
    # the base's policy, so the base's requirement files: the head never chooses what is installed
    interpreter = analysis_environment(policy, base_tree, cache_dir, progress)
    try:
        matrix, cached, capture_s = _capture(head_tree, policy, cache_dir, allow_unsandboxed, progress,
                                             repository, interpreter)
        base = None
        # learn first when the change may touch nothing the validation imports; a change to a listed path is
        # analysed whatever the base imports, and both revisions are validated at once
        if learned is None and not policy.touches_validation(list(changed)):
            base, learned = _learn(base_tree, policy, matrix.suites, progress, cache_dir, interpreter,
                                   allow_unsandboxed, learned_key)
            because = analysed_because(policy, changed, learned)
            if because is None:
                return CheckReport(base_sha, head_sha, validation_changed=False, changed_paths=changed,
                                   timing=Timing(capture_s=capture_s, base_s=base.seconds,
                                                 total_s=time.monotonic() - started), learned_paths=learned)
        if base is None and learned is None:
            base, head, trace = _validate_while_learning(base_tree, head_tree, policy, matrix.suites,
                                                         (diff, head_sources), allow_unsandboxed, progress,
                                                         cache_dir, interpreter, learned_key)
        else:
            trace = trace_lines(diff, policy, head_sources, learned=learned or frozenset())
            base, head = _validate_both(base_tree, head_tree, policy, matrix.suites, trace, allow_unsandboxed,
                                        progress, cache_dir, interpreter, base)
    except SandboxUnavailable as exc:
        raise AnalysisError(f"{exc}; {SANDBOX_HINT}") from None
    except PermissionError as exc:  # a tree the sandbox's unprivileged uid cannot read
        raise AnalysisError(str(exc)) from None
    health = assess(matrix, base.results, head.results, trace,
                    max_base_failures=policy.health.max_base_failures, fail_open=policy.health.fail_open)
    try:
        require_loadable(matrix, base.results, head.results)
    except AnalysisError as exc:
        raise Unloadable(str(exc), matrix, health) from None
    findings = verdict(matrix, base.results, head.results, diff, policy, traced=trace)
    minimize_started, minimize_cpu = time.monotonic(), _children_cpu()
    if health.could_analyse:  # a blind analysis' findings are not worth the search
        findings = explain_rejections(findings, matrix.suites, head.results, in_the_warm_leader(
            head_tree, policy, allow_unsandboxed=allow_unsandboxed, interpreter=interpreter))
    timing = Timing(capture_s=capture_s, base_s=base.seconds, head_s=head.seconds,
                    minimize_s=time.monotonic() - minimize_started, total_s=time.monotonic() - started,
                    minimize_cpu_s=_children_cpu() - minimize_cpu)
    return CheckReport(base_sha, head_sha, validation_changed=True, changed_paths=changed, matrix=matrix,
                       base=base.results, head=head.results, findings=tuple(findings), capture_cached=cached,
                       base_cached=base.cached, sandboxed=base.sandboxed and head.sandboxed, timing=timing,
                       health=health, analysed_because=because,
                       learned_paths=validation_cache.learned_from(
                           base.results, policy.health.max_base_failures) or learned)


def _children_cpu() -> float:
    """CPU seconds of this process's children that ended (a sandbox's, with what it reaped): the search
    runs alone, after both revisions' sandboxes ended, so the difference around it is its own (in a
    process that runs one check at a time)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _learn(base_tree: Path, policy: Policy, suites: tuple[Suite, ...], progress: Progress | None,
           cache_dir: Path, interpreter: Interpreter, allow_unsandboxed: bool,
           learned_key: str) -> tuple[_Validated, frozenset[str] | None]:
    """The base validated (alone, before the head), and the modules its validation imported, kept for
    the next check at this base."""
    base = _validate_base(base_tree, policy, suites, progress, cache_dir, interpreter, allow_unsandboxed)
    return base, _keep_learned(base, policy, cache_dir, learned_key)


def _keep_learned(base: _Validated, policy: Policy, cache_dir: Path,
                  learned_key: str) -> frozenset[str] | None:
    """The modules the base's validation imported, kept for the next check at this base."""
    learned = validation_cache.learned_from(base.results, policy.health.max_base_failures)
    if learned is not None:
        validation_cache.store_learned(cache_dir, learned_key, learned, sandboxed=base.sandboxed)
    return learned


def _validate_while_learning(base_tree: Path, head_tree: Path, policy: Policy, suites: tuple[Suite, ...],
                             change: tuple[TreeDiff, dict[str, str]], allow_unsandboxed: bool,
                             progress: Progress | None, cache_dir: Path, interpreter: Interpreter,
                             learned_key: str) -> tuple[_Validated, _Validated, dict[str, list[int]]]:
    """Both revisions at once while the base learns what its validation imports, and the trace that
    learning gives. The head traces every changed module the base may turn out to import and keeps the
    lines of those it did: tracing only watches which lines run, so the head's results are those a trace of
    the learned modules alone gives."""
    diff, head_sources = change
    modules = frozenset(path for path in diff.changed_paths if path.endswith(".py"))
    base, head = _validate_both(base_tree, head_tree, policy, suites,
                                trace_lines(diff, policy, head_sources, learned=modules), allow_unsandboxed,
                                progress, cache_dir, interpreter)
    learned = _keep_learned(base, policy, cache_dir, learned_key)
    trace = trace_lines(diff, policy, head_sources, learned=learned or frozenset())
    results = {suite: replace(result, lines_hit={path: lines for path, lines in result.lines_hit.items()
                                                 if path in trace})
               for suite, result in head.results.items()}
    return base, replace(head, results=results), trace


def analysed_because(policy: Policy, changed: tuple[str, ...], learned: frozenset[str] | None) -> str | None:
    """Why the change is analysed, None when it touches no validation code.

    Validation code is what `validation.paths` names, and the repository modules the validation imported
    at the base (LEARNED; None when nothing was learned yet at this base). Only Python modules are ever
    learned, so a change to no `.py` file outside the listed paths is decided without learning.
    """
    listed = [path for path in changed if policy.touches_validation([path])]
    if listed:
        return f"touches {_named(listed)}, a validation path"
    if learned is None:
        modules = [path for path in changed if path.endswith(".py")]
        return f"touches {_named(modules)}; what validation imports at this base is not known yet" \
            if modules else None
    imported = [path for path in changed if path in learned]
    return f"touches {_named(imported)}, imported by validation at the base" if imported else None


def _named(paths: list[str]) -> str:
    more = len(paths) - 1
    return paths[0] + (f" and {more} more" if more else "")


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
                   cache_dir: Path, interpreter: Interpreter,
                   base: _Validated | None = None) -> tuple[_Validated, _Validated]:
    """Both revisions at once, each in its own sandbox; only the head is traced (its lines changed). The
    base's results of an earlier check of the same job are reused (validation_cache), as is BASE when the
    base was validated already in this check."""
    if base is not None:
        return base, _validate(head_tree, policy, suites, trace, "head", progress, interpreter,
                               allow_unsandboxed)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="prtriage-validate") as pool:
        at_base = pool.submit(_validate_base, base_tree, policy, suites, progress, cache_dir, interpreter,
                              allow_unsandboxed)
        at_head = pool.submit(_validate, head_tree, policy, suites, trace, "head", progress, interpreter,
                              allow_unsandboxed)
        return at_base.result(), at_head.result()


def _validate(tree: Path, policy: Policy, suites: tuple[Suite, ...], traced: dict[str, list[int]], step: str,
              progress: Progress | None, interpreter: Interpreter, allow_unsandboxed: bool) -> _Validated:
    started = time.monotonic()
    results, sandboxed = validate_revision(tree, policy, suites, trace=traced,
                                           allow_unsandboxed=allow_unsandboxed,
                                           on_progress=_step(progress, step), interpreter=interpreter)
    return _Validated(results, sandboxed, time.monotonic() - started)


def _validate_base(base_tree: Path, policy: Policy, suites: tuple[Suite, ...], progress: Progress | None,
                   cache_dir: Path, interpreter: Interpreter, allow_unsandboxed: bool) -> _Validated:
    started = time.monotonic()
    key = validation_cache.validation_key(base_tree, policy, suites, interpreter)
    cached = validation_cache.lookup(cache_dir, key, suites)
    if cached is not None:
        return _Validated(cached, True, time.monotonic() - started, cached=True)
    validated = _validate(base_tree, policy, suites, {}, "base", progress, interpreter, allow_unsandboxed)
    validation_cache.store(cache_dir, key, validated.results, sandboxed=validated.sandboxed)
    return validated


def require_loadable(matrix: Matrix, base: dict[str, SuiteResult], head: dict[str, SuiteResult]) -> None:
    """Every suite errored at base: the code does not load here, and no head result can be judged."""
    if not all(base[s.id].outcome.outcome == "error" for s in matrix.suites):
        return
    both = all(head[s.id].outcome.outcome == "error" for s in matrix.suites)
    where = "either revision" if both else "the base revision, so nothing can be compared"
    results = [*base.values(), *head.values()] if both else list(base.values())
    reasons = list(dict.fromkeys(r.outcome.message or "no reason given" for r in results))
    raise AnalysisError(f"the validation code could not run at {where}: " + " | ".join(reasons[:3]))


def compare_trees(base_tree: Path, head_tree: Path, *,
                  base_prints: dict[str, str] | None = None) -> tuple[TreeDiff, dict[str, str]]:
    """The diff of two trees, and the head text of each changed text file.

    Files are compared by hash first (BASE_PRINTS: the base's, when the caller has them already); only those
    whose bytes differ are read as text.
    """
    base_prints = fingerprints(base_tree) if base_prints is None else base_prints
    head_prints = fingerprints(head_tree)
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
