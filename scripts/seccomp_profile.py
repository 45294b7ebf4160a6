"""Writes deploy/seccomp.json: Docker's default seccomp profile plus exactly the system calls bubblewrap
makes to build the sandbox, for the compose services that run it (`security_opt: seccomp=…`).

The base is deploy/docker-default-seccomp.json, unchanged (where it comes from: deploy/NOTICE). bubblewrap
0.8, as the runner starts it (`--unshare-all --unshare-user --disable-userns`, not setuid, in a container
without capabilities), needs beyond that base:

- `clone` with namespace flags: its child is made in new user, mount, pid, net, ipc, uts and cgroup
  namespaces at once (the base allows `clone` only without them, unless the container has CAP_SYS_ADMIN);
- `unshare`: the nested user namespace that maps the sandbox's uid 65534 (and `--disable-userns`);
- `mount` and `umount2`: the new root's tmpfs, binds, `/proc`, `/dev`, remounts read-only, the old root
  detached;
- `pivot_root`: into the new root.

Each is needed: without any one of them bubblewrap fails (`tests/test_seccomp_profile.py` takes each
away in turn). Not added: `setns` (bubblewrap joins namespaces only with `--userns`, `--userns2` or `--pidns`,
which the runner never passes), `chroot` (bubblewrap 0.8 does not call it), `clone3` (bubblewrap calls
`clone`; the base's ENOSYS for `clone3` makes glibc fall back to `clone`), `sethostname` (no `--hostname`),
`keyctl` and the rest.

    .venv/bin/python scripts/seccomp_profile.py          # writes deploy/seccomp.json
    .venv/bin/python scripts/seccomp_profile.py --check  # exit 1 when deploy/seccomp.json differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "deploy" / "docker-default-seccomp.json"
PROFILE = ROOT / "deploy" / "seccomp.json"
BUBBLEWRAP = ["clone", "mount", "pivot_root", "umount2", "unshare"]
RULE: dict[str, Any] = {
    "names": BUBBLEWRAP,
    "action": "SCMP_ACT_ALLOW",
    "args": [],
    "comment": "bubblewrap 0.8 builds prtriage's sandbox: clone and unshare with namespace flags, the new "
               "root's mounts, pivot_root into it (scripts/seccomp_profile.py)",
    "includes": {},
    "excludes": {},
}


def profile(base: dict[str, Any]) -> dict[str, Any]:
    """BASE with the rule that lets bubblewrap build the sandbox appended; nothing of BASE changed."""
    return {**base, "syscalls": [*base["syscalls"], RULE]}


def render(base_path: Path = BASE) -> str:
    return json.dumps(profile(json.loads(base_path.read_text())), indent="\t") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    options = parser.parse_args(argv)
    text = render()
    if options.check:
        if PROFILE.read_text() != text:
            print(f"{PROFILE.relative_to(ROOT)} is not what scripts/seccomp_profile.py writes: run it",
                  file=sys.stderr)
            return 1
        return 0
    PROFILE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
