"""Evaluation of `prtriage check` on a real history: every first-parent commit that changes validation code.

    .venv/bin/python scripts/eval_real.py --repo /tmp/miles-full [--since 2026-08-01] [--limit N] \
        [--branch main] [--newest-first] [--policy policies/radixark/miles.yml] [--cache-dir DIR] \
        [--out benchmarks/out/eval_real.json]
    .venv/bin/python scripts/eval_real.py --repo /tmp/slime --since 2026-07-01 --newest-first \
        --policy policies/THUDM/slime.yml --out benchmarks/out/eval_slime.json
    .venv/bin/python scripts/eval_real.py --repo /tmp/torchtitan --since 2026-07-01 --newest-first \
        --limit 20 --policy policies/pytorch/torchtitan.yml --exclude-path tests/assets/c4_test/data.json \
        --out benchmarks/out/eval_torchtitan.json
    .venv/bin/python scripts/eval_real.py --repo /tmp/megatron --since 2026-08-01 --newest-first \
        --limit 5 --policy policies/NVIDIA/Megatron-LM.yml --out benchmarks/out/eval_megatron.json
    .venv/bin/python scripts/eval_real.py --repo /tmp/miles --since 2025-11-21 --until 2026-07-01 \
        --sample 10 --cache-dir /tmp/eval-cache --out benchmarks/out/eval_miles_history.json
    .venv/bin/python scripts/eval_real.py --table-from benchmarks/out/eval_real.json

A clone that lacks some blobs (a mirror without its largest files) cannot be exported whole: each
--exclude-path leaves one out, and the two revisions are exported and checked as trees (--base-tree,
--head-tree).

Selection. The first-parent commits of --branch between --since and --until (git's dates) are candidates.
With `--select code` (the default) a candidate is kept when its diff against its parent touches the policy's
listed `validation.paths` OR any Python, YAML or shell file (.py, .yaml, .yml, .sh): the listed paths are
today's, while the modules the validation imported at a base (the learned validation paths the harness
records in the cache) are known only to `check` itself, so the script hands every code change to `check`
and records what `check` decided: `validation_changed` and `analysed_because` (listed paths or learned
ones) of its report; a commit `check` left untouched is counted apart, not as analysed. `--select listed`
keeps only commits touching the listed paths (the former selection). Then `--limit N` keeps the newest N,
`--sample N` keeps N spread evenly over the selection (the first, the last and evenly between: the same N
for the same selection, no randomness), and `--newest-first` reverses the order.

Policy. `--policy FILE` is read once, from the file given (default: the built-in radixark/miles policy of
this checkout), and passed to every `check`: it is not the built-in policy as it stood at each base. With
`--repository OWNER/NAME` instead, `check` chooses at each base as the App does: the base's own
`.github/pr-triage.yml` when it has one, else this checkout's built-in policy for OWNER/NAME (still today's
file, not the one of the base's date: built-in policies live in this project, not in the repository). A
policy's snapshot date is that of this checkout's file; the history before it is what it was not tuned on.

For each selected commit, runs `prtriage check --repo REPO --base <parent> --head <commit> --format json` (one
cache dir shared by all, as the App's would be) and reports the commit's exit status, its suites, how many
the base accepts (CI starts them all: a base rejection the head does not fix is the analyser's blindness), the
base's errors grouped, its findings, its time, and the CI scripts (or yaml_args cases) captured with the rest
counted by reason. Not run by CI: it needs a fetched repository. The JSON is
rewritten after each commit, so a long run can be read while it goes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.analysis.core.model import Outcome
from app.analysis.core.policy import POLICIES_DIR, Policy, builtin_policy, load_policy
from app.analysis.verdict.health import BaseFailure, describe, group_errors

POLICY = POLICIES_DIR / "radixark" / "miles.yml"
GOOD_SHARE = 0.95  # base acceptance from which the analysis is taken to see the repository as CI does
TOP_ERRORS = 3
FILE_WORD = re.compile(r"[\w./-]+\.(?:ya?ml|py|sh|json)\b")


@dataclass(frozen=True)
class Commit:
    sha: str
    parent: str
    subject: str


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


CODE_SUFFIXES = (".py", ".yaml", ".yml", ".sh")


def first_parent_commits(repo: Path, branch: str, since: str, until: str | None = None) -> list[Commit]:
    """Oldest first; a root commit has no parent to compare with and is left out."""
    window = [f"--since={since}", *([f"--until={until}"] if until else [])]
    out = git(repo, "log", "--first-parent", "--reverse", *window, "--format=%H%x00%P%x00%s", branch, "--")
    commits = []
    for line in out.splitlines():
        sha, parents, subject = line.split("\0", 2)
        if parents:
            commits.append(Commit(sha, parents.split()[0], subject))
    return commits


def changes_validation(repo: Path, commit: Commit, policy: Policy, select: str = "listed") -> bool:
    """Whether COMMIT is a candidate: it touches the listed validation paths, or (`select="code"`) any code
    file, since the modules validation imports at a base are learned by `check`, not listed."""
    changed = git(repo, "diff", "--name-only", "--no-renames", commit.parent, commit.sha, "--").splitlines()
    if policy.touches_validation(changed):
        return True
    return select == "code" and any(path.endswith(CODE_SUFFIXES) for path in changed)


def evenly(items: list[Commit], n: int) -> list[Commit]:
    """N items spread evenly over ITEMS, the first and the last included; all of them when N covers them."""
    if n <= 0 or n >= len(items):
        return list(items)
    if n == 1:
        return [items[len(items) // 2]]
    step = (len(items) - 1) / (n - 1)
    return [items[round(i * step)] for i in range(n)]


def policy_options(args: argparse.Namespace) -> list[str]:
    """`--repository` lets `check` choose at each base (the base's own policy file, else the built-in one);
    otherwise the one file given judges every commit."""
    if args.repository:
        return ["--repository", args.repository]
    return ["--policy", str(args.policy)]


def selection_policy(args: argparse.Namespace) -> Policy:
    """The policy whose listed paths select commits: the file given, or the repository's built-in one."""
    if args.repository:
        owner, _, name = args.repository.partition("/")
        return load_policy(builtin_policy(owner, name))
    return load_policy(args.policy)


def check(repo: Path, commit: Commit, policy: list[str], cache_dir: Path, timeout: float,
          exclude: list[str]) -> tuple[int | None, dict[str, Any] | None, str, float]:
    """Exit status (None on timeout), the JSON report (None without one), stderr's tail, seconds."""
    options = [*policy, "--format", "json", "--cache-dir", str(cache_dir),
               "--no-progress"]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eval-trees-") as trees:
        if exclude:  # a mirror that lacks some blobs: both trees exported without them, checked as trees
            base, head = Path(trees) / "base", Path(trees) / "head"
            export(repo, commit.parent, base, exclude)
            export(repo, commit.sha, head, exclude)
            command = [*prtriage(), "check", "--base-tree", str(base), "--head-tree", str(head), *options]
        else:
            command = [*prtriage(), "check", "--repo", str(repo), "--base", commit.parent, "--head",
                       commit.sha, *options]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, None, f"timed out after {timeout:.0f} s", time.perf_counter() - started
    seconds = time.perf_counter() - started
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = None
    return done.returncode, report, done.stderr[-2000:], seconds


def export(repo: Path, sha: str, dest: Path, exclude: list[str]) -> None:
    """SHA's tree unpacked at DEST without the EXCLUDE paths (`git archive` pathspecs)."""
    dest.mkdir(parents=True)
    pathspecs = [".", *(f":(exclude){path}" for path in exclude)]
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha, "--", *pathspecs],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def prtriage() -> list[str]:
    """The installed command line of this interpreter's environment (what a user runs)."""
    script = Path(sys.executable).with_name("prtriage")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def base_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Base outcomes counted from `suites[*].base`, and the base's failures grouped by exception and line."""
    outcomes = {s["id"]: Outcome.from_json(s["base"]) for s in report["suites"]}
    counts = Counter(o.outcome for o in outcomes.values())
    failures = [BaseFailure(suite, o) for suite, o in outcomes.items() if o.outcome != "accepted"]
    suites = len(outcomes)
    return {
        "suites": suites, "base_accepted": counts["accepted"], "base_rejected": counts["rejected"],
        "base_error": counts["error"],
        "accepted_share": round(counts["accepted"] / suites, 4) if suites else None,
        "base_errors": [{"count": g.count, "error": describe(g.example)}
                        for g in group_errors(failures)[:TOP_ERRORS]],
    }


def findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"kind": f["kind"], "severity": f["severity"], "scripts": len(f["scripts"]),
             "suites": len(f["suites"]), "where": f"{f['path']}:{f['line']}" if f["path"] else None,
             "message": f["message"][:300]}
            for f in report["findings"]]


def evaluate(repo: Path, commit: Commit, args: argparse.Namespace, cache_dir: Path) -> dict[str, Any]:
    status, report, stderr, seconds = check(repo, commit, policy_options(args), cache_dir, args.timeout,
                                            args.exclude_path)
    row: dict[str, Any] = {"sha": commit.sha, "parent": commit.parent, "subject": commit.subject,
                           "exit": status, "seconds": round(seconds, 1)}
    if report is None:
        return {**row, "suites": 0, "accepted_share": None, "findings": [], "failure": stderr}
    if "error" in report:  # could not analyse: the report says why
        return {**row, "suites": 0, "accepted_share": None, "findings": [],
                "failure": f"{report['error']['kind']}: {report['error']['message'][:1500]}"}
    if not report["validation_changed"]:  # check's fast path: neither listed nor learned paths touched
        return {**row, "suites": 0, "accepted_share": None, "findings": findings(report),
                "validation_changed": False, "analysed_because": None}
    capture = report["capture"]
    return {**row, **base_figures(report), "findings": findings(report),
            "validation_changed": report["validation_changed"],
            "analysed_because": report.get("analysed_because"), "capture_cached": capture["cached"],
            "capture_failed": len(capture["failed"]), "capture": capture_figures(capture),
            "timing": report["timing"]}


def reason_kind(reason: str) -> str:
    """A capture reason without the file it names (`<file>: its script sets no X`): one count per cause."""
    return FILE_WORD.sub("<file>", reason.split("\n")[0])[:160]


def capture_figures(capture: dict[str, Any]) -> dict[str, Any]:
    """CI scripts or cases captured of those considered, and the rest counted by reason: what was left out
    and why (disabled by its CI, launching no entry, failed), the reason's first part, so a recipe's cases
    count together."""
    reasons: Counter[str] = Counter()
    for kind in ("no_entry", "failed", "partial"):
        reasons.update(f"{kind}: {reason_kind(item['reason'])}" for item in capture.get(kind, ()))
    return {"scripts": capture["scripts"], "captured": capture["captured"],
            "disabled": len(capture.get("disabled", ())), "not_captured": dict(reasons.most_common())}


def fixed_at_head(row: dict[str, Any]) -> int:
    """Suites the base rejects and the head accepts (`fixed` findings): the base's own breakage, which
    the harness saw (a revert's base), not its blindness."""
    return sum(f["suites"] for f in row["findings"] if f["kind"] == "fixed")


def below(row: dict[str, Any]) -> bool:
    """An analysed commit whose base accepts under 95%; untouched ones and those without a report (counted
    apart) are not."""
    if row.get("validation_changed") is False or "failure" in row:
        return False
    return row["accepted_share"] is None or row["accepted_share"] < GOOD_SHARE


def overall(rows: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in rows]
    analysed = [r for r in rows if r.get("validation_changed")]
    return {
        "commits": len(rows),
        # check's own decision: analysed (the change touches listed or learned validation paths), left
        # untouched, or no report at all
        "analysed": len(analysed),
        "untouched": sum(1 for r in rows if r.get("validation_changed") is False),
        "no_report": sum(1 for r in rows if "failure" in r),
        "blocking": [{"sha": r["sha"][:12], "kind": f["kind"], "where": f["where"]}
                     for r in rows for f in r["findings"] if f["severity"] == "blocking"],
        "base_acceptance_at_least_95": sum(1 for r in rows if not below(r) and r.get("validation_changed")),
        "below_95": [{"sha": r["sha"][:12], "accepted_share": r["accepted_share"],
                      "base_failures": r["suites"] - r.get("base_accepted", 0),
                      "fixed_at_head": fixed_at_head(r)} for r in rows if below(r)],
        "exit_statuses": dict(Counter(str(r["exit"]) for r in rows)),
        "median_s": round(statistics.median(seconds), 1) if seconds else None,
        "max_s": round(max(seconds), 1) if seconds else None,
    }


def table(rows: list[dict[str, Any]], total: dict[str, Any]) -> str:
    lines = [f"{'sha':<12} {'exit':>4} {'suites':>6} {'acc':>4} {'rej':>4} {'err':>4} {'share':>6} "
             f"{'s':>6}  findings / subject"]
    for r in rows:
        share = "-" if r["accepted_share"] is None else f"{r['accepted_share'] * 100:.0f}%"
        lines.append(f"{r['sha'][:12]} {r['exit']!s:>4} {r['suites']:>6} {r.get('base_accepted', 0):>4} "
                     f"{r.get('base_rejected', 0):>4} {r.get('base_error', 0):>4} {share:>6} "
                     f"{r['seconds']:>6.1f}  {r['subject'][:70]}")
        lines += [f"{'':>47}{f['kind']} {f['severity']}: {f['scripts']} scripts, {f['suites']} suites"
                  + (f" at {f['where']}" if f["where"] else "") for f in r["findings"]]
        if "capture" in r:
            c = r["capture"]
            lines.append(f"{'':>47}captured {c['captured']} of {c['scripts']} CI scripts/cases "
                         f"({c['disabled']} disabled by CI)")
            regrouped: Counter[str] = Counter()
            for why, n in c["not_captured"].items():
                regrouped[reason_kind(why)] += n
            lines += [f"{'':>47}not captured x{n}: {why}" for why, n in regrouped.most_common()]
        if "failure" in r:
            lines.append(f"{'':>47}not analysed: {r['failure'][-300:]}")
        if below(r):
            lines += [f"{'':>47}base error x{e['count']}: {e['error'][:160]}"
                      for e in r.get("base_errors", [])]
    lines += ["", f"{total.get('analysed', '?')} analysed by check, {total.get('untouched', '?')} left "
              f"untouched, {total.get('no_report', '?')} without a report; blocking findings: "
              f"{total.get('blocking', '?')}"]
    lines += [f"{total['commits']} commits; base acceptance >= 95%: "
              f"{total['base_acceptance_at_least_95']}; exit statuses {total['exit_statuses']}; "
              f"time median {total['median_s']} s, max {total['max_s']} s"]
    lines += [f"below 95%: {b['sha']}, {b['base_failures']} base failures, {b['fixed_at_head']} of them "
              "accepted at head (the base's own breakage)" for b in total["below_95"]]
    return "\n".join(lines)


def selected_commits(args: argparse.Namespace, policy: Policy) -> list[Commit]:
    commits = [c for c in first_parent_commits(args.repo, args.branch, args.since, args.until)
               if changes_validation(args.repo, c, policy, args.select)]
    commits = commits[-args.limit:] if args.limit else commits
    commits = evenly(commits, args.sample)
    # Newest first: a run stopped early has covered the history a pull request is judged against today.
    return commits[::-1] if args.newest_first else commits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="prtriage check on every commit of a real history that "
                                                 "changes validation code.")
    parser.add_argument("--repo", type=Path, help="a clone with the whole history (required to run)")
    parser.add_argument("--since", default="2026-08-01", help="first commit date (git's --since)")
    parser.add_argument("--until", help="last commit date (git's --until; default: none)")
    parser.add_argument("--limit", type=int, default=0, help="only the newest N such commits")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="N commits evenly spaced over the selected ones (deterministic)")
    parser.add_argument("--select", choices=("code", "listed"), default="code",
                        help="code: listed validation paths or any .py/.yaml/.yml/.sh change, check decides "
                             "(default); listed: the listed validation paths only")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--newest-first", action="store_true", help="check the newest commit first")
    parser.add_argument("--policy", type=Path, default=POLICY,
                        help="the policy file given, read once (not the built-in one as it was at each base)")
    parser.add_argument("--repository", metavar="OWNER/NAME",
                        help="instead of --policy: check picks at each base (the base's own "
                             ".github/pr-triage.yml, else this checkout's built-in policy for OWNER/NAME)")
    parser.add_argument("--cache-dir", type=Path, help="shared by every check (default: a temp dir)")
    parser.add_argument("--exclude-path", action="append", default=[], metavar="PATH",
                        help="check exported trees without PATH (a blob the clone lacks); repeatable")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for one check")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/eval_real.json"))
    parser.add_argument("--table-from", type=Path, metavar="JSON", help="print a saved run's table")
    args = parser.parse_args(argv)
    if args.table_from is not None:
        rows = json.loads(args.table_from.read_text())["commits"]
    elif args.repo is None:
        parser.error("--repo is required (or --table-from)")
    else:
        rows = run(args)
        print(f"written to {args.out}\n", file=sys.stderr)
    print(table(rows, overall(rows)))
    return 0


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    args.repo = args.repo.resolve()
    commits = selected_commits(args, selection_policy(args))
    log(f"{len(commits)} first-parent commits of {args.branch} since {args.since} until {args.until} "
        f"selected ({args.select}, sample {args.sample or 'all'})")
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="prtriage-eval-"))
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache_dir.chmod(0o755)  # the sandbox reads the unpacked trees as an unprivileged uid
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    try:
        for index, commit in enumerate(commits, 1):
            rows.append(evaluate(args.repo, commit, args, cache_dir))
            log(progress_line(index, len(commits), rows[-1]))
            write(args, rows)
    finally:
        if args.cache_dir is None:
            shutil.rmtree(cache_dir, ignore_errors=True)
    return rows


def progress_line(index: int, total: int, row: dict[str, Any]) -> str:
    if row.get("validation_changed") is False:
        share = "untouched (check's fast path)"
    elif row["accepted_share"] is None:
        share = "not analysed"
    else:
        share = f"base accepts {row['accepted_share']:.0%}"
    return (f"[{index}/{total}] {row['sha'][:12]} exit {row['exit']}, {row['suites']} suites, {share}, "
            f"{len(row['findings'])} findings, {row['seconds']:.1f} s: {row['subject'][:60]}")


def write(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    result = {"command": " ".join(sys.argv), "repo": str(args.repo), "branch": args.branch,
              "since": args.since, "until": args.until,
              "select": args.select, "sample": args.sample, "policy": args.repository or str(args.policy),
              "overall": overall(rows), "commits": rows}
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
