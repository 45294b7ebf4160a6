"""Process interception for capture: every way Python starts a process runs it in the recording bash instead.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
subprocess.Popen (hence run/call/check_*), os.system, os.popen, os.exec*, os.spawn*, os.posix_spawn* and
asyncio.create_subprocess_* each become one shell string for intercept_shell.run_shell. The caller gets what
a healthy GPU host would give it: exit status 0, a server process that stays alive until it is waited for,
and the shell's real stdout (empty unless the string ran an allowed text tool).
"""

from __future__ import annotations

import asyncio
import inspect
import io
import itertools
import os
import shlex
import signal
import subprocess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import intercept_shell
else:
    import intercept_shell

_settings: intercept_shell.ShellSettings | None = None
_fake_pids = itertools.count(4_000_000)  # above any real pid (pid_max is at most 4194304)
_alive: dict[int, bool] = {}
_real_kill, _real_killpg, _real_getpgid, _real_waitpid = os.kill, os.killpg, os.getpgid, os.waitpid
_popen_signature = inspect.signature(subprocess.Popen.__init__)


def install(settings: intercept_shell.ShellSettings) -> None:
    """Route every process start of this process through the recording bash described by `settings`."""
    global _settings
    _settings = settings
    subprocess.Popen = LivePopen  # type: ignore[misc]
    replacements: dict[str, Any] = {
        "system": _system, "popen": _popen, "kill": _kill, "killpg": _killpg, "getpgid": _getpgid,
        "waitpid": _waitpid, "posix_spawn": _posix_spawn, "posix_spawnp": _posix_spawn,
    }
    for name in ("execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe"):
        replacements[name] = _exec_function(name)
    for name in ("spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe"):
        replacements[name] = _spawn_function(name)
    for name, fake in replacements.items():
        if hasattr(os, name):
            setattr(os, name, fake)
    for owner in (asyncio, asyncio.subprocess):
        owner.create_subprocess_exec = _create_subprocess_exec  # type: ignore[attr-defined]
        owner.create_subprocess_shell = _create_subprocess_shell  # type: ignore[attr-defined]


def shell_string(args: Any, shell: bool = False) -> str:
    """The one shell string that starts what `args` names, as subprocess would have run it."""
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
        return text if shell else shlex.quote(text)
    words = [os.fsdecode(a) for a in args]
    if shell:
        return words[0] if words else ""
    return shlex.join(words)


def _run(command: str, env: Any = None, cwd: Any = None) -> bytes:
    if _settings is None:
        raise RuntimeError("intercept.install was not called")
    return intercept_shell.run_shell(_settings, command, env, cwd)


def _new_pid() -> int:
    pid = next(_fake_pids)
    _alive[pid] = True
    return pid


class LivePopen(subprocess.Popen):
    """A Popen whose command ran in the recording bash and which looks like a healthy running process."""

    def __init__(self, args: Any, *positional: Any, **options: Any) -> None:
        bound = _popen_signature.bind(self, args, *positional, **options)
        bound.apply_defaults()
        given = bound.arguments
        self.args = args
        self.text_mode = bool(given["text"] or given["universal_newlines"] or given["encoding"]
                              or given["errors"])
        self._encoding = given["encoding"] or "utf-8"
        self._child_created = False
        self._sigint_wait_secs = 0
        self.returncode: Any = None
        output = _run(shell_string(args, bool(given["shell"])), given["env"], given["cwd"])
        self._stdout_data = output if given["stdout"] == subprocess.PIPE else None
        self._stderr_data = b"" if given["stderr"] == subprocess.PIPE else None
        self.stdin = self._stream(b"") if given["stdin"] == subprocess.PIPE else None
        self.stdout = self._stream(output) if self._stdout_data is not None else None
        self.stderr = self._stream(b"") if self._stderr_data is not None else None
        self.pid = _new_pid()

    def _stream(self, data: bytes) -> Any:
        raw = io.BytesIO(data)
        return io.TextIOWrapper(raw, encoding=self._encoding) if self.text_mode else raw

    def _decoded(self, data: bytes | None) -> Any:
        return data.decode(self._encoding, "replace") if data is not None and self.text_mode else data

    def poll(self) -> int | None:
        if not _alive.get(self.pid, False) and self.returncode is None:
            self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = 0
            _alive[self.pid] = False
        return int(self.returncode)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        self.wait()
        return self._decoded(self._stdout_data), self._decoded(self._stderr_data)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self.returncode = -int(sig)
            _alive[self.pid] = False

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __exit__(self, *exc_info: Any) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()

    def __del__(self) -> None:
        return


def _system(command: Any) -> int:
    _run(os.fsdecode(command))
    return 0


def _popen(command: Any, mode: str = "r", buffering: int = -1) -> io.StringIO:
    # StringIO.close() returns None, which is how os.popen's close() reports exit status 0.
    output = _run(os.fsdecode(command))
    return io.StringIO(output.decode("utf-8", "replace") if "r" in mode else "")


def _exec_function(name: str) -> Any:
    with_env = name.endswith("e")
    listed = name.startswith("execl")

    def fake_exec(path: Any, *rest: Any) -> None:
        env = rest[-1] if with_env else None
        words = rest[:-1] if with_env else rest
        args = list(words) if listed else list(words[0])
        _run(shell_string([path, *args[1:]]), env)
        raise SystemExit(0)  # the process image is gone: the script ends here, as it would under exec

    fake_exec.__name__ = name
    return fake_exec


def _spawn_function(name: str) -> Any:
    with_env = name.endswith("e")
    listed = name.startswith("spawnl")

    def fake_spawn(mode: int, path: Any, *rest: Any) -> int:
        env = rest[-1] if with_env else None
        words = rest[:-1] if with_env else rest
        args = list(words) if listed else list(words[0])
        _run(shell_string([path, *args[1:]]), env)
        return 0 if mode == os.P_WAIT else _new_pid()

    fake_spawn.__name__ = name
    return fake_spawn


def _posix_spawn(path: Any, argv: Any, env: Any, **options: Any) -> int:
    _run(shell_string([path, *list(argv)[1:]]), env)
    return _new_pid()


def _kill(pid: int, sig: int) -> None:
    if pid in _alive:
        if sig != 0 and _alive[pid]:
            _alive[pid] = False
        return
    _real_kill(pid, sig)


def _killpg(pgid: int, sig: int) -> None:
    if pgid in _alive:
        _kill(pgid, sig)
        return
    _real_killpg(pgid, sig)


def _getpgid(pid: int) -> int:
    return pid if pid in _alive else _real_getpgid(pid)


def _waitpid(pid: int, options: int) -> tuple[int, int]:
    if pid in _alive:
        _alive[pid] = False
        return pid, 0
    return _real_waitpid(pid, options)


class _AsyncProcess:
    """What asyncio.create_subprocess_* returns, for a command that ran in the recording bash."""

    def __init__(self, output: bytes, stdout: Any, stderr: Any, stdin: Any) -> None:
        self.pid = _new_pid()
        self.returncode: int | None = None
        self._output = output if stdout == subprocess.PIPE else None
        self._errors = b"" if stderr == subprocess.PIPE else None
        self.stdout = self._reader(self._output)
        self.stderr = self._reader(self._errors)
        self.stdin = None if stdin != subprocess.PIPE else _NullWriter()

    @staticmethod
    def _reader(data: bytes | None) -> asyncio.StreamReader | None:
        if data is None:
            return None
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return reader

    async def wait(self) -> int:
        if self.returncode is None:
            self.returncode = 0
        return self.returncode

    async def communicate(self, input: Any = None) -> tuple[bytes | None, bytes | None]:
        await self.wait()
        return self._output, self._errors

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self.returncode = -int(sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _NullWriter:
    def write(self, data: bytes) -> None:
        return

    def close(self) -> None:
        return

    async def drain(self) -> None:
        return


async def _create_subprocess_exec(program: Any, *args: Any, stdin: Any = None, stdout: Any = None,
                                  stderr: Any = None, limit: int = 0, **options: Any) -> _AsyncProcess:
    output = _run(shell_string([program, *args]), options.get("env"), options.get("cwd"))
    return _AsyncProcess(output, stdout, stderr, stdin)


async def _create_subprocess_shell(command: Any, stdin: Any = None, stdout: Any = None, stderr: Any = None,
                                   limit: int = 0, **options: Any) -> _AsyncProcess:
    output = _run(os.fsdecode(command), options.get("env"), options.get("cwd"))
    return _AsyncProcess(output, stdout, stderr, stdin)
