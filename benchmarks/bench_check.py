"""Benchmark of `prtriage check` on the miles twin: cold, warm (matrix cached), and a process per suite.

    .venv/bin/python -m benchmarks.bench_check [--suites 150] [--naive-sample 20] [--repeat 3] \
        [--out benchmarks/out/]

One run measures every mode against the same generated trees, interleaved (cold i, warm i, ...) so that
load from other work on the machine falls on all modes alike:
- cold: `run_check` with an empty cache directory (capture + both revisions);
- warm: `run_check` again with the cache the cold run filled (capture is a cache hit);
- warm, new head: a head whose validator changed again but whose CI tree did not (capture must still hit);
- naive: `validate_revision` with a one-suite job (a fresh sandboxed harness) per sampled suite and revision;
  the per-suite median is extrapolated to suites x 2 revisions, and the output says so.
Every check's result is verified (the incident suites, and only they, are new_rejection): a fast wrong answer
fails the benchmark. Prints a table, writes `bench_check.json` in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.analysis.core.model import Suite
from app.analysis.core.policy import Policy, load_policy
from app.analysis.verdict.report import CheckReport
from app.engine.check_steps import compare_trees, run_check
from app.engine.environments import prepare
from app.engine.suite_validation import trace_lines, validate_revision
from benchmarks.generate import DEFAULT_SEED, VALIDATOR_PATH, Manifest, generate_pair
from benchmarks.twin.selfcheck import import_seconds

POLICY = Path(__file__).parent / "twin" / "policy.yml"  # the twin's own, not the real miles policy
WARM_TARGET_S = 10.0
NAIVE_RATIO_TARGET = 20.0


class WrongResult(Exception):
    """A check reported something other than the planted incident: its timing must not count."""


@dataclass
class Mode:
    """Wall-clock samples of one way of running the check."""

    name: str
    samples: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def row(self, suites: int) -> dict[str, Any]:
        return {
            "mode": self.name,
            "runs": len(self.samples),
            "median_s": round(self.median, 3),
            "min_s": round(min(self.samples), 3),
            "max_s": round(max(self.samples), 3),
            "suites_per_s": round(suites / self.median, 1) if self.median else None,
            "note": self.note,
            "samples_s": [round(s, 3) for s in self.samples],
        }


def verify(report: CheckReport, manifest: Manifest) -> list[str]:
    """Raise WrongResult unless exactly the incident suites are new_rejection at the added assert.

    Returns warnings that do not make the answer wrong (scripts the capture could not run).
    """
    expected = set(manifest.scripts_expecting("new_rejection"))
    rejections = [f for f in report.findings if f.kind == "new_rejection"]
    reported_scripts = {s for f in rejections for s in f.scripts}
    reported_suites = {s for f in rejections for s in f.suites}
    problems = []
    if reported_scripts != expected:
        problems.append(f"new_rejection scripts {sorted(reported_scripts)}, expected {sorted(expected)}")
    if len(reported_suites) != len(expected):
        problems.append(f"{len(reported_suites)} suites newly rejected, expected {len(expected)}")
    first, last = manifest.incident_lines
    for finding in rejections:
        if finding.path != VALIDATOR_PATH or not first <= (finding.line or 0) <= last:
            problems.append(
                f"new_rejection located at {finding.path}:{finding.line}, expected "
                f"{VALIDATOR_PATH}:{first}-{last}"
            )
    if problems:
        raise WrongResult("; ".join(problems))
    warnings = [f"capture failed: {f.script}: {f.reason[:200]}" for f in report.matrix.failed]
    if len(report.matrix.suites) != manifest.suite_count():
        warnings.append(f"captured {len(report.matrix.suites)} suites, the twin has {manifest.suite_count()}")
    return warnings


@dataclass
class Bench:
    manifest: Manifest
    policy: Policy
    work: Path
    log: Callable[[str], None]
    warnings: list[str] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)

    def check(self, head: Path, cache_dir: Path, label: str) -> CheckReport:
        started = time.perf_counter()
        report = run_check(
            self.manifest.base,
            head,
            self.policy,
            base_sha=None,
            head_sha=None,
            cache_dir=cache_dir,
            allow_unsandboxed=False,
        )
        elapsed = time.perf_counter() - started
        self.warnings += [w for w in verify(report, self.manifest) if w not in self.warnings]
        timing = report.timing
        self.reports.append(
            {
                "run": label,
                "wall_s": round(elapsed, 3),
                "capture_s": round(timing.capture_s, 3),
                "base_s": round(timing.base_s, 3),
                "head_s": round(timing.head_s, 3),
                "capture_cached": report.capture_cached,
                "sandboxed": report.sandboxed,
                "suites": len(report.matrix.suites),
                "load_avg_1m": round(os.getloadavg()[0], 2),
            }
        )
        self.log(
            f"  {label}: {elapsed:.2f} s (capture {timing.capture_s:.2f} s"
            f"{', cached' if report.capture_cached else ''}, base {timing.base_s:.2f} s, head "
            f"{timing.head_s:.2f} s), load {os.getloadavg()[0]:.1f}"
        )
        return report

    def naive(self, suites: list[Suite], sample: int, seed: int,
              cache_dir: Path) -> tuple[list[float], dict[str, str]]:
        """Seconds per (suite, revision) with a one-suite job each; outcomes keyed 'revision suite-id'."""
        return naive_runs(self.manifest.base, self.manifest.head, self.policy, suites, sample, seed,
                          cache_dir, self.log)


def naive_runs(
    base: Path,
    head: Path,
    policy: Policy,
    suites: list[Suite],
    sample: int,
    seed: int,
    cache_dir: Path,
    log: Callable[[str], None],
) -> tuple[list[float], dict[str, str]]:
    """The naive way: `validate_revision` with a one-suite job (a fresh sandboxed harness) per sampled
    suite and revision; seconds per run, outcomes keyed 'revision suite-id'. The analysis environment is
    the one the checks built in CACHE_DIR (a policy with harness.requirements has none elsewhere), looked
    up before the clock starts. Shared with bench_real."""
    diff, head_sources = compare_trees(base, head)
    trace = trace_lines(diff, policy, head_sources)
    chosen = random.Random(seed).sample(suites, min(sample, len(suites)))
    revisions = [(name, tree, traced, prepare(policy.harness, tree, cache_dir))
                 for name, tree, traced in (("base", base, {}), ("head", head, trace))]
    seconds: list[float] = []
    outcomes: dict[str, str] = {}
    for index, suite in enumerate(chosen, 1):
        for revision, tree, traced, interpreter in revisions:
            started = time.perf_counter()
            results, _ = validate_revision(tree, policy, [suite], trace=traced, allow_unsandboxed=False,
                                           interpreter=interpreter)
            seconds.append(time.perf_counter() - started)
            outcomes[f"{revision} {suite.id}"] = results[suite.id].outcome.outcome
        log(f"  naive {index}/{len(chosen)}: {suite.id} {seconds[-2]:.2f} s + {seconds[-1]:.2f} s")
    return seconds, outcomes


def _new_head(manifest: Manifest, work: Path) -> Path:
    """The head with one more validator change (a reworded message); the CI tree is untouched."""
    head2 = work / "head2"
    shutil.copytree(manifest.head, head2)
    path = head2 / VALIDATOR_PATH
    text = path.read_text()
    path.write_text(
        text.replace(
            '"--use-dynamic-batch-size needs --max-tokens-per-gpu"',
            '"--use-dynamic-batch-size requires --max-tokens-per-gpu"',
            1,
        )
    )
    return head2


def _consistent(naive: dict[str, str], report: CheckReport) -> list[str]:
    """The one-suite runs must agree with the full run: same harness, same answer."""
    wrong = []
    for key, outcome in naive.items():
        revision, suite_id = key.split(" ", 1)
        full = report.outcome("base" if revision == "base" else "head", suite_id).outcome
        if full != outcome:
            wrong.append(f"{key}: one-suite job says {outcome}, full check says {full}")
    return wrong


def run(args: argparse.Namespace) -> dict[str, Any]:
    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    work = Path(tempfile.mkdtemp(prefix="prtriage-bench-"))
    work.chmod(0o755)  # the sandbox reads the trees as an unprivileged uid
    try:
        started = time.perf_counter()
        manifest = generate_pair(work / "twin", suites=args.suites, seed=args.seed)
        log(
            f"generated the twin in {time.perf_counter() - started:.1f} s: {manifest.suite_count()} suites, "
            f"{manifest.options} options, miles_validate_args {manifest.validator_lines} lines"
        )
        import_s = import_seconds(manifest.base)
        log(f"importing the twin's miles.utils.arguments with stubs takes {import_s:.2f} s (median of 3)")
        load_before = os.getloadavg()[0]
        bench = Bench(manifest, load_policy(POLICY), work, log)
        cold, warm = Mode("cold check (empty cache)"), Mode("warm check (matrix cached)")
        capture_cold, capture_warm = Mode("capture, cold"), Mode("capture, warm (cache lookup)")
        last: CheckReport | None = None
        for index in range(args.repeat):
            cache_dir = work / f"cache-{index}"
            report = bench.check(manifest.head, cache_dir, f"cold {index + 1}/{args.repeat}")
            cold.samples.append(bench.reports[-1]["wall_s"])
            capture_cold.samples.append(report.timing.capture_s)
            last = bench.check(manifest.head, cache_dir, f"warm {index + 1}/{args.repeat}")
            if not last.capture_cached:  # a missed target, reported as such; the answer is not wrong
                log("  the warm check captured again: the matrix cache missed an unchanged CI tree")
            warm.samples.append(bench.reports[-1]["wall_s"])
            capture_warm.samples.append(last.timing.capture_s)
        assert last is not None
        new_head_report = bench.check(
            _new_head(manifest, work),
            work / f"cache-{args.repeat - 1}",
            "warm, new head with the CI tree unchanged",
        )
        new_head = Mode(
            "warm check, new head (CI tree unchanged)",
            [bench.reports[-1]["wall_s"]],
            note=f"capture cached: {new_head_report.capture_cached}",
        )
        seconds, outcomes = bench.naive(list(last.matrix.suites), args.naive_sample, args.seed,
                                        work / f"cache-{args.repeat - 1}")
        bench.warnings += _consistent(outcomes, last)
        per_suite = statistics.median(seconds)
        count = len(last.matrix.suites)
        naive = Mode(
            "naive: fresh sandboxed process per suite x revision",
            [per_suite * count * 2],
            note=(
                f"extrapolated: median {per_suite:.2f} s per suite-revision over {len(seconds)} "
                f"one-suite jobs ({len(seconds) // 2} sampled suites x 2 revisions), x {count} x 2"
            ),
        )
        context = {
            "import_s": round(import_s, 3),
            "load_avg_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
            "naive_seconds": [round(s, 3) for s in seconds],
        }
        modes = [cold, warm, new_head, naive, capture_cold, capture_warm]
        return _summary(manifest, bench, modes, context, new_head_report.capture_cached)
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _summary(
    manifest: Manifest, bench: Bench, modes: list[Mode], context: dict[str, Any], new_head_cached: bool
) -> dict[str, Any]:
    cold, warm, _, naive, capture_cold, capture_warm = modes
    count = manifest.suite_count()
    ratios = {
        "naive_over_warm": naive.median / warm.median,
        "naive_2_workers_over_warm": naive.median / 2 / warm.median,
        "cold_over_warm": cold.median / warm.median,
        "capture_cold_over_warm": capture_cold.median / max(capture_warm.median, 1e-9),
    }
    targets = {
        "warm_under_10s": warm.median < WARM_TARGET_S,
        "naive_over_warm_at_least_20x": ratios["naive_over_warm"] >= NAIVE_RATIO_TARGET,
        "unchanged_ci_tree_costs_no_capture": new_head_cached
        and all(r["capture_cached"] for r in bench.reports if r["run"].startswith("warm")),
    }
    return {
        "command": " ".join(sys.argv),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "twin": {
            "suites": count,
            "scripts": len(manifest.scripts),
            "options": manifest.options,
            "validator_lines": manifest.validator_lines,
            "seed": manifest.seed,
            "new_rejection_scripts": manifest.scripts_expecting("new_rejection"),
            "validator_import_s": context["import_s"],
        },
        "load_avg_1m": context["load_avg_1m"],
        "result_verified": True,
        "modes": [m.row(count) for m in modes],
        "ratios": {k: round(v, 1) for k, v in ratios.items()},
        "targets": targets,
        "naive_seconds": context["naive_seconds"],
        "runs": bench.reports,
        "warnings": bench.warnings,
    }


def table(summary: dict[str, Any]) -> str:
    suites = summary["twin"]["suites"]
    lines = [
        f"prtriage check on the miles twin: {suites} suites x 2 revisions, "
        f"{summary['twin']['options']} options, miles_validate_args {summary['twin']['validator_lines']} "
        f"lines, {summary['machine']['cpus']} CPUs",
        f"importing the validator module with stubs: {summary['twin']['validator_import_s']:.2f} s; load "
        f"average (1 min) {summary['load_avg_1m']['before']} before, {summary['load_avg_1m']['after']} after",
        "",
        f"{'mode':<54} {'runs':>4} {'median s':>9} {'min s':>8} {'max s':>8} {'suites/s':>9}",
    ]
    for row in summary["modes"]:
        rate = "" if row["mode"].startswith("capture") else f"{row['suites_per_s']:>9}"
        lines.append(
            f"{row['mode']:<54} {row['runs']:>4} {row['median_s']:>9.2f} {row['min_s']:>8.2f} "
            f"{row['max_s']:>8.2f} {rate}"
        )
        if row["note"]:
            lines.append(f"    {row['note']}")
    ratios, targets = summary["ratios"], summary["targets"]
    lines += [
        "",
        f"naive / warm: {ratios['naive_over_warm']}x   (naive on 2 workers / warm: "
        f"{ratios['naive_2_workers_over_warm']}x)   cold / warm: {ratios['cold_over_warm']}x   "
        f"capture cold / warm: {ratios['capture_cold_over_warm']}x",
        "suites/s counts suites, each validated at both revisions",
        "targets: " + ", ".join(f"{name} {'MET' if ok else 'MISSED'}" for name, ok in targets.items()),
        "result verified: the incident suites, and only they, are new_rejection at the added assert",
    ]
    lines += [f"warning: {w}" for w in summary["warnings"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark prtriage check on the synthetic miles twin.")
    parser.add_argument("--suites", type=int, default=150)
    parser.add_argument("--naive-sample", type=int, default=20, help="suites measured the naive way")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the cold and of the warm check")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    parser.add_argument("--keep", action="store_true", help="keep the generated trees and caches")
    args = parser.parse_args(argv)
    return report_figures("bench_check", lambda: run(args), args.out, table)


def report_figures(name: str, measure: Callable[[], dict[str, Any]], out: Path,
                   table: Callable[[dict[str, Any]], str]) -> int:
    """The end of a benchmark's main(): OUT/<name>.json and the table, or no figures at all for a wrong
    result (exit 1)."""
    try:
        figures = measure()
    except WrongResult as exc:
        print(f"WRONG RESULT, timings discarded: {exc}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(table(figures))
    print(f"\nfigures written to {out / f'{name}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
