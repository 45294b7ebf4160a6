"""Test-only: loads a seccomp profile in Docker's format as Docker loads it for a container without any
capability (compose's `cap_drop: [ALL]`) on this machine's architecture, then runs the rest of its command
line under it. Run by an interpreter that has libseccomp's bindings (Debian: python3-seccomp):

    /usr/bin/python3 docker_seccomp.py PROFILE.json COMMAND...
"""

import contextlib
import errno
import json
import os
import platform
import sys

import seccomp  # type: ignore[import-not-found]

DOCKER_ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}
OPERATORS = {"SCMP_CMP_EQ": seccomp.EQ, "SCMP_CMP_NE": seccomp.NE, "SCMP_CMP_LT": seccomp.LT,
             "SCMP_CMP_LE": seccomp.LE, "SCMP_CMP_GT": seccomp.GT, "SCMP_CMP_GE": seccomp.GE,
             "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ}


def action(name, errno_ret):
    if name == "SCMP_ACT_ALLOW":
        return seccomp.ALLOW
    if name == "SCMP_ACT_ERRNO":
        return seccomp.ERRNO(errno_ret or errno.EPERM)
    if name == "SCMP_ACT_KILL":
        return seccomp.KILL
    raise ValueError(f"an action this loader does not know: {name}")


def kernel_version():
    major, minor = platform.release().split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def applies(rule, arch):
    """Docker's conditions: `includes` must all hold, none of `excludes` may; the container has no caps."""
    includes, excludes = rule.get("includes") or {}, rule.get("excludes") or {}
    if includes.get("caps") or (includes.get("arches") and arch not in includes["arches"]):
        return False
    if includes.get("minKernel"):
        wanted = tuple(int(part) for part in includes["minKernel"].split(".")[:2])
        if kernel_version() < wanted:
            return False
    return not (excludes.get("arches") and arch in excludes["arches"])


def load(profile):
    arch = DOCKER_ARCHES[platform.machine()]
    chosen = seccomp.SyscallFilter(defaction=action(profile["defaultAction"], profile.get("defaultErrnoRet")))
    for rule in profile["syscalls"]:
        if not applies(rule, arch):
            continue
        conditions = [seccomp.Arg(arg["index"], OPERATORS[arg["op"]], arg["value"], arg.get("valueTwo", 0))
                      for arg in rule.get("args") or []]
        for name in rule["names"]:
            # a call this machine's libseccomp does not know is skipped, as Docker skips it
            with contextlib.suppress(RuntimeError, ValueError):
                chosen.add_rule(action(rule["action"], rule.get("errnoRet")), name, *conditions)
    chosen.load()


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        load(json.load(handle))
    os.execv(sys.argv[2], sys.argv[2:])
