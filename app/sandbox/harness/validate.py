"""The validation harness: replays each suite's argv through one revision's validation code.

Runs INSIDE the sandbox as `python -B -s /harness/validate.py /job/job.json`, cwd = the repository; imports
nothing of `app`, only the standard library and sibling harness modules. Sends one `suite` message per suite
(SuiteResult JSON), `progress` messages, and `done`; `fatal` when the revision cannot be validated at all.
"""

from __future__ import annotations

import ast
import hmac
import importlib
import importlib.util
import inspect
import os
import secrets
import sys
import textwrap
import types
from typing import TYPE_CHECKING, Any

HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import (
        boundary,
        bytecache,
        common,
        entryscript,
        envprobe,
        fsfakes,
        hydra_entry,
        leader,
        linewatch,
        minimize,
        record,
        sourcememo,
        stubs,
        suiterun,
        tolerant,
    )
else:
    import boundary
    import bytecache
    import common
    import entryscript
    import envprobe
    import fsfakes
    import hydra_entry
    import leader
    import linewatch
    import minimize
    import record
    import sourcememo
    import stubs
    import suiterun
    import tolerant

HARNESS_MODULES = ("boundary", "bytecache", "common", "entryscript", "envprobe", "flagsearch", "fsfakes",
                   "hugepages", "hydra_entry", "leader", "linewatch", "memo", "minimize", "record",
                   "sourcememo", "stubs", "suiterun", "tolerant", "vpaths", "globs")
_HARNESS: list[types.ModuleType] = []
TOKEN = "token"  # the key of a suite's token, in the suite and in its result (suiterun.run_suite)


class Job:
    """The validate job and what every process of this run shares."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.repo: str = os.path.abspath(raw["repo"])
        self.validation: dict[str, Any] = raw["policy"]["validation"]
        self.harness: dict[str, Any] = raw["policy"].get("harness") or {}
        self.suites: list[dict[str, Any]] = list(raw["suites"])
        self.workers = max(1, int(raw.get("workers") or 1))
        self.suite_seconds = float((self.harness.get("limits") or {}).get("suite_seconds", 60))
        self.trace: dict[str, list[int]] = raw.get("trace") or {}
        # the minimal arguments of rejections (minimize.py): then `suites` are the searched suites
        self.minimal: dict[str, Any] | None = raw.get("minimal")
        self.base_env = dict(os.environ)
        # no validator named (or `mode: boundary`): each suite's own launch runs until training would start
        self.to_boundary = self.validation.get("mode") == "boundary" or not self.validation.get("entry")
        if self.to_boundary:  # a Hydra application re-raises its error (its line) instead of exit(1)
            self.base_env.setdefault("HYDRA_FULL_ERROR", "1")

    def open_revision(self, suite: dict[str, Any]) -> suiterun.Revision:
        """In a leader: import the entry under the suite's environment, ready to run suites."""
        suiterun.set_environment(self.base_env, suite)
        try:
            tolerant.install_replacements(self.repo, self.validation, self.harness)
        except tolerant.ReplacementError as exc:
            raise leader.ImportFailure(str(exc)) from None
        entries = {str(s.get("entry") or "") for s in self.suites}
        if not self.to_boundary:
            try:
                entry = self._import_entry()
            except EntryAbsent as exc:
                self._to_boundary_instead(str(exc))
        if self.to_boundary:
            entry = entryscript.launch(self.repo)
            with boundary.armed():
                entryscript.prime_launches(self.repo, entries)
        if self.validation.get("run_entry_script") and not self.to_boundary:
            entryscript.prime(self.repo, entries)
        return suiterun.Revision(repo=self.repo, entry=entry, base_env=self.base_env,
                                 suite_seconds=self.suite_seconds,
                                 rewrites=record.prepare(list(self.validation.get("functions") or ()),
                                                         self.repo),
                                 to_boundary=self.to_boundary)

    def _import_entry(self) -> Any:
        """The first of the policy's entries that imports at this revision (an entry may be renamed or
        moved over a repository's history: `validation.entry` lists the alternatives, newest first)."""
        entry = self.validation["entry"]
        alternatives = [entry] if isinstance(entry, str) else list(entry)
        failures: list[str] = []
        for target in alternatives:
            try:
                return self._import_one(target)
            except leader.ImportFailure as exc:
                failures.append(str(exc))
        if all(_absent(target) for target in alternatives):
            raise EntryAbsent(f"validation.entry {' or '.join(alternatives)}: none exists at this revision")
        raise leader.ImportFailure("; ".join(failures))

    def _to_boundary_instead(self, reason: str) -> None:
        """A revision older (or newer) than the policy's named validator: each suite's own launch runs to its
        training boundary instead, which needs no validator's name; drift every suite reports."""
        self.to_boundary = True
        self.base_env.setdefault("HYDRA_FULL_ERROR", "1")
        boundary.install(self.repo)
        tolerant.skipped.append(f"{reason}; each launch ran to its training boundary instead")

    def _import_one(self, target: str) -> Any:
        module_name, _, function = target.partition(":")
        if self.validation.get("hydra") is not None:
            return self._hydra_entry(target)
        try:
            owner: Any = importlib.import_module(module_name)
            if self.validation.get("run_entry_script"):
                getattr(owner, function)  # a missing entry fails here, as an import failure
                return entryscript.through_script(owner, function, target)
            for name in function.split("."):
                owner = _instance_method(owner, name) or getattr(owner, name)
            owner = _argv_defaults_per_call(owner)
        except (Exception, SystemExit) as exc:
            path, line = common.repo_frame(exc.__traceback__, self.repo)
            where = f" ({path}:{line})" if path else ""
            raise leader.ImportFailure(f"the validation entry {target} does not import: "
                                       f"{type(exc).__name__}: {exc}{where}") from None
        if not callable(owner):
            raise leader.ImportFailure(f"the validation entry {target} is not callable")
        return owner

    def _hydra_entry(self, target: str) -> Any:
        """The composer of `target`'s @hydra.main config and the policy's checks (hydra_entry.py)."""
        try:
            return hydra_entry.make_entry(self.repo, target, self.validation["hydra"], absent=_absent,
                                          drift=tolerant.skipped.append)
        except (Exception, SystemExit) as exc:
            path, line = common.repo_frame(exc.__traceback__, self.repo)
            where = f" ({path}:{line})" if path else ""
            raise leader.ImportFailure(f"the validation entry {target} does not import as a Hydra "
                                       f"application: {type(exc).__name__}: {exc}{where}") from None


class EntryAbsent(leader.ImportFailure):
    """No named validator exists at this revision (its module or its function), as opposed to one that
    exists and fails to import: the former is drift, the latter the revision's own breakage."""


def _absent(target: str) -> bool:
    """TARGET's module or its function does not exist at this revision (a failing import is not absence)."""
    module_name, _, function = target.partition(":")
    try:
        if importlib.util.find_spec(module_name) is None:
            return True
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:  # the module or a package above it, not something it imports
        return bool(exc.name) and (module_name == exc.name or module_name.startswith(f"{exc.name}."))
    except (Exception, SystemExit):
        return False
    return not hasattr(module, function.split(".")[0])


def _instance_method(owner: Any, name: str) -> Any:
    """`Class.method` where the method wants an instance (`ConfigManager.parse_args`): a callable that calls
    it on a fresh `Class()` each time, as the entry script does; None for anything else."""
    method = inspect.getattr_static(owner, name, None) if isinstance(owner, type) else None
    if not isinstance(method, types.FunctionType):
        return None

    def call_on_instance(*args: Any, **kwargs: Any) -> Any:
        return getattr(owner(), name)(*args, **kwargs)

    call_on_instance.__qualname__ = f"{owner.__qualname__}().{name}"
    call_on_instance.__wrapped__ = method  # type: ignore[attr-defined]  # its defaults, for the wrapper below
    return call_on_instance


def _argv_defaults_per_call(entry: Any) -> Any:
    """ENTRY, its parameter defaults that read `sys.argv` (`args: list[str] = sys.argv[1:]`) evaluated at
    each call instead of once at import. Python evaluates a default when the `def` runs: in CI the module is
    imported by a process that has its argv already, here by a leader before any suite's argv is set, and
    the default would be the leader's words for every suite."""
    function = inspect.unwrap(entry)
    late = argv_defaults(function) if isinstance(function, types.FunctionType) else {}
    if not late:
        return entry

    def with_argv_now(*args: Any, **kwargs: Any) -> Any:
        now = {name: eval(code, function.__globals__) for name, code in late.items()}
        return entry(*args, **{**now, **kwargs})

    with_argv_now.__qualname__ = getattr(entry, "__qualname__", "entry")
    return with_argv_now


def argv_defaults(function: types.FunctionType) -> dict[str, types.CodeType]:
    """Keyword-passable parameter of FUNCTION -> its default's expression compiled, for each default that
    reads `sys.argv`; empty when the source is not readable (the default then stays as imported)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return {}
    node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if node is None:
        return {}
    spec = node.args
    positional = [*spec.posonlyargs, *spec.args]
    defaulted = list(zip(positional[len(positional) - len(spec.defaults):], spec.defaults, strict=True))
    pairs = [*((a, d) for a, d in defaulted if a not in spec.posonlyargs),
             *((a, d) for a, d in zip(spec.kwonlyargs, spec.kw_defaults, strict=True)
               if d is not None)]
    return {arg.arg: compile(ast.Expression(default), "<default>", "eval")
            for arg, default in pairs if _reads_argv(default)}


def _reads_argv(expression: ast.expr) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "argv" and isinstance(n.value, ast.Name)
               and n.value.id == "sys" for n in ast.walk(expression))


class Progress:
    """Sends every suite's message, with progress, and remembers the first fatal reason.

    Each suite carries a token drawn here, before any repository code runs, that its child puts in its
    result: a result without its suite's token was written by repository code (a module writing lines into
    the pipe it inherited), and is sent as an error of that suite. Code that looks for the tokens in the
    harness's memory is beyond this (docs/security.md, "Trust model").
    """

    def __init__(self, suites: list[dict[str, Any]]) -> None:
        self.total, self.done, self.fatal_sent = len(suites), 0, False
        self.tokens: dict[str, str] = {}
        for suite in suites:
            suite[TOKEN] = self.tokens[suite["id"]] = secrets.token_hex(16)

    def result(self, result: dict[str, Any]) -> None:
        token = result.pop(TOKEN, None)
        expected = self.tokens.get(result["suite_id"])
        if not isinstance(token, str) or expected is None or not hmac.compare_digest(token, expected):
            self.failure({"id": result["suite_id"]}, "a report of this suite came from elsewhere than its "
                                                     "harness process: repository code wrote it")
            return
        self._send(result)

    def failure(self, suite: dict[str, Any], reason: str) -> None:
        self._send({"suite_id": suite["id"], "events": [], "known_flags": [], "tolerated_flags": [],
                    "learned": [], "lines_hit": {}, "drift": [], "imported": [], "rejection_assumes": [],
                    "outcome": {"outcome": "error", "exception": None, "message": reason, "path": None,
                                "line": None}})

    def _send(self, result: dict[str, Any]) -> None:
        common.send({"type": "suite", **result})
        self.done += 1
        common.progress(self.done, self.total, f"suite {result['suite_id']}")

    def import_failure(self, reason: str) -> None:
        if not self.fatal_sent:
            self.fatal_sent = True
            common.fatal(reason)


def main() -> None:
    common.open_channel()
    _isolate_harness_modules()
    job = Job(common.load_job())
    progress = Progress(job.suites)
    os.chdir(job.repo)  # CI runs the entry from the repository root
    sys.path[:0] = common.import_roots(job.repo)
    bytecache.install(job.repo)  # before any repository module is imported, like linewatch
    linewatch.install(job.repo, job.trace)
    try:
        _run(job, progress)
    finally:
        bytecache.remove()


def _run(job: Job, progress: Progress) -> None:
    try:
        fsfakes.install(job.repo, job.harness)
        sourcememo.install()
        stubs.install(job.repo, job.harness)
        tolerant.install_argparse_patches(job.repo, job.validation.get("attribute_defaults") or {})
        if job.to_boundary:
            boundary.install(job.repo)
    except stubs.MissingRealPackage as exc:
        _fail_all(job, progress, str(exc))
        return
    if job.minimal is not None:
        _search(job, job.minimal, progress)
        return
    report = leader.Report(result=progress.result, failure=progress.failure,
                           import_failure=progress.import_failure)
    leader.run_all(job.suites, job.open_revision, workers=job.workers, suite_seconds=job.suite_seconds,
                   report=report)
    common.send({"type": "done"})


def _search(job: Job, minimal: dict[str, Any], progress: Progress) -> None:
    """The minimal arguments of each searched suite, one import per environment (minimize.py): a `minimal`
    message per search, with the kept arguments' indexes; the host checks them against what it sent."""
    bound = minimize.Bound(rounds=int(minimal.get("rounds") or 0), seconds=float(minimal.get("seconds") or 0),
                           workers=job.workers, suite_seconds=job.suite_seconds)
    groups: dict[Any, list[dict[str, Any]]] = {}
    for suite in job.suites:
        groups.setdefault(envprobe.whole_environment(suite), []).append(suite)

    def found(message: dict[str, Any]) -> None:
        if "search" in message:
            common.send({"type": "minimal", "search": message.get("search"), "kept": message.get("kept"),
                         "complete": message.get("complete"), "sets": message.get("sets"),
                         "rounds": message.get("rounds")})

    report = leader.Report(result=lambda result: None, failure=lambda suite, why: None,
                           import_failure=progress.import_failure, found=found)
    leader.run_searches(list(groups.values()), job.open_revision,
                        lambda revision, group, send: minimize.search(revision, group, send, bound),
                        suite_seconds=job.suite_seconds, report=report)
    common.send({"type": "done"})


def _fail_all(job: Job, progress: Progress, reason: str) -> None:
    progress.import_failure(reason)
    for suite in job.suites:
        progress.failure(suite, reason)
    common.send({"type": "done"})


def _isolate_harness_modules() -> None:
    """Repository code must not reach the harness through the import system: a top-level `common` or
    `record` is its own, and a head that looks for the harness among the loaded modules (to patch the
    outcome it reports) must not find it.

    The harness modules stay loaded (they hold references to one another, and `_HARNESS` holds them) but
    leave sys.modules and sys.path, and `__main__` becomes an empty module.
    """
    if HARNESS_DIR in sys.path:
        sys.path.remove(HARNESS_DIR)
    _HARNESS.extend(module for name in HARNESS_MODULES if (module := sys.modules.pop(name, None)) is not None)
    _HARNESS.append(sys.modules["__main__"])
    sys.modules["__main__"] = types.ModuleType("__main__")

if __name__ == "__main__":
    main()
