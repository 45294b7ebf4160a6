"""What the sandbox's seccomp filter costs: the wall time of whole sandbox runs with it and without it.

    .venv/bin/python -m benchmarks.bench_seccomp [--runs 30] [--out benchmarks/out/]

Two programs, each run RUNS times with the filter and RUNS times without, interleaved so that the machine's
drift falls on both alike: `start`, a harness program that only says it is done (the cost of starting a
sandbox), and `work`, one that imports argparse, json and subprocess, forks, starts a thread and a
subprocess (a filter is evaluated on every system call). Reports the median of each and the ratio of the
filtered median to the unfiltered one (the baseline, measured in the same run). Writes
`bench_seccomp.json` in --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from app.analysis.core.policy import Limits
from app.sandbox.runner import SandboxSpec, run_harness, sandbox_problem

PROGRAMS = {
    "start": "import os\nos.write(1, b'{\"type\": \"done\"}\\n')\n",
    "work": ("import argparse, json, os, subprocess, sys, threading\n"
             "parser = argparse.ArgumentParser(); parser.add_argument('--colocate', action='store_true')\n"
             "parser.parse_args(['--colocate'])\n"
             "thread = threading.Thread(target=lambda: None); thread.start(); thread.join()\n"
             "pid = os.fork()\n"
             "if pid == 0:\n    os._exit(0)\n"
             "os.waitpid(pid, 0)\n"
             "subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
             "for _ in range(20000):\n    os.stat('/repo')\n"
             "os.write(1, b'{\"type\": \"done\"}\\n')\n"),
}


def run_once(root: Path, program: str, *, filtered: bool) -> float:
    spec = SandboxSpec(program=f"{program}.py", repo_dir=root / "repo", job={},
                       limits=Limits(total_seconds=60), harness_dir=root / "harness", seccomp=filtered)
    started = time.perf_counter()
    run = run_harness(spec)
    elapsed = time.perf_counter() - started
    if run.ended is not None or [m.get("type") for m in run.messages] != ["done"]:
        raise RuntimeError(f"{program}: {run.ended} {run.stderr_tail}")
    return elapsed


def measure(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        root.chmod(0o755)
        for name in ("harness", "repo"):
            (root / name).mkdir()
            (root / name).chmod(0o755)
        for program, text in PROGRAMS.items():
            (root / "harness" / f"{program}.py").write_text(text)
            (root / "harness" / f"{program}.py").chmod(0o644)
        results: dict[str, Any] = {}
        for program in PROGRAMS:
            run_once(root, program, filtered=True)  # warm the page cache
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(runs):
                for filtered in (True, False):
                    times[filtered].append(run_once(root, program, filtered=filtered))
            with_filter, without = statistics.median(times[True]), statistics.median(times[False])
            results[program] = {"median_with_filter_s": round(with_filter, 4),
                                "median_without_filter_s": round(without, 4),
                                "ratio": round(with_filter / without, 3), "runs": runs}
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    options = parser.parse_args()
    problem = sandbox_problem()
    if problem is not None:
        raise SystemExit(f"the sandbox cannot run here: {problem}")
    results = measure(options.runs)
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "bench_seccomp.json").write_text(json.dumps(results, indent=2) + "\n")
    for program, figures in results.items():
        print(f"{program}: {figures['median_with_filter_s'] * 1000:.1f} ms with the filter, "
              f"{figures['median_without_filter_s'] * 1000:.1f} ms without, ratio {figures['ratio']}")


if __name__ == "__main__":
    main()
