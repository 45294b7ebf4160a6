"""The recording bash: the PATH directory it runs with, running one shell string in it, reading its records.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
Every intercepted process start becomes one shell string run by a real bash with recbash.sh as its prelude
(BASH_ENV), so that CI's quoting, arrays and arithmetic are expanded exactly as on the CI host.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from typing import Any

# Text tools only: real output for the $(...) and pipes that build a command line, and nothing that could
# start, stop or download anything.
TEXT_TOOLS = ("cat", "sed", "awk", "grep", "head", "tail", "tr", "cut", "dirname", "basename", "realpath",
              "readlink", "seq", "expr", "wc", "sort", "uniq", "date", "env", "mktemp", "tee")
PRELUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recbash.sh")
MAX_OUTPUT_BYTES = 1 << 20
_LAUNCHER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
# Variables the recording machinery itself puts into the environment: never part of a launch.
_OWN_VARIABLES = frozenset({"BASH_ENV", "SHLVL", "PWD", "OLDPWD", "_"})

_RealPopen = subprocess.Popen
# Bound before vclock makes time.sleep virtual: Popen.wait(timeout=...) polls with time.sleep, which under the
# virtual clock returns at once and advances it, so a slow real bash spun the CPU and ended its script as
# "waits forever" after a few loaded seconds.
_real_sleep, _real_monotonic = time.sleep, time.monotonic
SHELL_POLL_SECONDS = 0.01


class ShellSettings:
    """Where the recording bash lives and records, fixed once per captured script."""

    def __init__(self, tools: str, records: str, launchers: list[str], seconds: float) -> None:
        self.tools, self.records, self.launchers, self.seconds = tools, records, launchers, seconds
        self.bash = os.path.join(tools, "bash")
        # What went wrong in shell strings (stopped at the time limit, failed with an error): a launch
        # may be missing because of it, so the script's report must say so.
        self.problems: list[str] = []
        self.status = 0  # the exit status of the last shell string


def prepare_tools(launchers: list[str], search_path: str | None = None) -> str:
    """A new directory under /tmp with the allowed tools, bash, sh and one recording shim per launcher."""
    tools = tempfile.mkdtemp(prefix="prtriage-tools-", dir="/tmp")
    search = search_path if search_path is not None else os.environ.get("PATH", "/usr/bin:/bin")
    bash = shutil.which("bash", path=search) or "/bin/bash"
    os.symlink(bash, os.path.join(tools, "bash"))
    for tool in TEXT_TOOLS:
        found = shutil.which(tool, path=search)
        if found:
            os.symlink(found, os.path.join(tools, tool))
    # `sh` must read BASH_ENV too (bash invoked as sh would not): a script that runs bash under its own name.
    _write_script(os.path.join(tools, "sh"), f'#!{bash}\nexec {bash} "$@"\n')
    for launcher in launchers:
        if _LAUNCHER_NAME.fullmatch(launcher):
            _write_script(os.path.join(tools, launcher),
                          f'#!{bash}\ntype -t __prtriage_record >/dev/null || source {PRELUDE}\n'
                          '__prtriage_record "${0##*/}" "$@"\n')
    return tools


def _write_script(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, 0o755)


def run_shell(settings: ShellSettings, command: str, env: Mapping[Any, Any] | None, cwd: Any) -> bytes:
    """Run `command` in the recording bash as the caller would have; return what it printed on stdout."""
    environment = _shell_environment(settings, env)
    workdir = os.fsdecode(cwd) if cwd is not None else None
    if workdir is not None and not _is_real_directory(workdir):
        # A CI host directory: bash runs here, the launches it records say where CI would have run them.
        environment["PRTRIAGE_CWD"] = os.path.abspath(workdir)
        workdir = None
    with tempfile.TemporaryFile(dir=settings.records) as output, \
            tempfile.TemporaryFile(dir=settings.records) as errors:
        # Own session: what bash leaves behind (a `tail -f &`) can be killed without killing ourselves.
        shell = _RealPopen([settings.bash, "--noprofile", "--norc", "-c", command], stdin=subprocess.DEVNULL,
                           stdout=output, stderr=errors, env=environment, cwd=workdir, start_new_session=True)
        try:
            if not _wait_real_time(shell, settings.seconds):
                settings.problems.append(f"a shell command ran over {settings.seconds:g}s and was stopped")
        finally:
            _kill_session(shell)
        settings.status = shell.returncode
        if shell.returncode != -signal.SIGKILL:
            _note_errors(settings, shell.returncode, errors)
        _note_nested_failures(settings)
        output.seek(0)
        return output.read(MAX_OUTPUT_BYTES)


def _wait_real_time(shell: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait up to `seconds` of real time for the shell, whatever the script did to the clock; False: over."""
    deadline = _real_monotonic() + seconds
    while shell.poll() is None:
        remaining = deadline - _real_monotonic()
        if remaining <= 0:
            return False
        _real_sleep(min(SHELL_POLL_SECONDS, remaining))
    return True


def _note_errors(settings: ShellSettings, status: int, errors: Any) -> None:
    """Errors that may have cost a launch: bash's own (a redirection it could not open skips the command,
    whatever the exit status), or the message of a shell string that failed."""
    errors.seek(0)
    text = errors.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
    # `set -x` traces (`+ wait`, PS4's `+`) are no error: the message is the last line a command printed
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("+")]
    own = [line for line in lines if line.startswith(settings.bash + ":")]
    if own:
        settings.problems.append(f"bash: {own[0][len(settings.bash) + 1:].strip()[:300]}")
    elif status != 0 and lines:
        settings.problems.append(f"a shell command failed with status {status}: {lines[-1][:300]}")


def _note_nested_failures(settings: ShellSettings) -> None:
    """The nested CI scripts that failed (recbash.sh lets their callers go on, as on CI): a launch they did
    not reach may be missing, so the script's report says so."""
    path = os.path.join(settings.records, "nested-failures")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            failures = [line.strip() for line in handle.read(MAX_OUTPUT_BYTES).splitlines() if line.strip()]
        os.remove(path)
    except OSError:
        return
    settings.problems.extend(f"a nested script failed: {failure[:300]}" for failure in failures)


def _is_real_directory(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _kill_session(shell: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(shell.pid, signal.SIGKILL)
    shell.wait()


def _shell_environment(settings: ShellSettings, env: Mapping[Any, Any] | None) -> dict[str, str]:
    source = os.environ if env is None else env
    environment = {os.fsdecode(k): os.fsdecode(v) for k, v in source.items()}
    environment.update({
        "PRTRIAGE_RECORDS": settings.records,
        "PRTRIAGE_TOOLS": settings.tools,
        "PRTRIAGE_LAUNCHERS": " ".join(n for n in settings.launchers if _LAUNCHER_NAME.fullmatch(n)),
        "PRTRIAGE_PATH": environment.get("PATH", ""),
        "BASH_ENV": PRELUDE,
    })
    return environment


def read_launches(records: str) -> list[dict[str, Any]]:
    """The complete launch records in `records`, in the order bash made them."""
    names = sorted(n for n in os.listdir(records) if n.startswith("launch-") and n.endswith(".argv"))
    launches = []
    for name in names:
        stem = os.path.join(records, name[: -len(".argv")])
        argv = _read_zero_separated(stem + ".argv")
        if not argv:
            continue
        launches.append({"argv": argv, "env": _launch_environment(_read_zero_separated(stem + ".env")),
                         "cwd": _read_text(stem + ".cwd")})
    return launches


def _launch_environment(entries: list[str]) -> dict[str, str]:
    pairs = dict(entry.split("=", 1) for entry in entries if "=" in entry)
    tools = pairs.pop("PRTRIAGE_TOOLS", "")
    caller_path = pairs.get("PRTRIAGE_PATH", "")
    environment = {k: v for k, v in pairs.items()
                   if k not in _OWN_VARIABLES and not k.startswith(("PRTRIAGE_", "BASH_FUNC_"))}
    if tools and "PATH" in environment:
        # The launch sees the PATH the caller had, plus whatever the script itself added to it.
        parts = [caller_path if part == tools else part for part in environment["PATH"].split(":")]
        environment["PATH"] = ":".join(p for p in parts if p)
    return environment


def _read_zero_separated(path: str) -> list[str]:
    text = _read_text(path)
    return text.split("\0")[:-1] if text else []


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "surrogateescape")
    except OSError:
        return ""
