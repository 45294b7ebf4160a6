"""Test-only harness program: does what the job's "action" names and reports what it saw, as JSON lines.

Runs inside the sandbox (or unsandboxed in fallback tests): standard library only.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

MIB = 1024 * 1024
ACTIONS: dict[str, Callable[[dict[str, Any]], None]] = {}


def send(message: dict[str, Any]) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def action(function: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    ACTIONS[function.__name__] = function
    return function


def failure(error: OSError) -> str:
    return errno.errorcode.get(error.errno or 0, str(error))


def attempt(operation: Callable[[], object]) -> str:
    try:
        operation()
    except OSError as error:
        return failure(error)
    return "ok"


def read_text(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError as error:
        return "error: " + failure(error)


def write_file(path: str) -> None:
    with open(path, "w") as handle:
        handle.write("written from the sandbox")


@action
def echo(job: dict[str, Any]) -> None:
    print("a line that is not JSON", flush=True)
    send({"type": "echo", "job": job, "cwd": os.getcwd(), "argv": sys.argv})
    print("[1, 2, 3]", flush=True)  # JSON, but not a message


@action
def stream(job: dict[str, Any]) -> None:
    send({"type": "first"})
    time.sleep(job["pause"])
    send({"type": "second"})


@action
def exit_with(job: dict[str, Any]) -> None:
    print("about to exit", file=sys.stderr, flush=True)
    sys.exit(job["status"])


@action
def inspect(job: dict[str, Any]) -> None:
    environ_files = {f"/proc/{pid}/environ": read_text(f"/proc/{pid}/environ")
                     for pid in os.listdir("/proc") if pid.isdigit()}
    environ_files["/proc/self/environ"] = read_text("/proc/self/environ")
    send({"type": "inspect", "uid": os.getresuid(), "gid": os.getresgid(), "environ": dict(os.environ),
          "environ_files": environ_files, "job_text": read_text(sys.argv[1]),
          "repo_listing": sorted(os.listdir("/repo")), "repo_file": read_text("/repo/README.md"),
          "repo_write": attempt(lambda: write_file("/repo/new.txt")),
          "root_write": attempt(lambda: write_file("/new.txt")),
          "dev_write": attempt(lambda: write_file("/dev/new.txt")),
          "devnull_write": attempt(lambda: write_file("/dev/null")),
          "exists": {path: os.path.exists(path) for path in job["paths"]},
          "home_listing": sorted(os.listdir(job["home"])) if os.path.isdir(job["home"]) else None,
          "imports": imports()})


def imports() -> dict[str, str]:
    """Which modules import: the standard library's (C extensions too) and what sits beside prtriage."""
    found = {}
    for name in ("json", "sqlite3", "ssl", "jinja2", "numpy", "pydantic", "pytest", "yaml"):
        try:
            __import__(name)
        except ImportError as error:
            found[name] = type(error).__name__
        else:
            found[name] = "ok"
    return found


@action
def fill_tmp(job: dict[str, Any]) -> None:
    written, chunk, outcome = 0, b"\0" * MIB, "ok"
    try:
        for index in range(1000):
            with open(f"/tmp/fill-{index}", "wb") as handle:
                for _ in range(job["file_mib"]):
                    handle.write(chunk)
                    handle.flush()
                    written += len(chunk)
    except OSError as error:
        outcome = failure(error)
    send({"type": "filled", "written": written, "outcome": outcome})


@action
def limits(job: dict[str, Any]) -> None:
    names = ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_CORE")
    send({"type": "limits", "cwd": os.getcwd(), "environ": dict(os.environ), "job": job,
          "rlimits": {name: resource.getrlimit(getattr(resource, name))[0] for name in names}})


@action
def network(job: dict[str, Any]) -> None:
    interfaces = sorted(name for _, name in socket.if_nameindex())
    connect = attempt(lambda: socket.create_connection(("127.0.0.1", job["port"]), timeout=2).close())
    # Resolve a name only where no interface but loopback exists: a failed sandbox must not send a
    # DNS query anywhere.
    resolve = "not tried"
    if interfaces == ["lo"]:
        try:
            socket.getaddrinfo("example.com", 443)
            resolve = "resolved"
        except OSError as error:
            resolve = type(error).__name__
    send({"type": "network", "interfaces": interfaces, "connect": connect, "resolve": resolve,
          "resolv_conf": os.path.exists("/etc/resolv.conf")})


@action
def read_init_environ(job: dict[str, Any]) -> None:
    send({"type": "init", "environ": read_text("/proc/1/environ")})


@action
def fork_bomb(job: dict[str, Any]) -> None:
    origin, start, reported = os.getpid(), time.monotonic(), False
    while True:
        try:
            os.fork()  # parent and child both go on forking
        except OSError:
            time.sleep(0.05)
        if os.getpid() == origin and not reported and time.monotonic() - start > job["report_after"]:
            processes = sum(1 for entry in os.listdir("/proc") if entry.isdigit())
            send({"type": "processes", "count": processes})
            reported = True


@action
def memory_bomb(job: dict[str, Any]) -> None:
    blocks = []
    try:
        while True:
            blocks.append(bytearray(16 * MIB))
    except MemoryError:
        size = len(blocks) * 16
        blocks.clear()
        send({"type": "memory", "error": "MemoryError", "allocated_mib": size})


@action
def memory_hogs(job: dict[str, Any]) -> None:
    """Several children, each within the per-process limit, that together want more than the sandbox."""
    children = []
    for _ in range(job["children"]):
        pid = os.fork()
        if pid == 0:
            hog = b"\1" * (job["mib"] * MIB)  # written, so every page is really taken
            time.sleep(job["hold"])
            os._exit(len(hog) and 0)
        children.append(pid)
    statuses = [os.waitpid(pid, 0)[1] for pid in children]
    send({"type": "hogs", "killed": sum(1 for status in statuses if os.WIFSIGNALED(status))})


@action
def spin(job: dict[str, Any]) -> None:
    send({"type": "spinning"})
    while True:
        pass


@action
def flood(job: dict[str, Any]) -> None:
    line = b"x" * (MIB - 1) + b"\n"
    for _ in range(job["mib"]):
        os.write(1, line)


@action
def bad_line(job: dict[str, Any]) -> None:
    """Writes what a hostile program could put on the channel: a deeply nested line, or a huge one."""
    send({"type": "before"})
    depth = job.get("depth", 0)
    value = "[" * depth + "]" * depth if depth else '"' + "x" * job["bytes"] + '"'
    line = '{"type": "suite", "value": ' + value + "}"
    os.write(1, line.encode() + b"\n")
    send({"type": "after"})


@action
def kill_parents(job: dict[str, Any]) -> None:
    results = {}
    for label, pid in (("parent", os.getppid()), ("init", 1), ("everyone", -1)):
        results[label] = attempt(lambda pid=pid: os.kill(pid, 9))
    send({"type": "killed", "results": results, "parent": os.getppid()})


@action
def big_file(job: dict[str, Any]) -> None:
    chunk, written = b"\0" * MIB, 0
    try:
        with open("/tmp/big", "wb", buffering=0) as handle:
            while written < 10_000:
                handle.write(chunk)
                written += 1
    except OSError as error:  # Python ignores SIGXFSZ: the write fails instead
        send({"type": "refused", "error": failure(error), "mib": written})


@action
def orphan(job: dict[str, Any]) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)"
    # keeps the inherited stdout and stderr open, and leaves the process group
    child = subprocess.Popen([sys.executable, "-c", code, job["marker"]], start_new_session=True)
    send({"type": "orphan", "pid": child.pid})
    while job["hang"]:
        time.sleep(0.1)
    os._exit(0)  # no wait: the grandchild is left behind


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        job = json.load(handle)
    ACTIONS[job["action"]](job)
    send({"type": "done"})


if __name__ == "__main__":
    main()
