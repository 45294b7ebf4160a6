"""No zombie after a run, even under a PID 1 that never reaps: the caller here is a subreaper that never
waits for strays, so anything bubblewrap leaves unreaped stays its zombie and is counted."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from needs import working_sandbox

PROBE = Path(__file__).resolve().parent / "sandbox_programs" / "probe.py"
RUNS = 5

CALLER = """
import ctypes, os, sys
from pathlib import Path
from app.analysis.core.policy import Limits
from app.sandbox.runner import SandboxSpec, run_harness

PR_SET_CHILD_SUBREAPER = 36
assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
repo, runs = Path(sys.argv[1]), int(sys.argv[2])
for _ in range(runs):
    spec = SandboxSpec(program="probe.py", repo_dir=repo, job={"action": "echo"},
                       limits=Limits(total_seconds=20), harness_dir=repo.parent / "harness")
    assert run_harness(spec).ended is None

def zombie_children():
    found = []
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(entry)
    return found

print(len(zombie_children()))
"""


@pytest.fixture(autouse=True)
def bwrap() -> None:
    working_sandbox()


def test_no_zombie_is_left_to_a_parent_that_never_reaps(tmp_path: Path) -> None:
    for name in ("repo", "harness"):
        (tmp_path / name).mkdir(mode=0o755)
        (tmp_path / name).chmod(0o755)
    shutil.copy(PROBE, tmp_path / "harness" / "probe.py")
    (tmp_path / "harness" / "probe.py").chmod(0o644)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", CALLER, str(tmp_path / "repo"), str(RUNS)], cwd=root,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"  # without the reaper: one zombie bubblewrap per run (and the probe's)
