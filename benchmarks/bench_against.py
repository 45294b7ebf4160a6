"""Benchmark: a warm `prtriage check` on a fetched repository by this checkout against the same check by
another revision of prtriage (the baseline), interleaved, the answers compared suite by suite.

    .venv/bin/python -m benchmarks.bench_against --repo /tmp/megatron --base d98e8a64dd~1 \
        --head d98e8a64dd --policy policies/NVIDIA/Megatron-LM.yml --against 876ccd8 [--repeat 3]

Not run by CI (it needs a fetched repository). The baseline revision is unpacked from this repository's git
(`git archive`) into a temp dir and run with this interpreter, its own `app` first on the path; both use the
policy file given, unless `--against-policy` gives the baseline its own (a baseline from before the analysis
environments reads no `harness.requirements`, and takes its packages from this interpreter). Each side fills
a cache dir of its own with a first check (not timed); then each timed run finds trees and matrix cached and
the base's results not (`validation_cache` emptied first): both revisions are validated, as for a pull
request on a new base. Every run must answer as this checkout's first check did (each suite's outcome and
message at both revisions, and the findings): a speed-up that changes an answer is a wrong result, exit 1
with no figures.
Prints medians, the ratio baseline / this checkout, CPU time and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_policy_speed import WrongResult, answers, bench_main, log

ROOT = Path(__file__).resolve().parents[1]


def unpack(revision: str, into: Path) -> Path:
    """This repository's `revision` as files under INTO (no git metadata, nothing left in the checkout)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", revision],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def check(args: argparse.Namespace, prtriage: Path, cache_dir: Path,
          policy: Path) -> tuple[float, float, dict[str, Any]]:
    """(wall seconds, CPU seconds of the whole process tree, report) of one check by the prtriage in
    PRTRIAGE with POLICY; the base's cached results are removed first."""
    shutil.rmtree(cache_dir / "validation", ignore_errors=True)
    command = [sys.executable, "-m", "app.cli", "check", "--repo", str(args.repo), "--base", args.base,
               "--head", args.head, "--policy", str(policy.resolve()), "--format", "json",
               "--cache-dir", str(cache_dir), "--no-progress"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=prtriage,
                          env={**os.environ, "PYTHONPATH": str(prtriage)})
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        return elapsed, cpu, json.loads(done.stdout)
    except json.JSONDecodeError:
        raise WrongResult(f"{prtriage}: exit {done.returncode}, no JSON: {done.stderr[-2000:]}") from None


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    baseline_policy = args.against_policy or args.policy
    sides = {"this checkout": (ROOT, work / "cache-this", args.policy),
             f"baseline {args.against}": (unpack(args.against, work / "baseline"), work / "cache-baseline",
                                          baseline_policy)}
    expected: dict[str, Any] | None = None
    for label, (prtriage, cache_dir, policy) in sides.items():
        log(f"{label}: filling its cache (not timed)")
        _, _, first = check(args, prtriage, cache_dir, policy)
        expected = expected or answers(first)
        if answers(first) != expected:
            raise WrongResult(f"{label} answered differently from this checkout")
    walls: dict[str, list[float]] = {label: [] for label in sides}
    cpus: dict[str, list[float]] = {label: [] for label in sides}
    loads: list[float] = []
    for index in range(args.repeat):
        for label, (prtriage, cache_dir, policy) in sides.items():
            wall, cpu, report = check(args, prtriage, cache_dir, policy)
            if answers(report) != expected:
                raise WrongResult(f"{label} run {index + 1} answered differently from the first check")
            walls[label].append(round(wall, 2))
            cpus[label].append(round(cpu, 1))
            loads.append(round(os.getloadavg()[0], 2))
            timing = report["timing"]
            log(f"  {label} {index + 1}/{args.repeat}: {wall:.1f} s wall, {cpu:.0f} s CPU (capture "
                f"{timing['capture_s']:.1f} s, base {timing['base_s']:.1f} s, head "
                f"{timing['head_s']:.1f} s), load {loads[-1]}")
    medians = {label: statistics.median(values) for label, values in walls.items()}
    this, baseline = list(sides)
    return {"command": " ".join(sys.argv), "repo": str(args.repo), "base": args.base, "head": args.head,
            "policy": str(args.policy), "against": args.against, "against_policy": str(baseline_policy),
            "suites": len(report["suites"]),
            "wall_s": walls, "cpu_s": cpus, "median_wall_s": medians,
            "median_cpu_s": {label: statistics.median(values) for label, values in cpus.items()},
            "baseline_over_this": round(medians[baseline] / medians[this], 2), "load_avg_1m": loads,
            "cpus": os.cpu_count()}


def main() -> None:
    bench_main("bench_against", __doc__, measure, summary, _arguments)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--against", required=True, help="the prtriage revision to compare with")
    parser.add_argument("--against-policy", type=Path, help="the baseline's policy file, when the baseline "
                        "cannot read --policy's (a key it predates); default: --policy")


def summary(result: dict[str, Any]) -> str:
    walls, cpus = result["median_wall_s"], result["median_cpu_s"]
    return (f"{result['suites']} suites; warm check median: " + ", ".join(
        f"{label} {walls[label]:.1f} s ({cpus[label]:.0f} s CPU)" for label in walls)
        + f"; baseline / this checkout x{result['baseline_over_this']}; load {result['load_avg_1m']}")


if __name__ == "__main__":
    main()
