"""Service processes started by a test (`prtriage worker`, `prtriage serve` …): each one's output in a file of
its own, all of it shown when an assertion fails, and every process still running killed at the end."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Processes:
    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, command: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """COMMAND as process NAME, from the repository's root; its output goes to NAME.log."""
        with self.log(name).open("wb") as log:  # the child keeps its copy
            process = subprocess.Popen(list(command), cwd=ROOT, env=dict(env), stdout=log,
                                       stderr=subprocess.STDOUT)
        self.started[name] = process
        return process

    def run(self, name: str, command: Sequence[str], env: Mapping[str, str], *, timeout: float) -> int | None:
        """COMMAND to its end: its exit status, None when it ran out of time (it is killed)."""
        return self.wait(self.start(name, command, env), timeout)

    def stop(self, *names: str, timeout: float) -> dict[str, int | None]:
        """SIGTERM to each of NAMES at once: their exit statuses, None for one that did not stop in time."""
        for name in names:
            self.started[name].send_signal(signal.SIGTERM)
        return {name: self.wait(self.started[name], timeout) for name in names}

    @staticmethod
    def wait(process: subprocess.Popen[bytes], timeout: float) -> int | None:
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def output(self, name: str) -> str:
        return self.log(name).read_text(errors="replace")

    def report(self) -> str:
        """Every process's output under its name and exit status, for an assertion's message."""
        return "".join(f"\n----- {name} ({_status(process)}) -----\n{self.output(name)}"
                       for name, process in self.started.items())

    def kill_all(self) -> None:
        for process in self.started.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


def _status(process: subprocess.Popen[bytes]) -> str:
    code = process.poll()
    return "running" if code is None else f"exit status {code}"
