"""Are `prtriage doctor`'s hints right? Each error the starter policy meets, its hint, and whether the key the
hint names made the error go away.

    python scripts/eval_hints.py radixark/miles=/tmp/miles@head-2026-08-21 NVIDIA-NeMo/RL=/tmp/nemo \
        [--cache-dir DIR] [--out benchmarks/out/eval_hints.json]

Each argument is `owner/name=PATH[@REV]` (a git repository read at REV, default HEAD). For each:
1. `prtriage init --rounds 1`: the starter as detected, measured once; `doctor` on it lists every base error
   group and capture failure with its hint (app/analysis/verdict/doctor.py). Then `init --rounds 2, 3 ...`:
   the policy each refine round made of the one before, each doctored the same way, until a round adds
   nothing (or --rounds).
2. Each error is judged at the last round it occurs in: its hint's keys applied alone to that round's
   policy, with the values the refine round gave them, else the built-in policy's (`policies/owner/name.yml`,
   where there is one, added to what the policy has), then `doctor` again. An error is fixed when it no
   longer occurs (the suites it stopped may stop at a later error: the hint still moved them past this
   one). Errors no hint names are listed with the keys the whole round changed, if it removed them.

Prints a markdown table (error kind | hint | repositories | fixed or not) and writes the JSON with every
diagnosis. Not run by CI: it needs fetched repositories and minutes of each.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
# Keys a hint's key needs beside it to mean anything: a real package is installed by its requirement, and
# real torch comes with its limits and without its version stand-in.
COMPANIONS = {"harness.real_packages": ("harness.requirements", "harness.limits", "harness.stub_attributes")}
TIMEOUT = 3600
TEMPORARY = re.compile(r"/tmp/[^\s'\"]+")
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def prtriage(*args: str, cache_dir: Path) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "app.cli", *args, "--format", "json", "--cache-dir",
                               str(cache_dir)], cwd=ROOT, capture_output=True, text=True, check=False,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return -1, {"error": f"timed out after {TIMEOUT} s"}, time.monotonic() - started
    seconds = time.monotonic() - started
    try:
        return done.returncode, json.loads(done.stdout), seconds
    except json.JSONDecodeError:
        return done.returncode, {"error": done.stderr.strip().splitlines()[-1:]}, seconds


def error_kind(diagnosis: dict[str, Any]) -> str:
    """The exception's name (a base error's is its text's first word; a capture failure's reason may
    carry one), with where it happened."""
    text = diagnosis["error"]
    match = re.match(r"(\w+(?:Error|Exception|Exit|Interrupt)|KeyError)\b", text) or \
        re.search(r"\b(\w+(?:Error|Exception))\b", text)
    # without one, an error of the harness itself (a policy key naming what the policy lacks)
    name = match.group(1) if match else "harness error"
    return name if diagnosis["where"] == "base" else f"{name} (capture {diagnosis['where']})"


def identity(diagnosis: dict[str, Any]) -> tuple[str, str, str]:
    """What makes an error the same in another run: a temporary file's name (`/tmp/session_metrics_pq...`)
    and a time (`pytest ran out of its 5.84375s`) differ between runs; a capture failure is its script's,
    told by its reason's start (which of a step's pytest runs ran out of time differs too)."""
    error = NUMBER.sub("N", TEMPORARY.sub("/tmp/...", diagnosis["error"]))
    return diagnosis["where"], diagnosis["subject"], error if diagnosis["where"] == "base" else error[:60]


def count_of(diagnosis: dict[str, Any], others: list[dict[str, Any]]) -> int:
    return sum(d["count"] for d in others if identity(d) == identity(diagnosis))


def flat(policy: dict[str, Any]) -> dict[str, Any]:
    """The policy by `section.key` (the level the hints name)."""
    return {f"{section}.{key}": value for section, body in policy.items() if isinstance(body, dict)
            for key, value in body.items()}


def changed_keys(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    old, new = flat(before), flat(after)
    return sorted(key for key in {*old, *new} if old.get(key) != new.get(key))


def with_keys(policy: dict[str, Any], keys: list[str], values: dict[str, Any],
              merge: bool = False) -> dict[str, Any]:
    """POLICY with KEYS set from VALUES (flat); MERGE: added to what the policy has rather than replacing."""
    result = copy.deepcopy(policy)
    for key in keys:
        if key not in values:
            continue
        section, _, name = key.partition(".")
        body = result.setdefault(section, {})
        body[name] = merged(key, body.get(name), values[key]) if merge else copy.deepcopy(values[key])
    return result


def merged(key: str, mine: Any, theirs: Any) -> Any:
    if key == "harness.requirements" and isinstance(mine, list) and isinstance(theirs, list):
        # one pin a distribution: the starter's where both pin it (two pins of one fail the install)
        pinned = {distribution(item) for item in mine}
        return [*mine, *(item for item in theirs if distribution(item) not in pinned)]
    if key == "harness.fixtures" and isinstance(mine, list) and isinstance(theirs, list):
        # the first fixture matching a path serves it: the built-in's specific paths before the starter's
        # general pattern; a name the starter has stays the starter's
        names = {item.get("name") for item in mine if isinstance(item, dict)} - {None}
        return [*(item for item in theirs if item not in mine and item.get("name") not in names), *mine]
    if isinstance(mine, list) and isinstance(theirs, list):
        return [*mine, *(item for item in theirs if item not in mine)]
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return {**mine, **theirs}
    return copy.deepcopy(theirs)


def distribution(requirement: Any) -> str:
    return re.split(r"[<>=!~\[; ]", str(requirement), maxsplit=1)[0].lower().replace("_", "-")


def with_companions(keys: list[str]) -> list[str]:
    return list(dict.fromkeys(k for key in keys for k in (key, *COMPANIONS.get(key, ()))))


class Repository:
    """One repository's runs, sharing a scratch directory and a cache."""

    def __init__(self, name: str, path: str, rev: str, cache_dir: Path, scratch: Path) -> None:
        self.name, self.cache_dir, self.scratch = name, cache_dir, scratch
        self.where = ["--repo", path, "--rev", rev]
        self.doctored: dict[str, dict[str, Any]] = {}
        self.seconds = 0.0

    def init(self, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
        output = self.scratch / f"init-{rounds}.yml"
        status, document, seconds = prtriage("init", *self.where, "--rounds", str(rounds), "--output",
                                             str(output), "--force", cache_dir=self.cache_dir)
        self.seconds += seconds
        document["status"] = status
        policy = yaml.safe_load(output.read_text()) if output.exists() else {}
        return policy, document

    def doctor(self, policy: dict[str, Any]) -> dict[str, Any]:
        """doctor's JSON for POLICY (each distinct policy measured once)."""
        text = yaml.safe_dump(policy, sort_keys=True)
        if text not in self.doctored:
            file = self.scratch / f"policy-{len(self.doctored)}.yml"
            file.write_text(text)
            status, document, seconds = prtriage("doctor", *self.where, "--policy", str(file),
                                                 cache_dir=self.cache_dir)
            self.seconds += seconds
            document.update(status=status, seconds=round(seconds, 1))
            self.doctored[text] = document
        return self.doctored[text]


def evaluate(name: str, path: str, rev: str, cache_dir: Path, rounds: int) -> dict[str, Any]:
    """Each error of each round's policy (init's starter, then what each refine round made of it), judged at
    the last round it occurs in: fixed by that round's refinement, or left at the end."""
    with tempfile.TemporaryDirectory(prefix="eval-hints-") as scratch:
        repository = Repository(name, path, rev, cache_dir, Path(scratch))
        policies: list[dict[str, Any]] = []
        for done in range(1, rounds + 2):  # the policy of round N+1 is what round N's refinement made
            policy, document = repository.init(done)
            if not policy:
                return {"repository": name, "rev": rev, "error": document.get("error"), "diagnoses": []}
            if policies and policy == policies[-1]:
                break
            policies.append(policy)
        doctored = [repository.doctor(policy) for policy in policies]
        built_in_file = ROOT / "policies" / f"{name}.yml"
        built_in = flat(yaml.safe_load(built_in_file.read_text())) if built_in_file.exists() else {}
        results = []
        for number, (policy, before) in enumerate(zip(policies, doctored, strict=True)):
            last = number == len(policies) - 1
            refined, after = (policy, before) if last else (policies[number + 1], doctored[number + 1])
            round_keys = changed_keys(policy, refined)
            left = {identity(d) for d in after.get("diagnoses", [])}
            for diagnosis in before.get("diagnoses", []):
                if last or identity(diagnosis) not in left:
                    results.append({"round": number + 1, **judge(diagnosis, repository, policy, refined,
                                                                 round_keys, built_in, after)})
        return {"repository": name, "rev": rev, "rounds": [summary(d) for d in doctored],
                "seconds": round(repository.seconds), "diagnoses": results}


def judge(diagnosis: dict[str, Any], repository: Repository, starter: dict[str, Any],
          refined: dict[str, Any], round_keys: list[str], built_in: dict[str, Any],
          after: dict[str, Any]) -> dict[str, Any]:
    """The diagnosis with its hint's keys tried (the refine round's values, else the built-in policy's)."""
    hint = diagnosis.get("hint") or {}
    # a hint may name a key below the level policies are compared at (`matrix.sources[].env`)
    keys = list(dict.fromkeys(".".join(key.replace("[]", "").split(".")[:2]) for key in hint.get("keys", [])))
    result = {**diagnosis, "kind": error_kind(diagnosis), "round_keys": round_keys,
              "after_round": count_of(diagnosis, after["diagnoses"]) if "diagnoses" in after else None}
    tried = [key for key in keys if key in round_keys]
    if tried:
        policy = with_keys(starter, with_companions(tried), flat(refined))
        result["applied"] = {"from": "refine round", "keys": tried}
    elif (tried := [key for key in keys if key in built_in]):
        policy = with_keys(starter, with_companions(tried), built_in, merge=True)
        result["applied"] = {"from": "built-in policy", "keys": tried}
    else:
        result["applied"] = None
        result["verdict"] = verdict(keys, None, result["after_round"], diagnosis["count"], round_keys)
        return result
    document = repository.doctor(policy)
    left = count_of(diagnosis, document.get("diagnoses", [])) if "diagnoses" in document else None
    result["after_hint"] = left
    result["hint_run"] = summary(document)
    result["verdict"] = verdict(keys, left, result["after_round"], diagnosis["count"], round_keys)
    return result


def verdict(keys: list[str], after_hint: int | None, after_round: int | None, count: int,
            round_keys: list[str]) -> str:
    if after_hint == 0:
        return "fixed by the hint's key"
    if after_hint is not None and after_hint < count:
        return f"fewer with the hint's key ({count} -> {after_hint})"
    others = f"the refine round's {', '.join(round_keys)}" if round_keys else "nothing"
    fixed_by_round = after_round == 0 and round_keys
    if not keys:
        return f"no hint; fixed by {others}" if fixed_by_round else "no hint; not fixed"
    if after_hint is None:
        return (f"hint's key has no value to try; fixed by {others}" if fixed_by_round
                else "hint's key has no value to try; not fixed")
    return f"not fixed by the hint's key; fixed by {others}" if fixed_by_round else "not fixed"


def summary(document: dict[str, Any]) -> dict[str, Any]:
    health = document.get("health") or {}
    base = health.get("base") or {}
    return {"status": document.get("status"), "suites": health.get("suites"),
            "accepted_share": base.get("accepted_share"), "error": document.get("error")}


def table(results: list[dict[str, Any]]) -> list[str]:
    """One row per error kind and hint: the repositories it was seen on, how many errors (the suites or
    scripts they stopped), and what each came to."""
    rows: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"repositories": set(), "verdicts": Counter(), "errors": 0, "stopped": 0})
    for repository in results:
        for d in repository["diagnoses"]:
            hint = " or ".join(f"`{key}`" for key in (d.get("hint") or {}).get("keys", [])) or "none"
            row = rows[(d["kind"], hint)]
            row["repositories"].add(repository["repository"].split("/")[-1])
            row["verdicts"][d["verdict"]] += 1
            row["errors"] += 1
            row["stopped"] += d["count"]
    lines = ["| error kind | hint | repositories | errors (suites or scripts) | fixed or not |",
             "| --- | --- | --- | --- | --- |"]
    for (kind, hint), row in sorted(rows.items()):
        verdicts = "; ".join(f"{n} {v}" for v, n in row["verdicts"].most_common())
        lines.append(f"| {kind} | {hint} | {', '.join(sorted(row['repositories']))} | "
                     f"{row['errors']} ({row['stopped']}) | {verdicts} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repositories", nargs="+", metavar="owner/name=PATH[@REV]")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "prtriage-eval-hints")
    parser.add_argument("--rounds", type=int, default=5, help="refine rounds to follow at most (init's "
                        "default)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "eval_hints.json")
    args = parser.parse_args(argv)
    results = []
    for spec in args.repositories:
        name, _, location = spec.partition("=")
        path, _, rev = location.partition("@")
        if not name or not path:
            parser.error(f"{spec}: expected owner/name=PATH[@REV]")
        results.append(evaluate(name, path, rev or "HEAD", args.cache_dir, args.rounds))
        print(f"{name}: {len(results[-1]['diagnoses'])} diagnoses, {results[-1].get('seconds')} s",
              file=sys.stderr, flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
    print("\n".join(table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
