"""The sandbox's own seccomp filter: a classic BPF program, written here in plain Python, that bubblewrap
installs (`--seccomp FD`) just before it starts the sandboxed program.

Validation imports a repository's code, parses arguments and builds objects; it never mounts, traces,
loads kernel code or keys, creates namespaces, or needs the kernel's rarer interfaces. Those system calls
fail with EPERM, so that code which escaped every other fence still meets none of the kernel's larger attack
surfaces; `personality` may only ask or set the plain Linux one. `clone3` fails with ENOSYS, which glibc
takes as "old kernel" and answers with `clone`, whose flags a filter can read (clone3's live in memory it
cannot). A call made under another architecture's numbering (i386's `int 0x80`, x32) kills the process: its
numbers would mean other calls.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
from dataclasses import dataclass

# seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian on both machines)
NR_OFFSET, ARCH_OFFSET, ARG0_LOW_OFFSET = 0, 4, 16

# classic BPF opcodes (linux/filter.h, linux/bpf_common.h)
LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06

# return values (linux/seccomp.h)
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

CLONE_NEWTIME = 0x00000080  # unshare and clone3 only: in clone's flags these bits are the exit signal
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
CLONE_NAMESPACES = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                    | CLONE_NEWPID | CLONE_NEWNET)
UNSHARE_NAMESPACES = CLONE_NAMESPACES | CLONE_NEWTIME
X32_SYSCALL_BIT = 0x40000000
# personality(2): asking (0xffffffff) and the plain Linux personality pass; the rest (no address space
# randomisation, READ_IMPLIES_EXEC…) only help an exploit
PERSONALITY_QUERY, PER_LINUX = 0xFFFFFFFF, 0

# What validation never needs, by name; each machine's table below gives the numbers it has.
DENIED = (
    # mounts and the file system's administration
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "swapon", "swapoff", "quotactl", "name_to_handle_at", "open_by_handle_at",
    "lookup_dcookie", "acct",
    # namespaces (clone and unshare only with namespace flags: see the program)
    "setns",
    # other processes' memory and state
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    # kernel code, keys, tracing, BPF, and interfaces with a history of exploits
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "keyctl",
    "add_key", "request_key", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register",
    # the machine's own settings
    "reboot", "syslog", "settimeofday", "clock_settime", "clock_adjtime", "sethostname", "setdomainname",
    "vhangup",
    # x86 only
    "iopl", "ioperm", "uselib",
)


@dataclass(frozen=True)
class Machine:
    """One architecture: its AUDIT_ARCH value and the system call numbers the program names."""

    name: str
    audit_arch: int
    numbers: dict[str, int]
    x32: bool = False  # system calls with X32_SYSCALL_BIT share this AUDIT_ARCH


# arch/x86/entry/syscalls/syscall_64.tbl
X86_64 = Machine("x86_64", 0xC000003E, {
    "clone": 56, "vhangup": 153, "pivot_root": 155, "uselib": 134, "ptrace": 101, "syslog": 103,
    "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "personality": 135, "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "lookup_dcookie": 212, "clock_settime": 227,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305,
    "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "clone3": 435, "mount_setattr": 442,
}, x32=True)

# include/uapi/asm-generic/unistd.h (arm64 has no iopl, ioperm or uselib)
AARCH64 = Machine("aarch64", 0xC00000B7, {
    "lookup_dcookie": 18, "umount2": 39, "mount": 40, "pivot_root": 41, "vhangup": 58, "quotactl": 60,
    "acct": 89, "personality": 92, "unshare": 97, "kexec_load": 104, "init_module": 105, "delete_module": 106,
    "clock_settime": 112, "syslog": 116, "ptrace": 117, "reboot": 142, "sethostname": 161,
    "setdomainname": 162, "settimeofday": 170, "add_key": 217, "request_key": 218, "keyctl": 219,
    "clone": 220, "swapon": 224, "swapoff": 225, "perf_event_open": 241, "name_to_handle_at": 264,
    "open_by_handle_at": 265, "clock_adjtime": 266, "setns": 268, "process_vm_readv": 270,
    "process_vm_writev": 271, "kcmp": 272, "finit_module": 273, "bpf": 280, "userfaultfd": 282,
    "kexec_file_load": 294, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "clone3": 435, "mount_setattr": 442,
})

MACHINES = {"x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


class UnsupportedMachine(RuntimeError):
    """No filter is written for this architecture."""


def host_machine() -> Machine:
    found = MACHINES.get(platform.machine().lower())
    if found is None:
        raise UnsupportedMachine(f"no seccomp filter for the {platform.machine()} architecture")
    return found


class _Program:
    """Instructions with forward jumps to labels, resolved when the program is assembled."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | int, str | int, int]] = []  # (opcode, jt, jf, k)
        self.labels: dict[str, int] = {}

    def load(self, offset: int) -> None:
        self.code.append((LD_W_ABS, 0, 0, offset))

    def jump(self, opcode: int, value: int, *, true: str | int = 0, false: str | int = 0) -> None:
        self.code.append((opcode, true, false, value))

    def ret(self, value: int) -> None:
        self.code.append((RET_K, 0, 0, value))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (opcode, true, false, k) in enumerate(self.code):
            out += struct.pack("=HBBI", opcode, self._offset(index, true), self._offset(index, false), k)
        return bytes(out)

    def _offset(self, index: int, target: str | int) -> int:
        if isinstance(target, int):
            return target  # relative already (0: the next instruction)
        offset = self.labels[target] - index - 1
        if not 0 <= offset <= 255:
            raise ValueError(f"jump to {target} out of a classic BPF jump's reach ({offset})")
        return offset


def filter_program(machine: Machine | None = None) -> bytes:
    """The filter for MACHINE (by default this one), as `struct sock_filter` records bubblewrap loads."""
    machine = machine or host_machine()
    program = _Program()
    program.load(ARCH_OFFSET)
    program.jump(JEQ_K, machine.audit_arch, false="kill")
    program.load(NR_OFFSET)
    if machine.x32:
        program.jump(JGE_K, X32_SYSCALL_BIT, true="kill")
    program.jump(JEQ_K, machine.numbers["clone"], true="clone")
    program.jump(JEQ_K, machine.numbers["unshare"], true="unshare")
    program.jump(JEQ_K, machine.numbers["clone3"], true="enosys")
    program.jump(JEQ_K, machine.numbers["personality"], true="personality")
    for name in DENIED:
        if name in machine.numbers:
            program.jump(JEQ_K, machine.numbers[name], true="eperm")
    program.ret(RET_ALLOW)
    for name, flags in (("clone", CLONE_NAMESPACES), ("unshare", UNSHARE_NAMESPACES)):
        program.label(name)
        program.load(ARG0_LOW_OFFSET)  # the flags: every namespace bit is in the low 32
        program.jump(JSET_K, flags, true="eperm", false="allow")
    program.label("personality")
    program.load(ARG0_LOW_OFFSET)
    program.jump(JEQ_K, PERSONALITY_QUERY, true="allow")
    program.jump(JEQ_K, PER_LINUX, true="allow", false="eperm")
    program.label("allow")
    program.ret(RET_ALLOW)
    program.label("eperm")
    program.ret(RET_ERRNO | errno.EPERM)
    program.label("enosys")
    program.ret(RET_ERRNO | errno.ENOSYS)
    program.label("kill")
    program.ret(RET_KILL_PROCESS)
    return program.assemble()


def filter_fd(machine: Machine | None = None) -> int:
    """A file descriptor holding the filter, read from its start (what `bwrap --seccomp FD` wants); the
    caller passes it to bubblewrap and closes it."""
    fd = os.memfd_create("prtriage-seccomp")  # close-on-exec here; the runner passes it on by pass_fds
    try:
        os.write(fd, filter_program(machine))
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
