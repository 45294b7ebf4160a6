"""Started by the runner in front of bubblewrap: runs it, reaps whatever it leaves, exits with its status.

bubblewrap's outer process exits as soon as the sandboxed command does, without reaping the sandbox's
init (pid 1 of the namespace); that init is reparented to the nearest subreaper, else to the host's
PID 1, which in containers and VMs may never reap it. A zombie counts against its uid's process limit,
so every later sandbox would eventually fail to fork. As a subreaper this process inherits the orphan and
reaps it; it exits only when it has no child left.

Standard library only, run as `python -I -S reap.py COMMAND...` (no site, no environment).
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
EXEC_FAILED = 127


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def _exit_code(status: int) -> int:
    # as a shell reports a child killed by a signal: the runner reads 128 + N as "killed by signal N"
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def main(argv: list[str]) -> int:
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the runner died: so does this, then bubblewrap
    if os.getppid() != parent:
        return EXEC_FAILED
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    # The interpreter's locale coercion (PEP 538) exported LC_CTYPE; the launch environment has none, and
    # bubblewrap's own environment is readable inside (/proc/1/environ).
    os.environ.pop("LC_CTYPE", None)
    child = os.fork()
    if child == 0:
        try:
            os.execv(argv[0], argv)
        except OSError as error:
            os.write(2, f"cannot run {argv[0]}: {error}\n".encode())
        finally:
            os._exit(EXEC_FAILED)
    code = EXEC_FAILED
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return code
        except InterruptedError:
            continue
        if pid == child:
            code = _exit_code(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
