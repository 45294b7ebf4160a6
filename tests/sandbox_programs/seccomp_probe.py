"""Test-only harness program: makes the system calls the sandbox's seccomp filter denies, with arguments
that are harmless when the call does run, and reports each one's errno; then does what ordinary validation
does (threads, fork, a subprocess, argparse). Standard library only: it runs inside the sandbox."""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import mmap
import os
import platform
import subprocess
import sys
import threading
from typing import Any

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, CLONE_FILES = 0x00020000, 0x10000000, 0x40000000, 0x00000400
SIGCHLD = 17


def send(message: dict[str, Any]) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def call(number: int, *args: int) -> str:
    """The outcome of raw system call NUMBER: "ok" or the errno's name."""
    ctypes.set_errno(0)
    result = LIBC.syscall(ctypes.c_long(number), *(ctypes.c_long(arg) for arg in args))
    if result == -1:
        code = ctypes.get_errno()
        return errno.errorcode.get(code, str(code))
    if number in (NUMBERS.get("userfaultfd"), NUMBERS.get("io_uring_setup"), NUMBERS.get("perf_event_open")):
        os.close(result)  # a descriptor it made
    return "ok"


NUMBERS: dict[str, int] = {}
# a request no kernel knows: ptrace never starts tracing; everything else gets zeros (NULL pointers, fd 0)
ARGUMENTS = {"ptrace": (0x7FFF, 0, 0, 0)}


def denied(job: dict[str, Any]) -> None:
    NUMBERS.update(job["numbers"])
    special = ("clone", "unshare", "clone3", "personality")  # their arguments decide: below
    outcomes = {name: call(number, *ARGUMENTS.get(name, (0, 0, 0, 0, 0, 0)))
                for name, number in job["numbers"].items() if name not in special}
    clone, unshare, clone3 = NUMBERS["clone"], NUMBERS["unshare"], NUMBERS["clone3"]
    # clone with namespace flags, and with an invalid combination that fails before any child exists
    # (CLONE_NEWNS with CLONE_FS is EINVAL) so that nothing is created when the filter is not there
    outcomes["clone(CLONE_NEWNET)"] = call(clone, CLONE_NEWNET | 0x00000200 | CLONE_NEWNS, 0, 0, 0, 0)
    outcomes["unshare(CLONE_NEWNS)"] = call(unshare, CLONE_NEWNS)
    outcomes["unshare(CLONE_NEWUSER)"] = call(unshare, CLONE_NEWUSER)
    outcomes["unshare(CLONE_FILES)"] = call(unshare, CLONE_FILES)  # no namespace: allowed
    outcomes["clone3"] = call(clone3, 0, 0)
    personality = NUMBERS["personality"]
    outcomes["personality(query)"] = call(personality, 0xFFFFFFFF)
    outcomes["personality(ADDR_NO_RANDOMIZE)"] = call(personality, 0x0040000)
    outcomes["personality(PER_LINUX)"] = call(personality, 0)  # back to the plain one when it was allowed
    send({"type": "denied", "outcomes": outcomes})


I386_GETPID = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20; int 0x80; ret


def other_architecture(job: dict[str, Any]) -> None:
    """A child makes i386's getpid through `int 0x80` (x86_64 only): its exit status tells what happened."""
    code = ("import ctypes, mmap\n"
            f"page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
            f"page.write({I386_GETPID!r})\n"
            "address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
            "print(ctypes.CFUNCTYPE(ctypes.c_int)(address)())\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    x32 = subprocess.run([sys.executable, "-c", "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                          "print(libc.syscall(0x40000000 | 39))"], capture_output=True, check=False)
    send({"type": "architecture", "machine": platform.machine(), "int80": child.returncode,
          "x32": x32.returncode})


def ordinary(job: dict[str, Any]) -> None:
    """What validation does: parse arguments, start threads, fork, run a subprocess, map memory."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--colocate", action="store_true")
    parsed = parser.parse_args(["--colocate"])
    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(1))
    thread.start()
    thread.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    child = subprocess.run([sys.executable, "-c", "print('child')"], capture_output=True, text=True,
                           check=False)
    with mmap.mmap(-1, 1 << 20) as region:
        region[:5] = b"hello"
        mapped = bytes(region[:5]).decode()
    send({"type": "ordinary", "colocate": parsed.colocate, "thread": results, "fork": os.WEXITSTATUS(status),
          "subprocess": child.stdout.strip(), "mmap": mapped})


ACTIONS = {"denied": denied, "other_architecture": other_architecture, "ordinary": ordinary}

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        job = json.load(handle)
    ACTIONS[job["action"]](job)
    send({"type": "done"})
