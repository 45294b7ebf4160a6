"""Benchmark: a warm `prtriage check` on a fetched repository, its policy as written against the same policy
without the replacements that serve speed (`memoize`, `identity_decorator`): the baseline.

    .venv/bin/python -m benchmarks.bench_policy_speed --repo /tmp/megatron --base d98e8a64dd~1 \
        --head d98e8a64dd --policy policies/NVIDIA/Megatron-LM.yml [--repeat 3] [--out benchmarks/out/]

Not run by CI (it needs a fetched repository and CPU torch). One cache dir is filled by a first check (not
timed), then the two policies are checked in turn, interleaved, `--repeat` times each: trees and matrix are
cached for both (the matrix cache key does not cover `validation.replace`); the base's results of an
earlier check are not (`validation_cache`, emptied before each run): both revisions are validated. Each
pair must agree suite by suite, at base and at head, and with the same findings: a speed-up that changes an
answer is a wrong result, exit 1 with no figures. Prints medians, the ratio baseline / policy and the
machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

SPEED_KINDS = frozenset({"memoize", "identity_decorator"})


class WrongResult(Exception):
    """The two policies answered differently."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def baseline_policy(policy: Path, out: Path) -> int:
    """Write POLICY without its speed replacements to OUT; how many were left out."""
    document = yaml.safe_load(policy.read_text())
    replace = document.get("validation", {}).get("replace") or []
    kept = [r for r in replace if r.get("with") not in SPEED_KINDS]
    document["validation"]["replace"] = kept
    out.write_text(yaml.safe_dump(document, sort_keys=False))
    return len(replace) - len(kept)


def check(args: argparse.Namespace, policy: Path, cache_dir: Path) -> tuple[float, dict[str, Any]]:
    shutil.rmtree(cache_dir / "validation", ignore_errors=True)  # both revisions validated, every run
    command = [sys.executable, "-m", "app.cli", "check", "--repo", str(args.repo), "--base", args.base,
               "--head", args.head, "--policy", str(policy), "--format", "json", "--cache-dir",
               str(cache_dir), "--no-progress"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    try:
        return elapsed, json.loads(done.stdout)
    except json.JSONDecodeError:
        raise WrongResult(f"{policy.name}: exit {done.returncode}, no JSON: {done.stderr[-2000:]}") from None


def answers(report: dict[str, Any]) -> dict[str, Any]:
    """What must not change: each suite's outcome at both revisions, and the findings."""
    suites = {s["id"]: (s["base"]["outcome"], s["base"].get("message"), s["head"]["outcome"],
                        s["head"].get("message")) for s in report["suites"]}
    findings = sorted((f["kind"], f["severity"], f.get("path"), f.get("line")) for f in report["findings"])
    return {"suites": suites, "findings": findings}


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    baseline = work / "baseline.yml"
    left_out = baseline_policy(args.policy, baseline)
    if not left_out:
        raise SystemExit(f"{args.policy}: no memoize or identity_decorator replacement to compare without")
    cache_dir = work / "cache"
    log("filling the cache (not timed)")
    _, first = check(args, args.policy, cache_dir)
    expected = answers(first)
    samples: dict[str, list[float]] = {"policy": [], "baseline": []}
    loads: list[float] = []
    for index in range(args.repeat):
        for label, policy in (("policy", args.policy), ("baseline", baseline)):
            elapsed, report = check(args, policy, cache_dir)
            if answers(report) != expected:
                raise WrongResult(f"{label} run {index + 1} answered differently from the first check")
            samples[label].append(round(elapsed, 2))
            loads.append(round(os.getloadavg()[0], 2))
            timing = report["timing"]
            log(f"  {label} {index + 1}/{args.repeat}: {elapsed:.1f} s (capture {timing['capture_s']:.1f} s, "
                f"base {timing['base_s']:.1f} s, head {timing['head_s']:.1f} s), load {loads[-1]}")
    medians = {label: statistics.median(values) for label, values in samples.items()}
    return {"command": " ".join(sys.argv), "repo": str(args.repo), "base": args.base, "head": args.head,
            "policy": str(args.policy), "replacements_left_out": left_out, "suites": len(first["suites"]),
            "samples_s": samples, "median_s": medians, "baseline_over_policy": medians["baseline"] /
            medians["policy"], "load_avg_1m": loads, "cpus": os.cpu_count()}


def main() -> None:
    bench_main("bench_policy_speed", __doc__, measure, lambda result: (
        f"{result['suites']} suites; warm check median {result['median_s']['policy']:.1f} s with the policy, "
        f"{result['median_s']['baseline']:.1f} s without its {result['replacements_left_out']} speed "
        f"replacements: x{result['baseline_over_policy']:.2f}; load {result['load_avg_1m']}"))


def bench_main(name: str, doc: str | None, measure: Callable[[argparse.Namespace, Path], dict[str, Any]],
               summary: Callable[[dict[str, Any]], str],
               more_arguments: Callable[[argparse.ArgumentParser], object] = lambda parser: None) -> None:
    """The main() of a warm-check benchmark on a fetched repository: --repo, --base, --head, --policy (and
    MORE_ARGUMENTS), --repeat, --out; the figures in OUT/<name>.json, none for a wrong result (exit 1)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--base", required=True)
    parser.add_argument("--head", required=True)
    parser.add_argument("--policy", type=Path, required=True)
    more_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix=f"prtriage-{name}-") as scratch:
        work = Path(scratch)
        work.chmod(0o755)  # the sandbox reads the trees as an unprivileged uid
        try:
            result = measure(args, work)
        except WrongResult as exc:
            log(f"wrong result: {exc}")
            raise SystemExit(1) from None
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(summary(result))


if __name__ == "__main__":
    main()
