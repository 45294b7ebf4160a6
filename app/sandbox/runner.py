"""Runs one harness program inside the bubblewrap sandbox and streams its messages (see docs/sandbox.md).

Which bubblewrap: $PRTRIAGE_BWRAP if set, else `bwrap` on PATH. Pointing PRTRIAGE_BWRAP at a path that
does not exist makes bubblewrap missing, for real: that is how tests exercise the unsandboxed fallback.
When prtriage runs as root, the sandbox runs as an unprivileged uid of its own (app.sandbox.stage),
from $PRTRIAGE_SANDBOX_UID (default 2000000000) up.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.analysis.core.policy import Limits
from app.bundled import package_file
from app.sandbox.bwrap import (
    BWRAP_ENV,
    LAUNCH_ENV,
    SANDBOX_ENV,
    caller_is_root,
    find_bwrap,
    sandbox_argv,
    sandbox_uid,
)
from app.sandbox.interpreter import Interpreter, bare_interpreter
from app.sandbox.limits import describe_status, rlimit_setter
from app.sandbox.memory import MemoryCgroup, memory_cgroup
from app.sandbox.seccomp import UnsupportedMachine, filter_fd
from app.sandbox.stage import TOOLS, find_tools, launch_prefix, stage_view, staging_dir
from app.sandbox.supervise import SandboxInit, Watch, supervise
from app.sandbox.view import HARNESS, JOB, REPO, build_view

log = logging.getLogger(__name__)

HARNESS_DIR = package_file("app.sandbox", "harness")
REAPER = package_file("app.sandbox", "reap.py")
PROBE_LIMITS = Limits(total_seconds=30)
INSTALL_HINT = "install it (Debian/Ubuntu: apt-get install bubblewrap) or point PRTRIAGE_BWRAP at it"


class SandboxUnavailable(Exception):
    """bubblewrap is missing or cannot sandbox here; the message says why and how to fix it."""


@dataclass(frozen=True)
class SandboxSpec:
    program: str  # file name of a harness program in harness_dir, e.g. "capture.py"
    repo_dir: Path  # the tree to analyse: read-only at /repo, the working directory
    job: dict[str, Any]  # written to /job/job.json, with "repo" set to where the tree is
    limits: Limits
    allow_unsandboxed: bool = False
    harness_dir: Path | None = None  # default: app/sandbox/harness
    interpreter: Interpreter | None = None  # the analysis environment; default: the standard library alone
    seccomp: bool = True  # the sandbox's seccomp filter (app/sandbox/seccomp.py); off only to measure it


@dataclass
class SandboxRun:
    messages: list[dict[str, Any]]  # every JSON object the program printed, one a line, in order
    returncode: int | None
    ended: str | None  # why it ended abnormally ("timed out after 900 s", ...), None if it ended well
    stderr_tail: str
    sandboxed: bool


@dataclass(frozen=True)
class _Workspace:
    """A fresh 0700 temp dir: the job dir (bound at /job) and an empty file used to hide files."""

    root: Path

    @property
    def job_dir(self) -> Path:
        return self.root / "job"

    @property
    def job_file(self) -> Path:
        return self.job_dir / "job.json"

    @property
    def empty_dir(self) -> Path:
        return self.root / "empty"


_problems: dict[tuple[str, int], str | None] = {}
_problems_lock = threading.Lock()


def sandbox_problem() -> str | None:
    """None when bubblewrap works here, else a one-line reason (probed once per binary)."""
    wanted, binary = find_bwrap()
    if binary is None:
        where = f"{BWRAP_ENV}={wanted}" if os.environ.get(BWRAP_ENV) else "bwrap on PATH"
        return f"bubblewrap not found ({where}): {INSTALL_HINT}"
    with _problems_lock:
        key = (binary, os.geteuid())
        if key not in _problems:
            _problems[key] = _probe(binary)
        return _problems[key]


def run_harness(spec: SandboxSpec, *, on_message: Callable[[dict[str, Any]], None] | None = None
                ) -> SandboxRun:
    """Run `spec.program` on `spec.repo_dir` in the sandbox; `on_message` sees each message as it arrives.

    Raises SandboxUnavailable when bubblewrap does not work here, unless `spec.allow_unsandboxed`.
    """
    harness_dir = (spec.harness_dir or HARNESS_DIR).resolve()
    if Path(spec.program).name != spec.program or not (harness_dir / spec.program).is_file():
        raise ValueError(f"no harness program {spec.program!r} in {harness_dir}")
    problem = sandbox_problem()
    if problem is not None and not spec.allow_unsandboxed:
        raise SandboxUnavailable(problem)
    repo_dir = spec.repo_dir.resolve()
    if problem is not None:
        return _run_unsandboxed(spec, repo_dir, harness_dir, on_message)
    if caller_is_root():
        _require_readable_by_others(repo_dir, harness_dir)
    _, binary = find_bwrap()
    assert binary is not None
    interpreter = spec.interpreter or bare_interpreter()
    with _workspace({**spec.job, "repo": REPO}) as workspace:
        command = [interpreter.python, "-B", "-s", f"{HARNESS}/{spec.program}", f"{JOB}/job.json"]
        return _run_sandboxed(binary, workspace, repo_dir=repo_dir, harness_dir=harness_dir,
                              limits=spec.limits, command=command, on_message=on_message,
                              interpreter=interpreter, seccomp=spec.seccomp)


def _run_sandboxed(binary: str, workspace: _Workspace, *, repo_dir: Path, harness_dir: Path,
                   limits: Limits, command: list[str],
                   on_message: Callable[[dict[str, Any]], None] | None,
                   interpreter: Interpreter, seccomp: bool = True) -> SandboxRun:
    view = build_view(repo_dir=repo_dir, harness_dir=harness_dir, job_dir=workspace.job_dir,
                      empty_dir=workspace.empty_dir, interpreter=interpreter)
    info_read, info_write = os.pipe()
    init = SandboxInit(info_read)
    filter_read = _seccomp_fd() if seccomp else None
    with ExitStack() as stack:
        try:
            prefix: list[str] = []
            if caller_is_root():
                view, mounts = stage_view(view, stack.enter_context(staging_dir()))
                prefix = launch_prefix(mounts, tools=find_tools(), uid=stack.enter_context(sandbox_uid()))
            # the reaper first: it stays the parent of whatever bubblewrap leaves (see app/sandbox/reap.py)
            argv = [sys.executable, "-I", "-S", "-B", str(REAPER), *prefix,
                    *sandbox_argv(binary, view, limits, info_fd=info_write, command=command,
                                  seccomp_fd=filter_read)]
            cgroup = stack.enter_context(memory_cgroup())
            passed = (info_write,) if filter_read is None else (info_write, filter_read)
            process = _start(argv, limits, env=LAUNCH_ENV, pass_fds=passed, cgroup=cgroup)
        except BaseException:
            init.close()
            raise
        finally:
            os.close(info_write)
            if filter_read is not None:
                os.close(filter_read)
        watch = supervise(process, limits, on_message=on_message, init=init, guard=_guard(cgroup))
        return _result(watch, sandboxed=True)


def _seccomp_fd() -> int | None:
    try:
        return filter_fd()
    except UnsupportedMachine as exc:  # the namespaces, rlimits and dropped capabilities still hold
        log.warning("sandbox without its seccomp filter: %s", exc)
        return None


def _run_unsandboxed(spec: SandboxSpec, repo_dir: Path, harness_dir: Path,
                     on_message: Callable[[dict[str, Any]], None] | None) -> SandboxRun:
    # No mount namespace here: only a virtual environment's own isolation keeps what is installed beside
    # prtriage out (the bare interpreter's site-packages stay visible: docs/sandbox.md).
    interpreter = spec.interpreter or bare_interpreter()
    with _workspace({**spec.job, "repo": str(repo_dir)}) as workspace, memory_cgroup() as cgroup:
        command = [interpreter.python, "-B", "-s", str(harness_dir / spec.program), str(workspace.job_file)]
        process = _start(command, spec.limits, env=SANDBOX_ENV, cwd=repo_dir, cgroup=cgroup)
        watch = supervise(process, spec.limits, on_message=on_message, init=None, guard=_guard(cgroup))
        return _result(watch, sandboxed=False)


def _start(argv: list[str], limits: Limits, *, env: dict[str, str], cgroup: MemoryCgroup | None,
           cwd: Path | None = None, pass_fds: Sequence[int] = ()) -> subprocess.Popen[bytes]:
    # A session of its own: the whole process group can be killed without touching the caller.
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd, pass_fds=pass_fds,
                            preexec_fn=_preexec(limits, cgroup), start_new_session=True)


def _preexec(limits: Limits, cgroup: MemoryCgroup | None) -> Callable[[], None]:
    """In the child before it execs: its rlimits, and into the sandbox's memory cgroup (all it starts
    stays there)."""
    set_rlimits = rlimit_setter(limits)

    def prepare() -> None:
        set_rlimits()
        if cgroup is not None:
            cgroup.join()

    return prepare


def _guard(cgroup: MemoryCgroup | None) -> Callable[[], str | None] | None:
    return cgroup.stopped_reason if cgroup is not None else None


def _result(watch: Watch, *, sandboxed: bool) -> SandboxRun:
    ended = watch.stopped
    if ended is None and watch.returncode is not None:
        ended = describe_status(watch.returncode, via_bwrap=sandboxed)
    return SandboxRun(messages=watch.messages, returncode=watch.returncode, ended=ended,
                      stderr_tail=watch.stderr_tail, sandboxed=sandboxed)


@contextmanager
def _workspace(job: dict[str, Any]) -> Iterator[_Workspace]:
    workspace = _Workspace(Path(tempfile.mkdtemp(prefix="prtriage-sandbox-")))
    try:
        # 0700 outside; inside, the job must be readable by the sandbox's uid whatever the umask
        workspace.job_dir.mkdir()
        workspace.job_dir.chmod(0o755)
        workspace.job_file.write_text(json.dumps(job), encoding="utf-8")
        workspace.empty_dir.mkdir()
        workspace.empty_dir.chmod(0o755)
        workspace.job_file.chmod(0o644)
        yield workspace
    finally:
        shutil.rmtree(workspace.root, ignore_errors=True)


def _require_readable_by_others(*directories: Path) -> None:
    for directory in directories:
        if directory.stat().st_mode & 0o005 != 0o005:
            raise PermissionError(
                f"{directory} is not readable by other users (mode {directory.stat().st_mode & 0o777:o}): "
                "prtriage runs as root, so the sandbox runs as an unprivileged uid that must read it "
                f"(chmod o+rx {directory})")


def _probe(binary: str) -> str | None:
    if not sys.executable:
        return "the Python interpreter's path is unknown (sys.executable is empty)"
    missing = [tool for tool in TOOLS if tool not in find_tools()] if caller_is_root() else []
    if missing:
        return (f"{', '.join(missing)} (util-linux) needed: as root, prtriage runs the sandbox as an "
                "unprivileged uid (Debian/Ubuntu: apt-get install util-linux mount)")
    with _workspace({}) as workspace:
        repo = workspace.root / "repo"
        repo.mkdir()
        repo.chmod(0o755)
        try:
            run = _run_sandboxed(binary, workspace, repo_dir=repo, harness_dir=HARNESS_DIR,
                                 limits=PROBE_LIMITS, command=[sys.executable, "-B", "-s", "-c", "pass"],
                                 on_message=None, interpreter=_running_interpreter())
        except (OSError, ValueError, subprocess.SubprocessError) as error:
            return f"bubblewrap ({binary}) cannot be started: {error}"
    if run.ended is None:
        return None
    detail = next((line for line in reversed(run.stderr_tail.splitlines()) if line.strip()), "")
    return (f"bubblewrap ({binary}) is installed but cannot run a sandbox here ({run.ended}"
            f"{': ' + detail.strip() if detail else ''}); unprivileged user namespaces may be disabled "
            "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)")


def _running_interpreter() -> Interpreter:
    """The interpreter prtriage runs on, whole: the probe only starts it."""
    prefixes = (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix)
    return Interpreter(python=sys.executable, binds=tuple(dict.fromkeys(prefixes)), hidden=(), digest="",
                       version="")
