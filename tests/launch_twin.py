"""Small real git repositories whose CI scripts launch `train.py --tp 2` and `--tp 4`, with a policy naming no
validator (each launch runs until training would start), checked through the real `prtriage check`.

Shared by the twins of entry-to-boundary validation (test_twin_boundary), older layouts (test_twin_layout)
and stubbed upstream parsers (test_twin_stubbed_upstream): a pull request refusing one of the two suites
must come out as exactly one blocking new rejection of that suite.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Any

from twin.cli import CliRun, prtriage

ARGPARSE_TRAIN = '''\
import argparse

import torch
import torch.distributed as dist


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--world", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4)
    return parser.parse_args()


def validate(args):
    assert args.world % args.tp == 0, "world size must divide by tp"
    if args.lr <= 0:
        raise ValueError("lr must be positive")


def main():
    args = parse_args()
    validate(args)
    dist.init_process_group(backend="nccl")
    model = torch.nn.Linear(4, 4)
    for step in range(10 ** 9):  # training: never reached in the sandbox
        model(step)


if __name__ == "__main__":
    main()
'''
CI_SCRIPT = '''\
import subprocess

subprocess.run(["python3", "train.py", "--tp", "{tp}", "--world", "8"], check=True)
'''
MARKER = '    assert args.world % args.tp == 0, "world size must divide by tp"\n'  # the validator's last
NEW_ASSERT = '    assert args.tp < 4, "tp 4 is not supported yet"\n'
REFUSED = ["tests/test_tp4.py"]  # the suite NEW_ASSERT rejects


def launch_policy(scripts: str = "tests/test_*.py", stub_modules: str = "torch", validation: str = "",
                  comment: str = "no validator named: each launch runs until training would start") -> str:
    """The policy's YAML: CI's SCRIPTS record their launches of train.py; VALIDATION: its lines, if any."""
    return (f"# {comment}\nversion: 1\n{validation}"
            "matrix:\n  sources:\n    - kind: record_launches\n"
            f"      scripts: [\"{scripts}\"]\n      entry: '(^|/)train\\.py$'\n"
            f"harness:\n  stub_modules: [{stub_modules}]\n  limits: {{suite_seconds: 30}}\n")


def ci_scripts(directory: str = "tests") -> dict[str, str]:
    """CI scripts launching train.py with --tp 2 and --tp 4, by path."""
    return {f"{directory}/test_tp{tp}.py": CI_SCRIPT.replace("{tp}", str(tp)) for tp in (2, 4)}


def write_repo(root: Path, files: dict[str, str]) -> Path:
    """A repository of `files` under `root`/repo, readable by the sandbox's unprivileged uid."""
    repo = root / "repo"
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for directory in [root, *(p for p in repo.rglob("*") if p.is_dir()), repo]:
        directory.chmod(0o755)
    return repo


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    """Everything in the work tree committed; the new commit's sha."""
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def base_repo(root: Path, files: dict[str, str], message: str = "base") -> Path:
    """`write_repo`'s repository with FILES committed on `main`."""
    repo = write_repo(root, files)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, message)
    return repo


def pull_request(repo: Path, path: str, added: str) -> None:
    """On a branch `pr` from `main`, ADDED after the validator's last assert (MARKER) in PATH."""
    git(repo, "checkout", "-qb", "pr")
    changed = repo / path
    changed.write_text(changed.read_text().replace(MARKER, MARKER + added))
    commit(repo, "change the validator")


def check(tmp_path: Path, repo: Path, policy: str, base: str = "main", head: str = "pr",
          form: str = "json") -> CliRun:
    """`prtriage check` of BASE..HEAD under POLICY (YAML text, written to tmp_path/policy.yml)."""
    written = tmp_path / "policy.yml"
    written.write_text(policy)
    return prtriage("check", "--repo", str(repo), "--base", base, "--head", head, "--policy", str(written),
                    "--format", form, cache_dir=tmp_path / "cache")


def one_blocking_rejection(run: CliRun, suites: list[str] = REFUSED) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report of a check that saw both base suites accepted and blocks on exactly one new rejection,
    of SUITES; and that finding."""
    assert run.returncode == 1, run.describe()
    report = run.json()
    assert report["health"]["could_analyse"] is True, report["health"]["reason"]
    assert report["health"]["base"]["accepted"] == 2
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert (finding["kind"], finding["suites"]) == ("new_rejection", suites)
    return report, finding
