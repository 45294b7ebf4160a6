"""Which CI scripts a workflow_steps policy captures at one revision, and why the others are not captured.

    .venv/bin/python scripts/eval_steps.py --repo /tmp/verl --rev main --policy policies/volcengine/verl.yml \
        [--cache-dir DIR] [--out benchmarks/out/steps_verl.json]

Lists the policy's workflow steps on the exported tree (as capture does), runs `prtriage doctor --format json`
there, and prints for each CI script the steps that run it, how many yielded suites, and for a script none of
whose steps did, the reasons its steps gave (a launch of another entry, a failure). A script counts as
captured when one of its steps yields a suite. Not run by CI: it needs a fetched repository.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from app.analysis.core.policy import load_policy
from app.analysis.sources.workflow_steps import list_steps
from app.analysis.sources.workflow_steps_keys import WorkflowSteps

_LAUNCHED = re.compile(r"launched (.*), not the entry")


def export(repo: Path, rev: str, dest: Path) -> None:
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def steps_by_script(tree: Path, source: WorkflowSteps) -> dict[str, list[str]]:
    files = [p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()]
    items, _ = list_steps(files, lambda path: (tree / path).read_text(encoding="utf-8", errors="replace"),
                          source)
    by_script: dict[str, list[str]] = defaultdict(list)
    for item in items:
        for script in item["scripts"]:
            by_script[script].append(item["id"])
    return by_script


def reason(text: str) -> str:
    """A step's reason, without its label: which other entries it launched, or its failure."""
    launched = _LAUNCHED.search(text)
    if launched:
        others = [word for word in launched.group(1).split(", ") if word not in ("ray stop",)]
        return "launches no PPO entry: " + (", ".join(others) or "nothing (stopped before its launch)")
    return text.split(":", 1)[0][:120]


def evaluate(tree: Path, policy_path: Path, cache_dir: Path) -> dict[str, Any]:
    policy = load_policy(policy_path)
    sources = [s for s in policy.matrix.sources if isinstance(s, WorkflowSteps)]
    by_script: dict[str, list[str]] = defaultdict(list)
    for source in sources:
        for script, labels in steps_by_script(tree, source).items():
            by_script[script] += labels
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "app.cli", "doctor", "--tree", str(tree), "--policy",
                           str(policy_path), "--cache-dir", str(cache_dir), "--format", "json"],
                          capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    health = json.loads(done.stdout)["health"]
    scripts = health["scripts"]
    not_captured = {f["script"]: f["reason"] for kind in ("no_entry", "failed") for f in scripts[kind]}
    rows = []
    for script, labels in sorted(by_script.items()):
        captured = [label for label in labels if label not in not_captured]
        reasons = Counter(reason(not_captured[label]) for label in labels if label in not_captured)
        rows.append({"script": script, "steps": len(labels), "captured_steps": len(captured),
                     "reasons": dict(reasons)})
    base = health["base"]
    return {"scripts": rows, "suites": health["suites"], "steps": scripts["considered"],
            "base_accepted": base.get("accepted"), "doctor_seconds": round(seconds, 1),
            "exit": done.returncode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--rev", default="main")
    parser.add_argument("--policy", type=Path, default=Path("policies/volcengine/verl.yml"))
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="eval-steps-") as scratch:
        tree = Path(scratch) / "tree"
        tree.mkdir()
        export(args.repo, args.rev, tree)
        result = evaluate(tree, args.policy.resolve(), args.cache_dir or Path(scratch) / "cache")
    result["rev"] = args.rev
    rows = result["scripts"]
    covered = sum(1 for row in rows if row["captured_steps"])
    for row in rows:
        why = "; ".join(f"{count}x {text}" for text, count in row["reasons"].items())
        print(f"{row['captured_steps']:>2}/{row['steps']:<2} {row['script']}" + (f"  ({why})" if why else ""))
    print(f"{covered} of {len(rows)} CI scripts captured ({covered / max(1, len(rows)):.0%}); "
          f"{result['suites']} suites from {result['steps']} steps; base accepts {result['base_accepted']}; "
          f"doctor {result['doctor_seconds']} s")
    result["scripts_captured"] = covered
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
