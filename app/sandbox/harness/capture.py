"""The capture harness: run each CI script as CI does and report the launches it makes.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library
and its sibling harness modules. Command: `python -B -s /harness/capture.py /job/job.json`, cwd = the
repository. One forked child per script; see docs/architecture.md ("The harness protocol", capture job).

A script that recorded launches and then failed (or ran out of time) is reported "captured" with a
`reason` naming the failure: the launches it made before are real CI command lines. "failed" means no
launch at all.
"""

from __future__ import annotations

import importlib
import os
import runpy
import shlex
import shutil
import signal
import sys
import tempfile
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import (
        common,
        definitions,
        fsfakes,
        intercept,
        intercept_net,
        intercept_shell,
        produce,
        pytestrun,
        stubs,
        vclock,
    )
else:
    import common
    import definitions
    import fsfakes
    import intercept
    import intercept_net
    import intercept_shell
    import produce
    import pytestrun
    import stubs
    import vclock

HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))
HARNESS_MODULES = ("common", "definitions", "fsfakes", "globs", "vpaths", "intercept", "intercept_net",
                   "intercept_shell", "produce", "pytestrun", "stubs", "vclock")
SOFT_LIMIT_SHARE = 0.8  # of suite_seconds: the child stops itself first and still reports what it saw
MAX_SHELL_SECONDS = 20.0


class _Disabled(BaseException):
    """Raised from the registration call of a script CI skips: nothing after it may run."""


class _OutOfTime(BaseException):
    """The child's own time limit: raised wherever the script is, so its launches survive."""


class Capture:
    """One capture job: the script source, its policy and the shared recording tools."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.repo = os.path.abspath(job["repo"])
        self.policy = job["policy"]
        self.harness = self.policy.get("harness") or {}
        self.source = self.policy["matrix"]["sources"][job["source"]]
        self.items = [capture_item(item) for item in job["scripts"]]
        self.workers = int(job.get("workers") or 1)
        self.seconds = float((self.harness.get("limits") or {}).get("suite_seconds", 60))
        self.launchers: list[str] = list(self.source.get("launchers") or [])
        if self.source.get("kind") == "pytest_launches":  # a step's pytest is recorded, then run for real
            wanted = ["pytest", "py.test", *pytestrun.console_scripts(self.repo)]
            self.launchers += [name for name in wanted if name not in self.launchers]
        self.tools = intercept_shell.prepare_tools(self.launchers)
        # The sandbox's own environment is no CI fact: a launch's env is what the CI chain exported.
        self.sandbox_env = dict(os.environ)

    def run(self) -> None:
        tasks = [(item, tempfile.mkdtemp(prefix="prtriage-records-", dir="/tmp")) for item in self.items]
        done = 0

        def finished(task: tuple[dict[str, Any], str], message: dict[str, Any]) -> None:
            nonlocal done
            common.send(message)
            shutil.rmtree(task[1], ignore_errors=True)  # without a sandbox, /tmp is the host's
            done += 1
            common.progress(done, len(tasks), task[0]["id"])

        common.progress(0, len(tasks), "capturing CI scripts")
        try:
            common.run_forked(tasks, self.capture_one, workers=self.workers, timeout=self.seconds,
                              on_result=finished,
                              on_failure=lambda task, reason: finished(task, self.lost_child(task, reason)))
        finally:
            shutil.rmtree(self.tools, ignore_errors=True)

    def capture_one(self, task: tuple[dict[str, Any], str]) -> dict[str, Any]:
        """Runs in the forked child: the script's message."""
        item, records = task
        settings = intercept_shell.ShellSettings(self.tools, records, self.launchers,
                                                 min(MAX_SHELL_SECONDS, self.seconds / 2))
        fsfakes.fresh_overlay()  # what another script wrote under /root/ is not this script's CI host
        if "steps" in item:  # a job whose outputs another job's matrix reads
            return self.produce(item)
        intercept.install(settings)
        intercept_net.install()
        vclock.install()
        registration: dict[str, Any] = {}
        os.environ.update(item["env"])  # a workflow row's job env: this child's alone
        if self.source.get("kind") == "python_definitions":
            return self.define(item["id"])
        if self.source.get("kind") == "pytest_launches":
            return self.run_tests(item, records, settings)
        shell = item.get("shell") or shell_script(self.source.get("command") or [], item)
        outcome = self.run_script(item, registration) if shell is None else self.run_step(shell, settings)
        return self.message(item["id"], records, outcome, registration, settings.problems)

    def produce(self, item: dict[str, Any]) -> dict[str, Any]:
        """A producing job's message: the outputs its last step wrote (`outputs`), or why none."""
        outputs, reason = produce.run_steps(item, self.repo, min(MAX_SHELL_SECONDS, self.seconds / 2))
        return {"type": "script", "script": item["id"], "status": "failed" if reason else "captured",
                "launches": [], "outputs": outputs, "reason": reason, "registration": None, "repo": self.repo,
                "ended": reason is None}

    def run_script(self, item: dict[str, Any], registration: dict[str, Any]) -> tuple[str, str | None]:
        """("ended", None) | ("disabled", why) | ("failed", reason), with the script run as `__main__`."""
        script = item["script"]
        path = os.path.join(self.repo, script)
        sys.argv = script_argv(self.source.get("command") or ["python3", "{script}"], script) + item["args"]
        # As `python3 <script>` with PYTHONPATH=<repo>: the script's directory first, then the root.
        sys.path[:] = [os.path.dirname(path), self.repo, *(p for p in sys.path if p != HARNESS_DIR)]
        for name in HARNESS_MODULES:
            sys.modules.pop(name, None)  # a repository module named `common` must not find ours
        signal.signal(signal.SIGALRM, _out_of_time)
        signal.setitimer(signal.ITIMER_REAL, self.seconds * SOFT_LIMIT_SHARE)
        try:
            self.hook_registration(registration)
            runpy.run_path(path, run_name="__main__")
        except _Disabled as why:
            return "disabled", str(why)
        except SystemExit as stop:
            if stop.code not in (None, 0) and not _ran_tests(stop):
                return "failed", f"SystemExit: {stop.code}{self.where(stop)}"
        except _OutOfTime as stop:
            return "failed", f"timed out after {self.seconds * SOFT_LIMIT_SHARE:g}s{self.where(stop)}"
        except vclock.WaitsForever as stop:
            return "failed", f"{stop}{self.where(stop)}"
        except BaseException as error:  # the script's own failure, whatever it is, is the reason
            return "failed", f"{type(error).__name__}: {error}{self.where(error)}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return "ended", None

    def run_step(self, text: str, settings: intercept_shell.ShellSettings) -> tuple[str, str | None]:
        """A shell string (a workflow step's `run:` text, a shell script's command line), as the runner's
        `bash -e {0}` runs it from the repository root."""
        os.chdir(self.repo)
        intercept_shell.run_shell(settings, "set -e\n" + text, None, self.repo)
        return "ended", None

    def run_tests(self, item: dict[str, Any], records: str,
                  settings: intercept_shell.ShellSettings) -> dict[str, Any]:
        """A pytest_launches step's message: the launches its pytest runs' test functions made, each naming
        its test (`test`)."""
        started = os.times().elapsed  # real time: vclock's clocks advance with the script's sleeps
        sys.path[:] = [*common.import_roots(self.repo), *(p for p in sys.path if p != HARNESS_DIR)]
        for name in HARNESS_MODULES:
            sys.modules.pop(name, None)

        def remaining() -> float:
            return max(1.0, self.seconds * SOFT_LIMIT_SHARE - (os.times().elapsed - started))

        state, reason, launches = pytestrun.run_step(item["shell"], settings, self.repo, remaining,
                                                     self.clean_env, str(self.source.get("entry") or ""),
                                                     int(self.source.get("gpus") or 0))
        return self.message(item["id"], records, (state, reason), {}, settings.problems, launches)

    def define(self, target: str) -> dict[str, Any]:
        """A python_definitions function's message: its definitions' runs as `suites`, as CI imports it
        (`python -m` from the repository root)."""
        sys.argv = ["-m"]
        sys.path[:] = [self.repo, *(p for p in sys.path if p != HARNESS_DIR)]
        for name in HARNESS_MODULES:
            sys.modules.pop(name, None)
        suites: list[dict[str, Any]] = []
        disabled: list[str] = []
        failures: list[str] = []
        signal.signal(signal.SIGALRM, _out_of_time)
        signal.setitimer(signal.ITIMER_REAL, self.seconds * SOFT_LIMIT_SHARE)
        try:
            for found in definitions.call_function(target):
                try:
                    name, off, runs = definitions.suites_of(found, self.source)
                except (Exception, _OutOfTime) as error:  # one bad definition: the others still count
                    failures.append(f"{type(error).__name__}: {error}{self.where(error)}")
                    continue
                if off:
                    disabled.append(name)
                suites.extend(runs)
        except BaseException as error:  # the function's own failure, whatever it is, is the reason
            failures.insert(0, f"{type(error).__name__}: {error}{self.where(error)}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        reason = "; ".join(failures[:3]) + (f" (and {len(failures) - 3} more)" if len(failures) > 3 else "")
        status = "captured" if suites else "disabled" if disabled and not failures else "failed"
        return {"type": "script", "script": target, "status": status, "launches": [], "suites": suites,
                "disabled": disabled, "reason": reason or None, "registration": None, "repo": self.repo,
                "ended": not failures}

    def hook_registration(self, registration: dict[str, Any]) -> None:
        """Wrap the CI registration function in its real module, so the script's import gets the wrapper."""
        spec = self.source.get("registration")
        if not spec:
            return
        module_name, _, function_name = spec["function"].partition(":")
        try:
            module = importlib.import_module(module_name)
            original = getattr(module, function_name)
        except (ImportError, AttributeError):
            return  # the script's own import of it fails the same way, and says so
        disabled_kwarg = spec.get("disabled_kwarg") or "disabled"

        def register(*args: Any, **kwargs: Any) -> Any:
            registration.update({k: jsonable(v) for k, v in kwargs.items()})
            disabled = kwargs.get(disabled_kwarg)
            if disabled:
                raise _Disabled(disabled if isinstance(disabled, str) else f"{disabled_kwarg}={disabled!r}")
            return original(*args, **kwargs)

        setattr(module, function_name, register)

    def where(self, error: BaseException) -> str:
        path, line = common.repo_frame(error.__traceback__, self.repo)
        return f" (at {path}:{line})" if path else ""

    def message(self, script: str, records: str, outcome: tuple[str, str | None],
                registration: dict[str, Any], problems: list[str],
                launches: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        state, reason = outcome
        launches = self.launches(records) if launches is None else launches
        if problems:
            distinct = list(dict.fromkeys(problems))
            more = f" (and {len(distinct) - 3} more)" if len(distinct) > 3 else ""
            notes = "; ".join(distinct[:3]) + more
            reason = f"{reason}; {notes}" if reason else notes
        return script_message(self.repo, script, state, reason, launches, registration)

    def launches(self, records: str) -> list[dict[str, Any]]:
        launches = intercept_shell.read_launches(records)
        self.clean_env(launches)
        return launches

    def clean_env(self, launches: list[dict[str, Any]]) -> None:
        for launch in launches:
            launch["env"] = {k: v for k, v in launch["env"].items() if self.sandbox_env.get(k) != v}

    def lost_child(self, task: tuple[dict[str, Any], str], reason: str) -> dict[str, Any]:
        """The message for a child that died or was killed: what its bash recorded still counts."""
        item, records = task
        return script_message(self.repo, item["id"], "failed", reason, self.launches(records), {})


def capture_item(item: Any) -> dict[str, Any]:
    """A job's script as {id, script, args, env}: a path alone is a script run without extra words."""
    if isinstance(item, str):
        return {"id": item, "script": item, "args": [], "env": {}}
    found: dict[str, Any] = {"id": str(item["id"]), "script": str(item["script"]),
                             "args": [str(word) for word in item.get("args") or ()],
                             "env": {str(k): str(v) for k, v in (item.get("env") or {}).items()}}
    if isinstance(item.get("shell"), str):  # a workflow step: its text runs in the recording bash
        found["shell"] = item["shell"]
    if isinstance(item.get("steps"), list):  # a producing job's steps: {name, run, env} each
        found["steps"] = [{"name": str(step.get("name")), "run": str(step.get("run")),
                           "env": {str(k): str(v) for k, v in (step.get("env") or {}).items()}}
                          for step in item["steps"] if isinstance(step, dict)]
    return found


def script_message(repo: str, script: str, state: str, reason: str | None, launches: list[dict[str, Any]],
                   registration: dict[str, Any]) -> dict[str, Any]:
    if state == "disabled":
        status, launches = "disabled", []
    elif launches:
        status = "captured"
    else:
        status, reason = "failed", reason or "no launch recorded"
    if status == "captured" and state == "failed":
        reason = f"after {len(launches)} launch(es): {reason}"
    # `repo` (beyond the protocol's keys) says where launch paths inside the repository start.
    return {"type": "script", "script": script, "status": status, "launches": launches, "reason": reason,
            "registration": registration or None, "repo": repo, "ended": state == "ended"}


def shell_script(command: list[str], item: dict[str, Any]) -> str | None:
    """The shell string that runs a shell script as CI does (`bash {script} ...`, or any `.sh` file, which
    python would not run), with the item's words; None for a Python script."""
    launcher = command[0] if command else ""
    if launcher in ("bash", "sh"):
        words = [word.replace("{script}", item["script"]) for word in command]
    elif item["script"].endswith(".sh"):
        words = ["bash", item["script"]]
    else:
        return None
    return shlex.join(words + item["args"])


def script_argv(command: list[str], script: str) -> list[str]:
    """sys.argv as CI's command gives it: the script, then the words after it."""
    position = next((i for i, word in enumerate(command) if "{script}" in word), None)
    if position is None:
        return [script]
    return [script] + [word.replace("{script}", script) for word in command[position + 1:]]


def jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON value for a registration keyword: containers kept, anything else as its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth < 4 and isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v, depth + 1) for v in items]
    if depth < 4 and isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    return repr(value)


def _ran_tests(stop: SystemExit) -> bool:
    """The script handed its `__main__` to pytest and exits with its status: it ran to its end.

    Such a script's tests need GPUs and servers, so in the sandbox they fail; that is the script's kind
    (a test runner, no train entry), not a failure of capture.
    """
    if "_pytest.config" not in sys.modules:
        return False
    frames = traceback.extract_tb(stop.__traceback__)
    return bool(frames) and "pytest.main(" in (frames[-1].line or "").replace(" ", "")


def _out_of_time(signum: int, frame: Any) -> None:
    raise _OutOfTime()


def install_fakes(repo: str, harness_policy: dict[str, Any]) -> str | None:
    """Stubs and file fakes, as the validation harness has them; a reason when the sandbox is unusable."""
    try:
        stubs.install(repo, harness_policy)
    except ImportError as error:  # a package the policy says must be real does not import
        return f"{type(error).__name__}: {error}"
    fsfakes.install(repo, harness_policy)
    return None


def main() -> None:
    job = common.load_job()
    common.open_channel()
    repo = os.path.abspath(job["repo"])
    os.chdir(repo)
    problem = install_fakes(repo, (job["policy"].get("harness") or {}))
    if problem is not None:
        common.fatal(problem)
    else:
        Capture(job).run()
    common.send({"type": "done"})


if __name__ == "__main__":
    main()
