"""Benchmark of the minimal-arguments search (why a suite breaks) on the real radixark/miles #2077.

    .venv/bin/python -m benchmarks.bench_minimal [--bundle ../shared/realworld/miles.bundle] [--repeat 3] \
        [--out benchmarks/out/]

Clones the bundle, then runs `prtriage check --repo CLONE --base base-2077 --head pr-2077 --repository
radixark/miles --format json` as a subprocess: once cold (empty cache: unpack, capture, both revisions),
then REPEAT times warm with the base's validation results removed first (both revisions validated, as for
a pull request on a new base). Each run's JSON times the search (`timing.minimize_s`) apart from the rest
of the same check (`total_s - minimize_s`): the ratio of the two is the search's cost against the check it
explains, measured in the same process. The same in CPU seconds (`timing.minimize_cpu_s` against the rest
of the check subprocess's, its sandboxes' included): with Linux's autogroup (kernel.sched_autogroup_enabled)
each sandbox, a session of its own, is a scheduling group, so on a loaded machine the check's two sandboxes
at once get twice the CPU share of the search's one, and the wall-time ratio grows with the load where the
CPU ratio does not. Every run is verified: exit 1, one blocking new rejection of the five LoRA scripts, and
a complete minimal set holding `--colocate`, `--disable-weights-backuper` and `--lora-rank`; a wrong answer
exits 1 with no figures.
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
import tempfile
from pathlib import Path
from typing import Any

BUNDLE = Path(__file__).resolve().parents[2] / "shared" / "realworld" / "miles.bundle"
CAUSE = {"--colocate", "--disable-weights-backuper", "--lora-rank"}
GOAL = 0.20  # issue 25: the check's time plus at most 20%


def check(clone: Path, cache: Path) -> dict[str, Any]:
    before = _children_cpu()
    done = subprocess.run([sys.executable, "-m", "app.cli", "check", "--repo", str(clone), "--base",
                           "base-2077", "--head", "pr-2077", "--repository", "radixark/miles", "--format",
                           "json", "--cache-dir", str(cache)], capture_output=True, text=True, timeout=1800,
                          check=False)
    if done.returncode != 1:
        raise SystemExit(f"wrong result: exit {done.returncode}\n{done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    minimal = finding["minimal_args"]
    if minimal is None or not minimal["complete"] or not set(minimal["args"]) >= CAUSE:
        raise SystemExit(f"wrong minimal set: {minimal}")
    report["cpu_s"] = _children_cpu() - before  # the whole check's, its sandboxes' and the search's with it
    return report


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def forget_base_results(cache: Path) -> None:
    shutil.rmtree(cache / "validation", ignore_errors=True)  # app/engine/validation_cache.py


def figures(reports: list[dict[str, Any]]) -> dict[str, float]:
    searched = [r["timing"]["minimize_s"] for r in reports]
    rest = [r["timing"]["total_s"] - r["timing"]["minimize_s"] for r in reports]
    # CPU seconds: what the wall times are on a machine of one's own (here the load decides them)
    searched_cpu = [r["timing"]["minimize_cpu_s"] for r in reports]
    rest_cpu = [r["cpu_s"] - r["timing"]["minimize_cpu_s"] for r in reports]
    return {"minimize_s": statistics.median(searched), "check_s": statistics.median(rest),
            "ratio": statistics.median(s / c for s, c in zip(searched, rest, strict=True)),
            "minimize_cpu_s": statistics.median(searched_cpu), "check_cpu_s": statistics.median(rest_cpu),
            "ratio_cpu": statistics.median(s / c for s, c in zip(searched_cpu, rest_cpu, strict=True))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-minimal-") as scratch:
        clone, cache = Path(scratch) / "miles", Path(scratch) / "cache"
        subprocess.run(["git", "clone", "-q", str(args.bundle), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "fetch", "-q", "--tags", str(args.bundle)], check=True)
        cold = check(clone, cache)
        warm = []
        for _ in range(args.repeat):
            forget_base_results(cache)
            warm.append(check(clone, cache))
    minimal = cold["findings"][0]["minimal_args"]
    result = {"cold": figures([cold]), "warm": figures(warm), "minimal_args": minimal,
              "load": os.getloadavg()[0], "goal_ratio": GOAL}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_minimal.json").write_text(json.dumps(result, indent=2))
    print(f"minimal set: {' '.join(minimal['args'])} ({minimal['count']} of {minimal['of']} arguments), "
          f"{minimal['sets']} sets in {minimal['rounds']} rounds")
    for mode in ("cold", "warm"):
        found = result[mode]
        print(f"{mode}: check {found['check_s']:.1f} s, search {found['minimize_s']:.1f} s, "
              f"+{found['ratio']:.0%} (goal +{GOAL:.0%}); CPU: check {found['check_cpu_s']:.1f} s, "
              f"search {found['minimize_cpu_s']:.1f} s, +{found['ratio_cpu']:.0%}")


if __name__ == "__main__":
    main()
