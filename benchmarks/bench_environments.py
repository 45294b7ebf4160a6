"""Benchmark: an analysis environment's cold build and its warm reuse, as a check pays them.

    .venv/bin/python -m benchmarks.bench_environments [--policy policies/radixark/miles.yml] [--repeat 5]

Cold: `prepare()` of the policy's environment in an empty environments directory (pip's own download and
wheel cache stay as they are: a first check on a machine that has built another environment). Warm: what a
check pays when the environment is there, measured as a check meets it, in a fresh process: the wall time
of `python -c "import the engine; prepare(...)"` minus that of the same process without the `prepare()`
call (interpreter start and imports), median of --repeat pairs, interleaved. Figures in
benchmarks/out/bench_environments.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IMPORTS = "from pathlib import Path; from app.analysis.core.policy import load_policy; " \
          "from app.engine.environments import prepare; policy = load_policy(Path({policy!r}))"
PREPARE = "; prepare(policy.harness, None, Path({cache!r}))"


def timed(code: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def measure(policy: Path, repeat: int, work: Path) -> dict[str, Any]:
    env = {**os.environ, "PRTRIAGE_ENV_DIR": str(work / "envs")}
    imports = IMPORTS.format(policy=str(policy.resolve()))
    with_prepare = imports + PREPARE.format(cache=str(work / "cache"))
    cold = timed(with_prepare, env)
    marker = next((work / "envs").glob("*/prtriage-env.json"))
    built = json.loads(marker.read_text())
    warm, bare = [], []
    for _ in range(repeat):
        warm.append(timed(with_prepare, env))
        bare.append(timed(imports, env))
    return {"command": " ".join(sys.argv), "policy": str(policy), "requirements": built["requirements"],
            "installed": len(built["installed"]), "cold_build_s": round(cold, 2),
            "warm_process_s": [round(value, 3) for value in warm],
            "same_process_without_prepare_s": [round(value, 3) for value in bare],
            "warm_reuse_s": round(statistics.median(warm) - statistics.median(bare), 3),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--policy", type=Path, default=ROOT / "policies" / "radixark" / "miles.yml")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prtriage-bench_environments-") as scratch:
        result = measure(args.policy, args.repeat, Path(scratch))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_environments.json").write_text(json.dumps(result, indent=2) + "\n")
    reuse_ms = result["warm_reuse_s"] * 1000
    print(f"{args.policy.name}: {len(result['requirements'])} requirements, {result['installed']} installed; "
          f"cold build {result['cold_build_s']:.1f} s; warm reuse adds {reuse_ms:.0f} ms to a process "
          f"(median of {args.repeat}); load {result['load_avg_1m']}")


if __name__ == "__main__":
    main()
