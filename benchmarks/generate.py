"""Generate a synthetic radixark/miles at real scale: a base tree, a head tree with the incident, a manifest.

    .venv/bin/python -m benchmarks.generate DEST [--suites 150] [--seed 7] [--verify]

DEST/base and DEST/head differ in one file, `miles/utils/arguments.py`: the head adds one assert after the
`--colocate` coercion of offload_train, rejecting LoRA + offload_train + --disable-weights-backuper. The
manifest (DEST/manifest.json, outside both trees) lists every CI script, what it launches and what the
verdict must say about each suite. Same arguments, same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.twin.options import SGLANG_OWN_OPTIONS, all_options
from benchmarks.twin.scripts import script_source
from benchmarks.twin.suites import Planner, ScriptPlan, choose_pool
from benchmarks.twin.support import MODELS, static_files
from benchmarks.twin.validator import INCIDENT_ASSERT, INCIDENT_MESSAGE, arguments_source

VALIDATOR_PATH = "miles/utils/arguments.py"
DEFAULT_SEED = 7


@dataclass(frozen=True)
class Manifest:
    """What was generated and what a correct `prtriage check` of base -> head reports."""

    root: Path
    seed: int
    scripts: list[dict[str, Any]]
    options: int
    validator_lines: int
    incident_lines: tuple[int, int]  # first and last head line of the added assert

    @property
    def base(self) -> Path:
        return self.root / "base"

    @property
    def head(self) -> Path:
        return self.root / "head"

    def enabled(self) -> list[dict[str, Any]]:
        return [s for s in self.scripts if not s["disabled"]]

    def suite_count(self) -> int:
        return sum(len(s["variants"]) for s in self.enabled())

    def scripts_expecting(self, expect: str) -> list[str]:
        return sorted(
            s["script"] for s in self.enabled() if any(v["expect"] == expect for v in s["variants"])
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "options": self.options,
            "validator_lines": self.validator_lines,
            "incident_lines": list(self.incident_lines),
            "suites": self.suite_count(),
            "new_rejection_scripts": self.scripts_expecting("new_rejection"),
            "rejected_both_scripts": self.scripts_expecting("rejected_both"),
            "disabled_scripts": sorted(s["script"] for s in self.scripts if s["disabled"]),
            "scripts": self.scripts,
        }

    @classmethod
    def load(cls, root: Path) -> Manifest:
        raw = json.loads((root / "manifest.json").read_text())
        return cls(
            root=root,
            seed=raw["seed"],
            scripts=raw["scripts"],
            options=raw["options"],
            validator_lines=raw["validator_lines"],
            incident_lines=tuple(raw["incident_lines"]),
        )


def generate_pair(
    dest: Path,
    *,
    suites: int = 150,
    seed: int = DEFAULT_SEED,
    options: int = 700,
    validator_lines: int = 3000,
    import_work: float = 1.0,
) -> Manifest:
    """Write DEST/base, DEST/head and DEST/manifest.json; `suites` CI scripts, as many enabled suites."""
    if suites < 20:
        raise ValueError("at least 20 suites: the incident, decoys and broken suites need room")
    option_list = all_options(options, random.Random(seed))
    pool = choose_pool(option_list, random.Random(seed + 1))
    plans = Planner(suites, pool, random.Random(seed + 2)).plans()
    files = static_files(random.Random(seed + 3), import_work)
    files.update({plan.path: script_source(plan) for plan in plans})
    base_source = arguments_source(
        option_list, set(pool), head=False, seed=seed + 4, validator_lines=validator_lines
    )
    head_source = arguments_source(
        option_list, set(pool), head=True, seed=seed + 4, validator_lines=validator_lines
    )
    _write_tree(dest / "base", {**files, VALIDATOR_PATH: base_source})
    _write_tree(dest / "head", {**files, VALIDATOR_PATH: head_source})
    manifest = Manifest(
        root=dest,
        seed=seed,
        scripts=[_script_json(p) for p in plans],
        options=len(option_list) + len(SGLANG_OWN_OPTIONS),
        validator_lines=_function_lines(base_source, "miles_validate_args"),
        incident_lines=_incident_lines(head_source),
    )
    (dest / "manifest.json").write_text(json.dumps(manifest.to_json(), indent=1) + "\n")
    return manifest


def _script_json(plan: ScriptPlan) -> dict[str, Any]:
    raw = plan.to_json()
    model_argv = plan.model.argv() if plan.backend == "megatron" else []
    for variant in raw["variants"]:
        variant["model_argv"] = model_argv
    return raw


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in sorted(files.items()):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for model in MODELS:
        (root / "scripts" / "models" / f"{model.type}.sh").chmod(0o755)


def _function_lines(source: str, name: str) -> int:
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines)
    )
    return end - start


def _incident_lines(head_source: str) -> tuple[int, int]:
    first = head_source.index(INCIDENT_ASSERT)
    start = head_source.count("\n", 0, first) + 1
    assert INCIDENT_MESSAGE in INCIDENT_ASSERT
    return start, start + INCIDENT_ASSERT.count("\n") - 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--suites", type=int, default=150)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--options", type=int, default=700)
    parser.add_argument("--validator-lines", type=int, default=3000)
    parser.add_argument(
        "--import-work",
        type=float,
        default=1.0,
        help="Scale of the work done at import of the validator module (1.0: about 0.8 s).",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="Run every script and suite through a plain (unsandboxed) stand-in harness and "
        "check the manifest's expectations.",
    )
    args = parser.parse_args(argv)
    manifest = generate_pair(
        args.dest,
        suites=args.suites,
        seed=args.seed,
        options=args.options,
        validator_lines=args.validator_lines,
        import_work=args.import_work,
    )
    print(
        f"generated {args.dest}/base and {args.dest}/head: {len(manifest.scripts)} CI scripts, "
        f"{manifest.suite_count()} suites, {manifest.options} options, miles_validate_args "
        f"{manifest.validator_lines} lines; incident at head {VALIDATOR_PATH}:{manifest.incident_lines[0]}"
    )
    if args.verify:
        from benchmarks.twin.selfcheck import verify

        problems = verify(manifest)
        for problem in problems:
            print(f"PROBLEM: {problem}", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
