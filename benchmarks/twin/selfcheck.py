"""Checks that a generated twin is what its manifest says, without prtriage's engine.

Bash expands every model file to the argv the manifest expects; every CI script, run with the launch
recorded, yields the manifest's launches; every suite is accepted or rejected at base and head as planned,
with the incident suites rejected at the added assert. A generator bug shows here, an engine bug does not.
"""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.analysis.core.policy import load_policy
from benchmarks.twin.support import HEAVY_IMPORTS, MODELS

if TYPE_CHECKING:
    from benchmarks.generate import Manifest

STANDIN = Path(__file__).with_name("standin.py")
POLICY = Path(__file__).with_name("policy.yml")  # the twin's own, not the real miles policy
EXTRA_STUBS = ("megatron", "sglang", "sglang_router", "ray", "transformers")


def expected_suites(manifest: Manifest) -> list[dict[str, Any]]:
    """One entry per enabled suite: id, script, entry, argv, env, expect."""
    suites = []
    for script in manifest.enabled():
        for index, variant in enumerate(script["variants"]):
            suites.append(
                {
                    "id": f"{script['script']}#{index}",
                    "script": script["script"],
                    "entry": script["train_script"],
                    "expect": variant["expect"],
                    "argv": variant["model_argv"] + shlex.split(variant["train_args"]),
                    "env": script["extra_env"],
                }
            )
    return suites


def verify(manifest: Manifest) -> list[str]:
    """Problems found (empty when the twin is right); prints the stand-in's import time."""
    problems = _check_model_files(manifest.base)
    problems += _check_scripts(manifest)
    suites = expected_suites(manifest)
    for revision in ("base", "head"):
        result = _run(manifest.root / revision, {"mode": "validate", "suites": suites})
        print(f"{revision}: import of miles.utils.arguments with stubs took {result['import_seconds']:.2f} s")
        for suite in suites:
            problems += _check_outcome(revision, suite, result["outcomes"][suite["id"]], manifest)
    return problems


def import_seconds(repo: Path, runs: int = 3) -> float:
    """Median wall time of importing the twin's validator module with stubs, in a fresh process each."""
    samples = [float(_run(repo, {"mode": "validate", "suites": []})["import_seconds"]) for _ in range(runs)]
    return statistics.median(samples)


def _job(repo: Path, extra: dict[str, Any]) -> dict[str, Any]:
    policy = load_policy(POLICY)
    fixtures = [(f.path, f.text()) for f in policy.harness.fixtures]
    hf_config = next(f.content for f in policy.harness.fixtures if f.name == "hf_config")
    stubs = sorted(
        {name.split(".")[0] for names in HEAVY_IMPORTS.values() for name in names} | set(EXTRA_STUBS)
    )
    return {
        "repo": str(repo),
        "stub": stubs,
        "fixtures": fixtures,
        "hf_config": hf_config,
        "existing_prefixes": policy.harness.existing_path_prefixes,
        "attribute_defaults": policy.validation.attribute_defaults,
        **extra,
    }


def _run(repo: Path, extra: dict[str, Any]) -> Any:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
        json.dump(_job(repo, extra), handle)
        handle.flush()
        done = subprocess.run(
            [sys.executable, "-B", str(STANDIN), handle.name],
            capture_output=True,
            text=True,
            check=False,
            cwd=repo,
        )
    if done.returncode != 0:
        raise RuntimeError(f"stand-in harness failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check_model_files(repo: Path) -> list[str]:
    problems = []
    for model in MODELS:
        done = subprocess.run(
            [
                "bash",
                "-c",
                f'source "{repo}/scripts/models/{model.type}.sh" && printf "%s\\0" "${{MODEL_ARGS[@]}}"',
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        words = done.stdout.split("\0")[:-1]
        if words != model.argv():
            problems.append(f"scripts/models/{model.type}.sh expands to {words}, expected {model.argv()}")
    return problems


def _check_scripts(manifest: Manifest) -> list[str]:
    results = _run(manifest.base, {"mode": "scripts", "scripts": [s["script"] for s in manifest.scripts]})
    problems = []
    for script in manifest.scripts:
        result = results[script["script"]]
        if "error" in result:
            problems.append(f"{script['script']} failed: {result['error']}")
            continue
        launches = result["ok"]["launches"]
        expected = [
            (shlex.split(v["train_args"]), script["model_type"], script["train_script"], script["extra_env"])
            for v in script["variants"]
        ]
        actual = [
            (shlex.split(la["train_args"]), la["model_type"], la["train_script"], la["extra_env"])
            for la in launches
        ]
        if actual != expected:
            problems.append(f"{script['script']} launched {actual}, expected {expected}")
        registered = result["ok"]["registration"]
        if len(registered) != 1 or bool(registered[0]["disabled"]) != bool(script["disabled"]):
            problems.append(f"{script['script']} registered {registered}")
    return problems


def _check_outcome(
    revision: str, suite: dict[str, Any], result: dict[str, Any], manifest: Manifest
) -> list[str]:
    if "error" in result:
        return [f"{revision} {suite['id']}: stand-in child failed: {result['error']}"]
    outcome = result["ok"]
    rejected = suite["expect"] == "rejected_both" or (
        revision == "head" and suite["expect"] == "new_rejection"
    )
    if rejected != (outcome["outcome"] == "rejected"):
        return [f"{revision} {suite['id']} ({suite['expect']}): got {outcome}"]
    first, last = manifest.incident_lines
    if (
        revision == "head"
        and suite["expect"] == "new_rejection"
        and not first <= (outcome["line"] or 0) <= last
    ):
        return [f"head {suite['id']}: rejected at line {outcome['line']}, not at the incident {first}-{last}"]
    return []
