"""deploy/seccomp.json, the compose stack's seccomp profile for the services that run the sandbox: Docker's
default profile (deploy/docker-default-seccomp.json, unchanged) plus exactly the calls bubblewrap needs.

No container engine runs here, so the profile is loaded the way Docker loads it for a container without
capabilities (tests/sandbox_programs/docker_seccomp.py, with libseccomp's Python bindings: Debian's
python3-seccomp) in front of the real bubblewrap, as an unprivileged uid: under Docker's default profile
bubblewrap cannot build the sandbox, under ours it can, without any one of the added calls it cannot, and the
runner's whole sandbox (its own filter inside) works under it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from needs import unavailable, working_sandbox

from app.analysis.core.policy import Limits
from app.sandbox.runner import SandboxSpec, run_harness, sandbox_problem

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
LOADER = ROOT / "tests" / "sandbox_programs" / "docker_seccomp.py"
PROBE = ROOT / "tests" / "sandbox_programs" / "seccomp_probe.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # where Debian's python3-seccomp is
UNPRIVILEGED = ["--reuid", "10001", "--regid", "10001", "--clear-groups", "--inh-caps=-all", "--bounding-set",
                "-all", "--no-new-privs"]  # the image's user, compose's cap_drop: [ALL], no-new-privileges

sys.path.insert(0, str(ROOT / "scripts"))
import seccomp_profile  # noqa: E402  (a script, not a package)


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DEPLOY / name).read_text())
    return loaded


def test_the_profile_is_what_the_script_writes() -> None:
    checked = subprocess.run([sys.executable, str(ROOT / "scripts" / "seccomp_profile.py"), "--check"],
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def test_the_profile_is_dockers_default_with_one_rule_added() -> None:
    base, profile = load("docker-default-seccomp.json"), load("seccomp.json")
    digest = hashlib.sha256((DEPLOY / "docker-default-seccomp.json").read_bytes()).hexdigest()
    assert digest in (DEPLOY / "NOTICE").read_text()  # the base is the one NOTICE names
    assert {key: value for key, value in profile.items() if key != "syscalls"} == \
        {key: value for key, value in base.items() if key != "syscalls"}
    assert profile["syscalls"][:-1] == base["syscalls"]
    [added] = profile["syscalls"][len(base["syscalls"]):]
    assert added["action"] == "SCMP_ACT_ALLOW" and not added["args"] and not added["includes"] \
        and not added["excludes"]
    assert sorted(added["names"]) == ["clone", "mount", "pivot_root", "umount2", "unshare"]


def unconditionally_allowed(profile: dict[str, Any]) -> set[str]:
    """What a container without capabilities may call whatever the arguments, on amd64 and arm64."""
    allowed: set[str] = set()
    for rule in profile["syscalls"]:
        includes = rule.get("includes") or {}
        if rule["action"] != "SCMP_ACT_ALLOW" or rule.get("args") or includes.get("caps"):
            continue
        if includes.get("arches") and not {"amd64", "arm64"} & set(includes["arches"]):
            continue
        allowed |= set(rule["names"])
    return allowed


def test_what_stays_refused_in_the_container() -> None:
    base, profile = load("docker-default-seccomp.json"), load("seccomp.json")
    added = unconditionally_allowed(profile) - unconditionally_allowed(base)

    assert added == {"clone", "mount", "pivot_root", "umount2", "unshare"}
    assert not unconditionally_allowed(profile) & {
        "setns", "chroot", "bpf", "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load",
        "init_module", "finit_module", "delete_module", "open_by_handle_at", "fsopen", "fsmount",
        "move_mount", "open_tree", "mount_setattr", "perf_event_open", "sethostname", "syslog", "reboot",
        "acct", "swapon", "settimeofday", "clock_settime", "process_vm_readv", "kcmp", "quotactl",
        "lookup_dcookie"}


# The profile loaded as Docker loads it, in front of the real bubblewrap


@pytest.fixture(scope="module")
def loader() -> list[str]:
    if not Path(SYSTEM_PYTHON).exists() or subprocess.run([SYSTEM_PYTHON, "-c", "import seccomp"],
                                                          capture_output=True, check=False).returncode:
        unavailable("libseccomp's Python bindings are missing (Debian: apt-get install python3-seccomp)")
    for tool in ("bwrap", "setpriv"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is missing")
    if os.geteuid() != 0:
        unavailable("becoming the image's unprivileged uid needs root")
    return [SYSTEM_PYTHON, str(LOADER)]


@pytest.fixture
def readable() -> Iterator[Path]:
    """A directory the image's uid (and the sandbox's) can read: pytest's own are the caller's alone."""
    directory = Path(tempfile.mkdtemp(prefix="prtriage-seccomp-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


BWRAP = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
         "--cap-drop", "ALL", "--uid", "65534", "--gid", "65534", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
         "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--remount-ro", "/", "--", "/bin/sh", "-c",
         "id -u"]


def bubblewrap_under(loader: list[str], profile: dict[str, Any], directory: Path
                     ) -> subprocess.CompletedProcess[str]:
    path = directory / "profile.json"
    path.write_text(json.dumps(profile))
    path.chmod(0o644)
    return subprocess.run(["setpriv", *UNPRIVILEGED, *loader, str(path), shutil.which("bwrap") or "bwrap",
                           *BWRAP], capture_output=True, text=True, cwd="/", timeout=60, check=False)


def test_bubblewrap_builds_the_sandbox_under_the_profile_and_not_under_dockers_default(
        loader: list[str], readable: Path) -> None:
    ours = bubblewrap_under(loader, load("seccomp.json"), readable)
    dockers = bubblewrap_under(loader, load("docker-default-seccomp.json"), readable)

    assert (ours.returncode, ours.stdout.strip()) == (0, "65534"), ours.stderr
    assert dockers.returncode == 1 and "No permissions to create new namespace" in dockers.stderr


@pytest.mark.parametrize("name", seccomp_profile.BUBBLEWRAP)
def test_each_call_added_is_needed(loader: list[str], readable: Path, name: str) -> None:
    base = load("docker-default-seccomp.json")
    rule = {**seccomp_profile.RULE, "names": [other for other in seccomp_profile.BUBBLEWRAP if other != name]}

    without = bubblewrap_under(loader, {**base, "syscalls": [*base["syscalls"], rule]}, readable)

    assert without.returncode == 1 and without.stderr.startswith("bwrap: "), (without.stdout, without.stderr)


def wrap_bwrap(loader: list[str], readable: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """PRTRIAGE_BWRAP pointed at bubblewrap under the profile NAME: the runner's own sandbox, unchanged."""
    working_sandbox()
    wrapper = readable / f"bwrap-under-{name}"
    profile = readable / name
    profile.write_text((DEPLOY / name).read_text())
    wrapper.write_text(f"#!/bin/sh\nexec {' '.join(loader)} {profile} {shutil.which('bwrap')} \"$@\"\n")
    for path in (wrapper, profile):
        path.chmod(0o755)
    monkeypatch.setenv("PRTRIAGE_BWRAP", str(wrapper))


def test_the_runner_finds_no_sandbox_under_dockers_default(loader: list[str], readable: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    wrap_bwrap(loader, readable, monkeypatch, "docker-default-seccomp.json")
    problem = sandbox_problem()
    assert problem is not None and "cannot run a sandbox here" in problem


def test_the_runners_sandbox_with_its_own_filter_works_under_the_profile(
        loader: list[str], readable: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrap_bwrap(loader, readable, monkeypatch, "seccomp.json")
    assert sandbox_problem() is None
    harness, repo = readable / "harness", readable / "repo"
    for directory in (harness, repo):
        directory.mkdir()
        directory.chmod(0o755)
    shutil.copy(PROBE, harness / PROBE.name)
    (harness / PROBE.name).chmod(0o644)

    run = run_harness(SandboxSpec(program=PROBE.name, repo_dir=repo, job={"action": "ordinary"},
                                  limits=Limits(total_seconds=30), harness_dir=harness))

    assert run.ended is None, run.stderr_tail
    assert [m["type"] for m in run.messages] == ["ordinary", "done"]
    assert run.messages[0]["fork"] == 7 and run.messages[0]["subprocess"] == "child"
