"""pytest run for real in the recording sandbox: the launches CI's test functions make, test by test.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library
(pytest comes from the analysis environment, and only when a `pytest_launches` source asks for it).
A CI step's text first runs in the recording bash with `pytest` as one more launcher, so that its `cd`,
variables, `uv run` and `python -m pytest` resolve as on the CI host; each pytest command line it started
then runs in this process with CI's own selection (`-m`, `-k`, paths), every process start intercepted
(intercept.py): a test function's `subprocess.run(["python", "train.py", ...])` is recorded, answered as a
healthy GPU host would, and attributed to the test that made it. What a test asserts afterwards about its
training's output fails here, which is no concern of capture.
"""

from __future__ import annotations

import io
import os
import re
import runpy
import shlex
import shutil
import signal
import sys
import tempfile
import tomllib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import intercept_shell
else:
    import intercept_shell

# Options of pytest plugins the analysis environment may lack (parallelism, reruns, coverage, timeouts): CI's
# selection does not depend on them, and pytest refuses an option no installed plugin defines.
PLUGIN_OPTIONS_WITH_VALUE = frozenset({"-n", "--numprocesses", "--dist", "--maxprocesses", "--timeout",
                                       "--reruns", "--reruns-delay", "--cov", "--cov-report",
                                       "--cov-config", "--junitxml", "--junit-xml", "--html",
                                       "--durations", "--durations-min", "--basetemp", "-p"})
PLUGIN_FLAGS = frozenset({"--cov-append", "--no-cov", "--forked", "--benchmark-disable",
                          "--benchmark-skip", "--cache-clear", "--lf", "--ff", "--last-failed",
                          "--failed-first", "--pdb", "--trace", "--exitfirst", "-x"})
NO_PYTEST = ("pytest is not installed in the analysis environment, so CI's test functions cannot run: "
             "add it to harness.requirements (pytest==<CI's version>)")
OUTSIDE_TESTS = "(collection)"  # launches made while no test ran: at import of a test module or conftest
PYTEST_OWN_VARIABLES = ("PYTEST_CURRENT_TEST", "PYTEST_VERSION")
MAX_PYTEST_RUNS = 8  # of one CI step
MAX_ERROR_CHARS = 500
EXIT_REASONS = {2: "pytest was interrupted", 3: "pytest failed internally",
                4: "pytest refused its command line", 5: "CI's selection collected no test"}


MAX_PYPROJECT_BYTES = 1 << 20
_SCRIPT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def console_scripts(repo: str) -> dict[str, str]:
    """The repository's own console scripts (`[project.scripts]` of its pyproject.toml: `sft =
    "prime_rl.entrypoints.sft:main"`) by name, each as the file of its module (`<repo>/src/prime_rl/
    entrypoints/sft.py`), for those whose module is a file of the tree. CI's `uv run sft ...` starts that
    module's code: recorded as a launch of the file, its words are the entry's."""
    try:
        with open(os.path.join(repo, "pyproject.toml"), "rb") as handle:
            text = handle.read(MAX_PYPROJECT_BYTES + 1)
        project = tomllib.loads(text.decode("utf-8", "replace")) if len(text) <= MAX_PYPROJECT_BYTES else {}
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    scripts = (project.get("project") or {}).get("scripts") or {}
    found: dict[str, str] = {}
    for name, target in scripts.items() if isinstance(scripts, dict) else ():
        if not (isinstance(target, str) and _SCRIPT_NAME.fullmatch(name)):
            continue
        module = target.partition(":")[0].strip().replace(".", "/")
        for candidate in (f"{module}.py", f"src/{module}.py", f"{module}/__main__.py",
                          f"src/{module}/__main__.py"):
            if os.path.isfile(os.path.join(repo, candidate)):
                found[name] = os.path.join(repo, candidate)
                break
    return found


def as_module_file(launch: dict[str, Any], scripts: dict[str, str]) -> dict[str, Any]:
    """A launch of a console script as the python launch of its module's file."""
    argv = launch["argv"]
    path = scripts.get(os.path.basename(argv[0])) if argv else None
    return {**launch, "argv": ["python3", path, *argv[1:]]} if path else launch


class InProcess:
    """The entry a test runs in its own process, as CI would start it: `sys.argv` set, then
    `runpy.run_path("recipes/train.py", run_name="__main__")` or `runpy.run_module("pkg.train", ...)`
    (pytorch/torchtune's recipe tests). Recorded as the launch `python3 <path> <sys.argv[1:]>` (`-m <module>`)
    and not run: the training after its validation is not for the sandbox. Any other file runs as it would."""

    def __init__(self, settings: intercept_shell.ShellSettings, entry: str) -> None:
        self.settings = settings
        try:
            self.entry: re.Pattern[str] | None = re.compile(entry) if entry else None
        except re.error:
            self.entry = None
        self.real = (runpy.run_path, runpy.run_module)

    def __enter__(self) -> InProcess:
        runpy.run_path, runpy.run_module = self.run_path, self.run_module
        return self

    def __exit__(self, *exc_info: Any) -> None:
        runpy.run_path, runpy.run_module = self.real

    def run_path(self, path_name: Any, init_globals: Any = None, run_name: Any = None) -> dict[str, Any]:
        path = os.path.abspath(os.fsdecode(path_name))
        if run_name == "__main__" and self.entry is not None and self.entry.search(path):
            return self.record(["python3", path], init_globals)
        return self.real[0](path_name, init_globals, run_name)

    def run_module(self, mod_name: str, init_globals: Any = None, run_name: Any = None,
                   alter_sys: bool = False) -> dict[str, Any]:
        if run_name == "__main__" and self.entry is not None and self.entry.search(mod_name):
            return self.record(["python3", "-m", mod_name], init_globals)
        return self.real[1](mod_name, init_globals, run_name, alter_sys)

    def record(self, launcher: list[str], init_globals: Any) -> dict[str, Any]:
        words = [str(word) for word in sys.argv[1:]]
        intercept_shell.run_shell(self.settings, shlex.join([*launcher, *words]), None, os.getcwd())
        return dict(init_globals or {})


class OutOfTime(KeyboardInterrupt):
    """The item's own time limit: pytest ends its session at a KeyboardInterrupt, with what it recorded."""


def is_pytest(argv: list[str]) -> bool:
    """A launch that starts pytest: `pytest ...`, `/path/bin/pytest ...`, `python -m pytest ...`."""
    if not argv:
        return False
    name = os.path.basename(argv[0])
    if name in ("pytest", "py.test"):
        return True
    return (name.startswith("python") and len(argv) > 2 and argv[1] == "-m"
            and argv[2] in ("pytest", "py.test"))


def pytest_arguments(argv: list[str]) -> list[str]:
    """The words after pytest, without the options of plugins the sandbox may lack."""
    words = argv[3:] if os.path.basename(argv[0]).startswith("python") else argv[1:]
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in PLUGIN_OPTIONS_WITH_VALUE:
            skip = "=" not in word
            continue
        if name in PLUGIN_FLAGS or name.startswith("--cov") or (word.startswith("-n") and word[2:].isdigit()):
            continue
        kept.append(word)
    return kept


class Attribution:
    """The pytest plugin that gives each test its own records directory, so each launch names its test."""

    def __init__(self, settings: intercept_shell.ShellSettings, scripts: dict[str, str]) -> None:
        self.settings, self.scripts = settings, scripts
        self.outside = settings.records
        self.directories: list[tuple[str, str]] = [(OUTSIDE_TESTS, self.outside)]
        self.collected = 0
        self.collection_errors: list[str] = []  # test modules that did not import here
        self.out_of_time = False

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        self.collected = len(items)

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            lines = [line for line in str(report.longrepr).splitlines() if line.startswith("E ")]
            # pytest's first `E` line names the exception; the ones after it continue its message
            error = lines[0][1:].strip() if lines else str(report.longrepr).strip().splitlines()[-1:]
            self.collection_errors.append(f"{report.nodeid}: {str(error)[:MAX_ERROR_CHARS]}")

    def stop(self, signum: int, frame: Any) -> None:
        """SIGALRM: the item's time is up."""
        self.out_of_time = True
        raise OutOfTime()

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        directory = tempfile.mkdtemp(prefix="test-", dir=self.outside)
        self.directories.append((nodeid, directory))
        self.settings.records = directory

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.settings.records = self.outside

    def launches(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for test, directory in self.directories:
            for launch in intercept_shell.read_launches(directory):
                for name in PYTEST_OWN_VARIABLES:  # what pytest itself exports is no CI fact
                    launch["env"].pop(name, None)
                found.append({**as_module_file(launch, self.scripts), "test": test})
        return found


Launches = list[dict[str, Any]]


def run_step(text: str, settings: intercept_shell.ShellSettings, repo: str, remaining: Callable[[], float],
             clean_env: Callable[[Launches], None], entry: str = "") -> tuple[str, str | None, Launches]:
    """(state, reason, launches) of one CI step: its text in the recording bash, then each pytest it
    started, for real, sharing the seconds `remaining` gives. state: "ended" (every pytest ran its
    selection) or "failed"."""
    try:
        import pytest
    except ImportError:
        return "failed", NO_PYTEST, []
    os.chdir(repo)
    intercept_shell.run_shell(settings, "set -e\n" + text, None, repo)
    started = [launch for launch in intercept_shell.read_launches(settings.records)
               if is_pytest(launch["argv"])]
    if not started:
        return "failed", "the step started no pytest", []
    launches: list[dict[str, Any]] = []
    reasons: list[str] = []
    runs = started[:MAX_PYTEST_RUNS]
    for number, run in enumerate(runs):
        found, reason = run_pytest(pytest, run, settings, repo, remaining() / (len(runs) - number), entry)
        clean_env(found)
        launches += found
        if reason:
            reasons.append(reason if len(started) == 1 else f"pytest run {number + 1}: {reason}")
    if len(started) > MAX_PYTEST_RUNS:
        reasons.append(f"{len(started) - MAX_PYTEST_RUNS} more pytest runs of the step were left out")
    return ("failed" if reasons else "ended"), "; ".join(reasons) or None, launches


def run_pytest(pytest: Any, started: dict[str, Any], settings: intercept_shell.ShellSettings, repo: str,
               seconds: float, entry: str = "") -> tuple[list[dict[str, Any]], str | None]:
    """One pytest command line as CI started it (its words, directory and exported environment), in this
    process: the launches its tests made, and why it did not run its whole selection (None: it did)."""
    records = tempfile.mkdtemp(prefix="pytest-", dir=settings.records)
    settings.records = records
    plugin = Attribution(settings, console_scripts(repo))
    cwd = started.get("cwd") or repo
    saved = (dict(os.environ), list(sys.argv), list(sys.path), os.getcwd(), sys.stderr)
    os.environ.update(started.get("env") or {})
    errors = io.StringIO()
    signal.signal(signal.SIGALRM, plugin.stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        os.chdir(cwd if os.path.isdir(cwd) else repo)
        sys.argv = ["pytest"]
        sys.stderr = errors
        # A test module that does not import here (a package the analysis environment lacks) must not
        # cost the launches of the others, as it would with pytest's default stop at collection errors.
        with InProcess(settings, entry):
            status = int(pytest.main([*pytest_arguments(started["argv"]), "-p", "no:cacheprovider", "-q",
                                      "--continue-on-collection-errors"], plugins=[plugin]))
    except OutOfTime:
        status = 2
    except BaseException as error:  # conftest code, whatever it does, is the reason
        status, errors = 3, io.StringIO(f"{type(error).__name__}: {error}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        environment, sys.argv, sys.path[:], cwd, sys.stderr = saved
        os.environ.clear()
        os.environ.update(environment)
        os.chdir(cwd)
        settings.records = os.path.dirname(records)
    launches = plugin.launches()
    shutil.rmtree(records, ignore_errors=True)
    return launches, _reason(status, errors.getvalue(), plugin, seconds)


def _reason(status: int, errors: str, plugin: Attribution, seconds: float) -> str | None:
    """Why the run did not cover CI's whole selection: out of time, pytest's own refusal, or test modules
    that did not import here (None: it covered it; its tests' own failures are what the sandbox lacks)."""
    failed = plugin.collection_errors
    unimported = (f"{len(failed)} test module(s) did not import here, their tests did not run: "
                  + "; ".join(failed[:2]) + (" ..." if len(failed) > 2 else "")) if failed else None
    if plugin.out_of_time:
        timed = f"pytest ran out of its {seconds:g}s after collecting {plugin.collected} test(s)"
        return f"{timed}; {unimported}" if unimported else timed
    if status in (0, 1):
        return unimported
    reason = EXIT_REASONS.get(status, f"pytest ended with status {status}")
    lines = [line.strip() for line in errors.splitlines() if line.strip()]
    # argparse's own line names the refused words; pytest's `E` lines are an exception and its message (a
    # conftest's ImportError spans several)
    refused = [line.split(" error: ", 1)[1] for line in lines if " error: " in line]
    marked = [line[2:].strip() for line in lines if line.startswith("E ")]
    detail = refused[0] if refused else " ".join(marked[:4]) if marked else lines[-1] if lines else ""
    return f"{reason}: {detail[:MAX_ERROR_CHARS]}" if detail else reason
