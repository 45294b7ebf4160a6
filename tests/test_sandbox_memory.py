"""A total memory bound per sandbox: children each within the per-process limit, together over the sandbox's
bound, are stopped with a clear reason, and the host is unharmed. Needs a memory cgroup prtriage can make
(cgroup v2 delegated, or a writable v1 memory hierarchy); skipped elsewhere."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from app.analysis.core.policy import Limits
from app.sandbox import memory
from app.sandbox.runner import SandboxSpec, run_harness, sandbox_problem

PROBE = Path(__file__).resolve().parent / "sandbox_programs" / "probe.py"
BOUND_MB = 256
CHILDREN, CHILD_MB = 4, 200  # 800 MiB wanted in all: far below this machine's memory, 3 x the bound


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("repo", "harness"):
        (tmp_path / name).mkdir()
        (tmp_path / name).chmod(0o755)
    shutil.copy(PROBE, tmp_path / "harness" / "probe.py")
    (tmp_path / "harness" / "probe.py").chmod(0o644)
    return tmp_path


@pytest.fixture(autouse=True)
def bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(memory.MEMORY_ENV, str(BOUND_MB))
    with memory.memory_cgroup() as cgroup:
        if cgroup is None:
            pytest.skip("no memory cgroup can be made here: only per-process limits hold")


def hogs(tree: Path, *, unsandboxed: bool = False) -> tuple[str | None, list[dict[str, object]], float]:
    spec = SandboxSpec(program="probe.py", repo_dir=tree / "repo", harness_dir=tree / "harness",
                       job={"action": "memory_hogs", "children": CHILDREN, "mib": CHILD_MB, "hold": 5},
                       limits=Limits(memory_mb=CHILD_MB + 200, total_seconds=30),
                       allow_unsandboxed=unsandboxed)
    started = time.monotonic()
    run = run_harness(spec)
    return run.ended, run.messages, time.monotonic() - started


def test_children_over_the_sandbox_bound_stop_the_run_with_the_reason(tree: Path) -> None:
    if sandbox_problem() is not None:
        pytest.skip(str(sandbox_problem()))
    ended, messages, seconds = hogs(tree)
    assert ended == f"memory limit of {BOUND_MB} MiB for the whole sandbox exceeded (the kernel killed a " \
                    "process of it)"
    assert seconds < 5  # stopped as soon as the kernel killed, not after the children's 5 s
    assert not [m for m in messages if m.get("type") == "hogs"]
    os.kill(os.getpid(), 0)


def test_the_unsandboxed_fallback_is_bounded_too(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRTRIAGE_BWRAP", str(tree / "no-bwrap"))
    ended, _, seconds = hogs(tree, unsandboxed=True)
    assert ended is not None and ended.startswith(f"memory limit of {BOUND_MB} MiB")
    assert seconds < 5


def test_no_cgroup_is_left_behind(tree: Path) -> None:
    found = memory._parent()
    assert found is not None
    ours = f"prtriage-{os.getpid()}-"  # another prtriage on the machine makes and removes its own meanwhile
    before = {path.name for path in found[0].iterdir() if path.name.startswith(ours)}
    hogs(tree, unsandboxed=sandbox_problem() is not None)
    after = {path.name for path in found[0].iterdir() if path.name.startswith(ours)}
    assert after <= before
