"""Evaluation of `prtriage init` on real repositories: the starter policy against the built-in one.

    .venv/bin/python scripts/eval_init.py radixark/miles=/tmp/miles@head-2026-08-21 \
        THUDM/slime=/tmp/slime pytorch/torchtitan=/tmp/torchtitan [--cache-dir DIR] \
        [--out benchmarks/out/eval_init.json]

Each argument is `owner/name=PATH[@REV]`: a git repository read at REV (default HEAD), or, given `PATH@tree`,
the directory as it is (a clone whose largest blobs are absent cannot be exported from git objects). For
each, `prtriage doctor` with the built-in `policies/owner/name.yml` and `prtriage init` (its starter written
to a temporary file) run on the same revision and cache; the table gives suites and base acceptance of both,
the starter's share of the built-in's suites (issue bar: at least 80%, with the same acceptance), its
rounds and its time. Not run by CI: it needs fetched repositories (the bundle's miles case is a CI test,
tests/realworld/test_miles_bundle.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def prtriage(*args: str, cache_dir: Path) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "app.cli", *args, "--format", "json", "--cache-dir",
                           str(cache_dir)], cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    try:
        return done.returncode, json.loads(done.stdout), seconds
    except json.JSONDecodeError:
        return done.returncode, {"error": done.stderr.strip().splitlines()[-1:]}, seconds


def revision_args(path: str, rev: str) -> list[str]:
    return ["--tree", path] if rev == "tree" else ["--repo", path, "--rev", rev]


def evaluate(name: str, path: str, rev: str, cache_dir: Path) -> dict[str, Any]:
    where = revision_args(path, rev)
    _, built_in, built_in_s = prtriage("doctor", *where, "--policy", str(ROOT / "policies" / f"{name}.yml"),
                                       cache_dir=cache_dir)
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "pr-triage.yml"
        status, starter, init_s = prtriage("init", *where, "--output", str(output), cache_dir=cache_dir)
    return {"repository": name, "rev": rev, "built_in": built_in.get("health"), "built_in_s": built_in_s,
            "init_status": status, "init": starter.get("health"), "rounds": starter.get("rounds"),
            "init_s": init_s, "error": starter.get("error")}


def row(result: dict[str, Any]) -> str:
    def figures(health: dict[str, Any] | None) -> str:
        if not health:
            return "-"
        return f"{health['suites']} suites, {100 * health['base']['accepted_share']:.1f}% accepted"
    built_in, starter = result["built_in"], result["init"]
    share = (f"{100 * starter['suites'] / built_in['suites']:.0f}%"
             if built_in and starter and built_in["suites"] else "-")
    rounds = len(result["rounds"] or [])
    return (f"| {result['repository']} | {figures(built_in)} | {figures(starter)} | {share} | "
            f"{rounds} | {result['init_s']:.0f} s | {result['init_status']} {result['error'] or ''} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repositories", nargs="+", metavar="owner/name=PATH[@REV]")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "prtriage-eval-init")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "eval_init.json")
    args = parser.parse_args(argv)
    results = []
    print("| repository | built-in policy | `prtriage init` | share of suites | rounds | init time | exit |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for spec in args.repositories:
        name, _, location = spec.partition("=")
        path, _, rev = location.partition("@")
        if not name or not path:
            parser.error(f"{spec}: expected owner/name=PATH[@REV]")
        results.append(evaluate(name, path, rev or "HEAD", args.cache_dir))
        print(row(results[-1]), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
