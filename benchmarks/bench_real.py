"""Benchmark of `prtriage check` on the real radixark/miles, pull request #2077: cold, warm, naive.

    .venv/bin/python -m benchmarks.bench_real [--bundle ../shared/realworld/miles.bundle] [--repeat 3] \
        [--naive-sample 10] [--policy policies/radixark/miles.yml] [--out benchmarks/out/]

Clones the bundle into a temp dir, then measures in one run, interleaved (cold i, warm i, ...):
- cold: `prtriage check --repo CLONE --base base-2077 --head pr-2077 --format json` as a subprocess, with an
  empty cache dir (unpack both revisions, capture the CI matrix at head in the sandbox, validate both);
- warm: the same command with the cache the cold run filled (trees and matrix cached), its base's
  validation results removed first: both revisions are validated, as for a pull request on a new base;
- base reused: the same once more, the base's results reused from the warm run (another push to the same
  pull request, another pull request on the same base): only the head is validated;
- naive: a fresh sandboxed harness per sampled suite and revision (`bench_check.naive_runs`), the median
  extrapolated to all suites x 2 revisions, and the output says so.
Every check is verified against what the repository's history says (exit 1, exactly one blocking finding,
a new_rejection of the five LoRA scripts at the new assert): a wrong answer exits 1 with no figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.analysis.core.policy import POLICIES_DIR, Policy, load_policy
from app.engine.matrix_capture import capture_matrix
from app.trees.gitrepo import cached_tree
from benchmarks.bench_check import Mode, WrongResult, naive_runs, report_figures

BUNDLE = Path(__file__).resolve().parents[2] / "shared" / "realworld" / "miles.bundle"
POLICY = POLICIES_DIR / "radixark" / "miles.yml"
BASE, HEAD = "base-2077", "pr-2077"
VALIDATOR_PATH = "miles/utils/arguments.py"
INCIDENT_LINES = (3081, 3088)  # the new assert at pr-2077 (the bundle's README)
INCIDENT_SCRIPTS = frozenset({
    "tests/e2e/megatron/model_scripts/test_glm5_1_744b_a40b_6layer_lora_ci.py",
    "tests/e2e/megatron/model_scripts/test_glm5_2_744b_a40b_5layer_lora_ci.py",
    "tests/e2e/megatron/model_scripts/test_gpt_oss_20b_moe_lora_ci.py",
    "tests/e2e/megatron/model_scripts/test_inkling_small_4layer_lora_ci.py",
    "tests/e2e/megatron/test_qwen3_5_35b_a3b_lora_ci.py",
})
EXIT_BLOCKING = 1
WARM_TARGET_S = 20.0
NAIVE_RATIO_TARGET = 20.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def verify(exit_status: int, report: dict[str, Any]) -> list[str]:
    """Raise WrongResult unless the check found #2077 as the history knows it; return harmless warnings."""
    problems = []
    if exit_status != EXIT_BLOCKING:
        problems.append(f"exit status {exit_status}, expected {EXIT_BLOCKING}")
    blocking = [f for f in report.get("findings", []) if f["severity"] == "blocking"]
    if len(blocking) != 1 or blocking[0]["kind"] != "new_rejection":
        problems.append(f"blocking findings {[(f['kind'], f['path'], f['line']) for f in blocking]}, "
                        f"expected one new_rejection")
    for finding in blocking:
        if set(finding["scripts"]) != INCIDENT_SCRIPTS:
            problems.append(f"{finding['kind']} names scripts {sorted(finding['scripts'])}")
        first, last = INCIDENT_LINES
        if finding["path"] != VALIDATOR_PATH or not first <= (finding["line"] or 0) <= last:
            problems.append(f"{finding['kind']} at {finding['path']}:{finding['line']}, expected "
                            f"{VALIDATOR_PATH}:{first}-{last}")
    if problems:
        raise WrongResult("; ".join(problems))
    capture = report["capture"]
    return [f"capture failed: {f['script']}: {f['reason'][:200]}" for f in capture["failed"]]


def base_accepted(report: dict[str, Any]) -> tuple[int, int]:
    """Suites the base accepts, of all suites: CI starts them all at base-2077."""
    suites = report["suites"]
    return sum(1 for s in suites if s["base"]["outcome"] == "accepted"), len(suites)


@dataclass
class Bench:
    clone: Path
    policy_path: Path
    warnings: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)  # the last verified report

    def check(self, cache_dir: Path, label: str) -> dict[str, Any]:
        """One `prtriage check` as a subprocess, timed from outside and verified."""
        command = [*prtriage(), "check", "--repo", str(self.clone), "--base", BASE, "--head", HEAD,
                   "--policy", str(self.policy_path), "--format", "json", "--cache-dir", str(cache_dir),
                   "--no-progress"]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - started
        try:
            report: dict[str, Any] = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise WrongResult(f"{label}: exit {done.returncode}, no JSON: {done.stderr[-2000:]}") from None
        self.warnings += [w for w in verify(done.returncode, report) if w not in self.warnings]
        self.last = report
        self.runs.append(self._row(label, elapsed, report))
        timing = report["timing"]
        log(f"  {label}: {elapsed:.2f} s (capture {timing['capture_s']:.2f} s"
            f"{', cached' if report['capture']['cached'] else ''}, base {timing['base_s']:.2f} s, head "
            f"{timing['head_s']:.2f} s), load {os.getloadavg()[0]:.1f}")
        return report

    @staticmethod
    def _row(label: str, elapsed: float, report: dict[str, Any]) -> dict[str, Any]:
        accepted, suites = base_accepted(report)
        return {"run": label, "wall_s": round(elapsed, 3), **{k: report["timing"][k] for k in
                                                              ("capture_s", "base_s", "head_s", "total_s")},
                "capture_cached": report["capture"]["cached"], "sandboxed": report["sandboxed"],
                "suites": suites, "base_accepted": accepted, "load_avg_1m": round(os.getloadavg()[0], 2)}


def prtriage() -> list[str]:
    """The installed command line of this interpreter's environment (what a user runs)."""
    script = Path(sys.executable).with_name("prtriage")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def clone_bundle(bundle: Path, work: Path) -> Path:
    if not bundle.is_file():
        raise SystemExit(f"{bundle}: no such bundle (see ../shared/realworld/README.md)")
    clone = work / "miles"
    subprocess.run(["git", "clone", "--quiet", str(bundle), str(clone)], check=True)
    return clone


def measure_checks(bench: Bench, work: Path, repeat: int) -> tuple[Mode, Mode, Mode]:
    cold, warm = Mode("cold check (empty cache)"), Mode("warm check (trees and matrix cached)")
    reused = Mode("warm check, the base's results reused")
    for index in range(repeat):
        cache_dir = work / f"cache-{index}"
        bench.check(cache_dir, f"cold {index + 1}/{repeat}")
        cold.samples.append(bench.runs[-1]["wall_s"])
        shutil.rmtree(cache_dir / "validation", ignore_errors=True)  # both revisions validated again
        report = bench.check(cache_dir, f"warm {index + 1}/{repeat}")
        if not report["capture"]["cached"]:  # a missed target, reported as such; the answer is not wrong
            bench.warnings.append(f"warm {index + 1}: the matrix cache missed an unchanged CI tree")
        if report["timing"]["base_cached"]:
            raise WrongResult(f"warm {index + 1}: the base's results came from the cache, not validated")
        warm.samples.append(bench.runs[-1]["wall_s"])
        report = bench.check(cache_dir, f"base reused {index + 1}/{repeat}")
        if not report["timing"]["base_cached"]:
            bench.warnings.append(f"base reused {index + 1}: the base's results were validated again")
        reused.samples.append(bench.runs[-1]["wall_s"])
    return cold, warm, reused


def measure_naive(bench: Bench, policy: Policy, cache_dir: Path, sample: int,
                  seed: int) -> tuple[Mode, list[float]]:
    """The naive way on the trees and matrix the checks left in CACHE_DIR (no capture is timed here)."""
    _, base = cached_tree(bench.clone, BASE, cache_dir)
    _, head = cached_tree(bench.clone, HEAD, cache_dir)
    matrix, _ = capture_matrix(head, policy, cache_dir=cache_dir)
    seconds, outcomes = naive_runs(base, head, policy, list(matrix.suites), sample, seed, cache_dir, log)
    bench.warnings += consistent(outcomes, bench.last)
    per_suite, count = statistics.median(seconds), len(matrix.suites)
    note = (f"extrapolated: median {per_suite:.2f} s per suite-revision over {len(seconds)} one-suite jobs "
            f"({len(seconds) // 2} sampled suites x 2 revisions), x {count} suites x 2")
    return Mode("naive: fresh sandboxed process per suite x revision", [per_suite * count * 2], note), seconds


def consistent(naive: dict[str, str], report: dict[str, Any]) -> list[str]:
    """The one-suite runs must agree with the full check: same harness, same answer."""
    full = {f"{revision} {s['id']}": s[revision]["outcome"] for s in report["suites"] for revision in
            ("base", "head")}
    return [f"{key}: one-suite job says {outcome}, full check says {full.get(key)}"
            for key, outcome in naive.items() if full.get(key) != outcome]


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="prtriage-bench-real-"))
    work.chmod(0o755)  # the sandbox reads the trees as an unprivileged uid
    try:
        clone = clone_bundle(args.bundle, work)
        load_before = os.getloadavg()[0]
        bench = Bench(clone, args.policy)
        cold, warm, reused = measure_checks(bench, work, args.repeat)
        naive, seconds = measure_naive(bench, load_policy(args.policy), work / f"cache-{args.repeat - 1}",
                                       args.naive_sample, args.seed)
        load = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2),
                "during_runs": [r["load_avg_1m"] for r in bench.runs]}
        return summary(bench, [cold, warm, reused, naive], load, seconds, args)
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def summary(bench: Bench, modes: list[Mode], load: dict[str, Any], seconds: list[float],
            args: argparse.Namespace) -> dict[str, Any]:
    cold, warm, _, naive = modes
    suites = bench.runs[-1]["suites"]
    accepted, _ = base_accepted(bench.last)
    ratios = {"naive_over_warm": naive.median / warm.median, "cold_over_warm": cold.median / warm.median}
    return {
        "command": " ".join(sys.argv),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "repository": {"bundle": str(args.bundle), "base": BASE, "head": HEAD, "base_sha": bench.last["base"],
                       "head_sha": bench.last["head"], "policy": str(args.policy), "suites": suites,
                       "scripts": bench.last["capture"]["scripts"], "base_accepted": accepted},
        "load_avg_1m": load,
        "result_verified": True,
        "modes": [m.row(suites) for m in modes],
        "ratios": {k: round(v, 1) for k, v in ratios.items()},
        "targets": {"warm_at_most_20s": warm.median <= WARM_TARGET_S,
                    "naive_over_warm_at_least_20x": ratios["naive_over_warm"] >= NAIVE_RATIO_TARGET},
        "naive_seconds": [round(s, 3) for s in seconds],
        "runs": bench.runs,
        "warnings": bench.warnings,
    }


def table(result: dict[str, Any]) -> str:
    repo, load = result["repository"], result["load_avg_1m"]
    lines = [
        f"prtriage check on radixark/miles {repo['base']} -> {repo['head']}: {repo['suites']} suites from "
        f"{repo['scripts']} CI scripts x 2 revisions, {result['machine']['cpus']} CPUs",
        f"base accepts {repo['base_accepted']} of {repo['suites']} suites; load average (1 min) "
        f"{load['before']} before, {load['after']} after, {min(load['during_runs'])}-"
        f"{max(load['during_runs'])} after each check",
        "",
        f"{'mode':<54} {'runs':>4} {'median s':>9} {'min s':>8} {'max s':>8} {'suites/s':>9}",
    ]
    for row in result["modes"]:
        lines.append(f"{row['mode']:<54} {row['runs']:>4} {row['median_s']:>9.2f} {row['min_s']:>8.2f} "
                     f"{row['max_s']:>8.2f} {row['suites_per_s']:>9}")
        if row["note"]:
            lines.append(f"    {row['note']}")
    ratios, targets = result["ratios"], result["targets"]
    lines += [
        "",
        f"naive / warm: {ratios['naive_over_warm']}x   cold / warm: {ratios['cold_over_warm']}x",
        "targets: " + ", ".join(f"{name} {'MET' if ok else 'MISSED'}" for name, ok in targets.items()),
        "result verified: exit 1, one blocking new_rejection of the five LoRA scripts at "
        f"{VALIDATOR_PATH}:{INCIDENT_LINES[0]}-{INCIDENT_LINES[1]}",
    ]
    return "\n".join(lines + [f"warning: {w}" for w in result["warnings"]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark prtriage check on the real miles (#2077).")
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--policy", type=Path, default=POLICY)
    parser.add_argument("--repeat", type=int, default=3, help="runs of the cold and of the warm check")
    parser.add_argument("--naive-sample", type=int, default=10, help="suites measured the naive way")
    parser.add_argument("--seed", type=int, default=7, help="which suites the naive way samples")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    parser.add_argument("--keep", action="store_true", help="keep the clone and caches")
    args = parser.parse_args(argv)
    return report_figures("bench_real", lambda: run(args), args.out, table)


if __name__ == "__main__":
    sys.exit(main())
