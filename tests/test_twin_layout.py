"""A policy written after the repository's layout moved, checking a change made before the move.

Written after radixark/miles: its CI scripts were tests/test_*.py until 2026-01-23, then moved under
tests/e2e/<group>/; the built-in policy's `tests/e2e/**/test_*.py` matched nothing at the older revisions
("no CI suite captured at head", exit 3, on 10 of 30 sampled commits of its history). Here a real git
repository moves its CI scripts twice and its argument module once, after the change checked; the policy
names today's paths. The real command line, the real sandbox.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from launch_twin import (
    ARGPARSE_TRAIN,
    MARKER,
    NEW_ASSERT,
    base_repo,
    check,
    ci_scripts,
    commit,
    git,
    launch_policy,
    one_blocking_rejection,
)
from twin.cli import prtriage

from app.analysis.core.layout import Layout, follow_layout
from app.analysis.core.policy import POLICIES_DIR, Policy, load_policy
from app.trees.renames import earlier_paths, renamed_from

ARGUMENTS, TRAIN = ARGPARSE_TRAIN.split("\n\ndef main():")
TRAIN = "import torch\nimport torch.distributed as dist\n\nfrom arguments import parse_args, validate\n\n\n" \
        "def main():" + TRAIN
POLICY = launch_policy("tests/e2e/gpu/test_*.py", validation='validation:\n  paths: ["pkg/arguments.py"]\n',
                       comment="written at the newest revision: its paths are today's")


@pytest.fixture
def moved(tmp_path: Path) -> tuple[Path, str, str]:
    """main: the old layout (tests/test_tp*.py, arguments.py); the change refusing tp 4; the scripts moved
    to tests/e2e/; copied to tests/e2e/gpu/; the copies in tests/e2e/ deleted and arguments.py moved to pkg/.
    Returns the repository, the change's parent and the change."""
    repo = base_repo(tmp_path, {"arguments.py": ARGUMENTS, "train.py": TRAIN, **ci_scripts()}, "old layout")
    base = git(repo, "rev-parse", "HEAD")
    arguments = repo / "arguments.py"
    arguments.write_text(arguments.read_text().replace(MARKER, MARKER + NEW_ASSERT))
    head = commit(repo, "refuse tp 4")
    (repo / "tests" / "e2e").mkdir()
    for tp in (2, 4):
        git(repo, "mv", f"tests/test_tp{tp}.py", "tests/e2e/")
    commit(repo, "CI scripts under tests/e2e")
    # copied to their new place, the old ones deleted a commit later (miles' tests/e2e/image -> long, short)
    (repo / "tests" / "e2e" / "gpu").mkdir()
    for tp in (2, 4):
        shutil.copy(repo / "tests" / "e2e" / f"test_tp{tp}.py", repo / "tests" / "e2e" / "gpu")
    commit(repo, "CI scripts by runner")
    for tp in (2, 4):
        git(repo, "rm", "-q", f"tests/e2e/test_tp{tp}.py")
    (repo / "pkg").mkdir()
    git(repo, "mv", "arguments.py", "pkg/")
    (repo / "train.py").write_text(TRAIN.replace("from arguments", "from pkg.arguments"))
    commit(repo, "the old copies gone, arguments in pkg")
    for directory in [tmp_path, *(p for p in repo.rglob("*") if p.is_dir() and ".git" not in p.parts)]:
        directory.chmod(0o755)
    return repo, base, head


def test_renames_are_followed_through_each_move_and_copies_found(moved: tuple[Path, str, str]) -> None:
    repo, base, _ = moved
    # commit by commit, the moves alone: the copy-then-delete ends the scripts' chain at the deleted copies
    assert renamed_from(repo, base, "HEAD") == {
        "tests/e2e/test_tp2.py": "tests/test_tp2.py", "tests/e2e/test_tp4.py": "tests/test_tp4.py",
        "pkg/arguments.py": "arguments.py"}
    assert earlier_paths(repo, base, "HEAD") == {
        "tests/e2e/test_tp2.py": {"tests/test_tp2.py"}, "tests/e2e/test_tp4.py": {"tests/test_tp4.py"},
        "tests/e2e/gpu/test_tp2.py": {"tests/test_tp2.py"},
        "tests/e2e/gpu/test_tp4.py": {"tests/test_tp4.py"},
        "pkg/arguments.py": {"arguments.py"}}
    assert earlier_paths(repo, "HEAD", "HEAD") == {}


def test_a_change_before_the_move_is_analysed_with_the_scripts_at_their_older_paths(
        moved: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, base, head = moved
    report, finding = one_blocking_rejection(check(tmp_path, repo, POLICY, base, head))
    assert finding["path"] == "arguments.py"
    # never silent: what was followed, in the report
    scripts, paths = report["policy"]["followed"]
    assert scripts == (f"the policy's matrix.sources[0].scripts tests/e2e/gpu/test_*.py matched nothing at "
                       f"{head[:12]}; used the 2 files it matches today at their paths there, before they "
                       "were renamed or copied (tests/test_tp2.py, tests/test_tp4.py)")
    assert paths.startswith(f"the policy's validation.paths pkg/arguments.py matched nothing at {head[:12]}")
    assert paths.endswith("(arguments.py)")
    assert report["analysed_because"] == "touches arguments.py, a validation path"


def test_a_glob_that_moved_is_followed_beside_one_that_still_matches(
        moved: tuple[Path, str, str], tmp_path: Path) -> None:
    """Written after volcengine/verl: its policy's scripts key lists `tests/special_e2e/**/*.sh` (tests/e2e/
    before 2025-06) beside `examples/**/*.sh`, which matched at every revision; the key as a whole matching
    hid the move, and every commit of 2025-05/06 captured 0 suites (exit 3)."""
    repo, base, head = moved
    policy = tmp_path / "policy.yml"
    # `arguments.py` matches at the change (a script launching nothing: no suite) and not today (pkg/)
    policy.write_text(POLICY.replace('scripts: ["tests/e2e/gpu/test_*.py"]',
                                     'scripts: ["tests/e2e/gpu/test_*.py", "arguments.py", "docs/*.py"]'))
    run = prtriage("check", "--repo", str(repo), "--base", base, "--head", head, "--policy", str(policy),
                   "--format", "json", cache_dir=tmp_path / "cache")
    assert run.returncode == 1, run.describe()
    report = run.json()
    assert report["health"]["base"]["accepted"] == 2
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert (finding["kind"], finding["suites"]) == ("new_rejection", ["tests/test_tp4.py"])
    # the moved glob alone is named; `docs/*.py` matches nothing at either revision: no drift, no note
    assert report["policy"]["followed"][0] == (
        f"the policy's matrix.sources[0].scripts tests/e2e/gpu/test_*.py matched nothing at {head[:12]}; "
        "used the 2 files it matches today at their paths there, before they were renamed or copied "
        "(tests/test_tp2.py, tests/test_tp4.py)")


def test_a_lost_glob_with_no_older_file_beside_kept_ones_is_a_file_added_since() -> None:
    policy = Policy.model_validate(yaml.safe_load(POLICY.replace(
        'scripts: ["tests/e2e/gpu/test_*.py"]', 'scripts: ["tests/e2e/gpu/test_*.py", "tests/npu/*.py"]')))
    layout = Layout(present={"tests/e2e/gpu/test_tp2.py", "pkg/arguments.py"},
                    newer={"tests/e2e/gpu/test_tp2.py", "tests/npu/test_a.py", "pkg/arguments.py"},
                    renamed={}, revision="x")
    assert follow_layout(policy, layout) == (policy, ())


def test_without_history_the_policy_is_not_followed_and_says_what_matched_nothing(
        moved: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, base, head = moved
    trees = {}
    for name, sha in (("base", base), ("head", head)):
        trees[name] = tmp_path / name
        trees[name].mkdir()
        archive = subprocess.run(["git", "-C", str(repo), "archive", sha], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(trees[name])], input=archive.stdout, check=True)
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    run = prtriage("check", "--base-tree", str(trees["base"]), "--head-tree", str(trees["head"]), "--policy",
                   str(policy), "--format", "json", cache_dir=tmp_path / "cache")
    assert run.returncode == 3, run.describe()
    assert "0 CI scripts match tests/e2e/gpu/test_*.py" in run.stdout + run.stderr
    assert "no history" in run.stdout + run.stderr


def test_a_validator_the_revision_lacks_gives_way_to_each_launch_run_to_its_boundary(
        moved: tuple[Path, str, str], tmp_path: Path) -> None:
    """Written after NVIDIA/Megatron-LM: its policy's entry, parse_and_validate_args, did not exist yet at
    older revisions (exit 3, "the validation entry ... does not import", on its clean changes too)."""
    repo, base, head = moved
    named = POLICY.replace("validation:\n", 'validation:\n  entry: "arguments:parse_and_validate"\n')
    report, finding = one_blocking_rejection(check(tmp_path, repo, named, base, head))
    assert report["health"]["drift"] == [
        "validation.entry arguments:parse_and_validate: none exists at this revision; each launch ran to its "
        "training boundary instead"]
    assert finding["path"] == "arguments.py"


def test_a_validator_that_exists_and_fails_to_import_is_no_drift(moved: tuple[Path, str, str],
                                                                 tmp_path: Path) -> None:
    repo, _, _ = moved
    module = repo / "pkg" / "arguments.py"
    module.write_text(module.read_text() + "\nimport no_such_module_here\n")
    head = commit(repo, "breaks its own import")
    policy = tmp_path / "policy.yml"
    named = POLICY.replace("validation:\n", 'validation:\n  entry: "pkg.arguments:parse_args"\n')
    policy.write_text(named.replace("stub_modules: [torch]",
                                    "stub_modules: [torch]\n  stub_missing_modules: false"))
    run = prtriage("doctor", "--repo", str(repo), "--rev", head, "--policy", str(policy), "--format", "json",
                   cache_dir=tmp_path / "cache")
    assert run.returncode == 3, run.describe()
    assert "does not import" in run.stdout
    assert "training boundary instead" not in run.stdout


def test_recipes_of_a_yaml_args_source_are_followed_as_scripts_are() -> None:
    """NVIDIA/Megatron-LM's recipes sat in tests/test_utils/recipes/ before moving to per-runner directories
    (h100/, gb200/): its built-in policy's globs matched nothing at the older revisions."""
    policy = load_policy(POLICIES_DIR / "NVIDIA" / "Megatron-LM.yml")
    older = ["tests/test_utils/recipes/gpt.yaml", "tests/test_utils/recipes/moe.yaml"]
    layout = Layout(present={*older, "megatron/training/utils.py", "tests/test_utils/recipes/README.md"},
                    newer=["tests/test_utils/recipes/h100/gpt.yaml",
                           "tests/test_utils/recipes/gb200/gpt.yaml",
                           "tests/test_utils/recipes/h100/moe.yaml",
                           "tests/test_utils/recipes/h100/new.yaml", "megatron/training/utils/common.py"],
                    renamed={"tests/test_utils/recipes/h100/gpt.yaml": {older[0]},
                             "tests/test_utils/recipes/gb200/gpt.yaml": {older[0]},
                             "tests/test_utils/recipes/h100/moe.yaml": {older[1]},
                             "megatron/training/utils/common.py": {"megatron/training/utils.py"}},
                    revision="a62e23756af5")
    followed, notes = follow_layout(policy, layout)
    assert followed.matrix.sources[0].recipes == older
    assert "megatron/training/utils.py" in followed.validation.paths
    assert set(followed.validation.paths) - set(policy.validation.paths) == {"megatron/training/utils.py"}
    assert [note.split(" matched")[0] for note in notes] == [
        "the policy's matrix.sources[0].recipes tests/test_utils/recipes/h100/*.yaml, "
        "tests/test_utils/recipes/gb200/*.yaml", "the policy's validation.paths megatron/training/utils/**"]
    # at a revision whose layout the globs match, the policy is the same object
    assert follow_layout(followed, Layout(older, [], {}, "x")) == (followed, ())
