"""A check whose base is blind with the policy as written, refined for its run (issue 24, direction 6).

The failure reproduced: a policy that does not name a CI host's directory the suites use. On the real
repositories this is what `prtriage init`'s first refine round adds (README, "`prtriage init` measured on
real repositories": radixark/miles' `/root/`, `/node_public/`; RLinf's and NeMo RL's model directories),
and what a policy fitted at one revision lacks at another once CI moves its data: every base suite fails
`os.path.exists` on the host's path, and the check could not analyse (exit 3), blind to the pull request's
real new rejection. With one refine round of the base's policy the check sees it, and says what it added.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from harness_twin import line_of
from launch_twin import NEW_ASSERT, base_repo, check, one_blocking_rejection, pull_request
from refine_twin import POLICY, host_files

from app.analysis.core.policy import parse_policy
from app.engine.check_steps import run_check


def host_pull_request(tmp_path: Path) -> Path:
    repo = base_repo(tmp_path, host_files())
    pull_request(repo, "train.py", NEW_ASSERT)
    return repo

def test_a_base_blind_for_a_ci_host_directory_is_refined_and_the_change_seen(tmp_path: Path) -> None:
    repo = host_pull_request(tmp_path)
    # before: "the validation code could not run at either revision: FileNotFoundError ...", exit 3
    report, finding = one_blocking_rejection(check(tmp_path, repo, POLICY))
    assert (finding["path"], finding["line"]) == ("train.py", line_of(repo, "train.py", "assert args.tp < 4"))
    refinement = report["refinement"]
    assert refinement["applied"] is True and refinement["why_not"] is None
    assert refinement["keys"] == ["harness.existing_path_prefixes"]
    assert refinement["changes"] == ["harness.existing_path_prefixes += ['/mnt/']"]
    assert yaml.safe_load(refinement["yaml"]) == {"harness": {"existing_path_prefixes": ["/mnt/"]}}
    assert "--prompt-data /mnt/ci-data/prompts.jsonl does not exist" in refinement["before"]
    assert "harness.existing_path_prefixes" in refinement["why"]
    # the text says so, with the YAML to add to the policy file
    text = check(tmp_path, repo, POLICY, form="text").stdout
    assert "refined for this run: harness.existing_path_prefixes += ['/mnt/']" in text
    assert f"  to keep it, add to {tmp_path / 'policy.yml'}:\n    harness:\n      existing_path_prefixes:\n" \
           "      - /mnt/\n" in text


def test_a_policy_that_names_the_directory_is_not_refined(tmp_path: Path) -> None:
    repo = host_pull_request(tmp_path)
    kept = POLICY.replace("harness:\n", "harness:\n  existing_path_prefixes: [/mnt/]\n")
    report, _ = one_blocking_rejection(check(tmp_path, repo, kept))
    assert report["refinement"] is None


def test_the_engine_refines_the_policy_it_was_given(tmp_path: Path) -> None:
    repo = host_pull_request(tmp_path)
    trees = {}
    for name, rev in (("base", "main"), ("head", "pr")):
        trees[name] = tmp_path / name
        trees[name].mkdir(mode=0o755)
        archive = subprocess.run(["git", "-C", str(repo), "archive", rev], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(trees[name])], input=archive.stdout, check=True)
    policy = parse_policy(POLICY, "policy.yml")
    report = run_check(trees["base"], trees["head"], policy, base_sha=None, head_sha=None,
                       cache_dir=tmp_path / "engine-cache", allow_unsandboxed=False)
    assert report.refinement is not None and report.refinement.keys == ("harness.existing_path_prefixes",)
    assert report.health is not None and (report.health.base_accepted, report.health.suites) == (2, 2)
    assert [list(f.suites) for f in report.blocking] == [["tests/test_tp4.py"]]
    assert policy.harness.existing_path_prefixes == []  # the policy passed in is left as it was
