"""`prtriage check` on the real radixark/miles: the seed incident #2077, its revert, and the harness' health.

What is known (../shared/realworld/README.md): #2077 added one assert (miles/utils/arguments.py 3081-3088)
that rejects every variant of five LoRA CI scripts; #2203 reverted it; every suite CI runs starts on GPUs at
base-2077, so a suite the analysis rejects there is the analysis' own failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from twin.cli import prtriage

from .conftest import MILES_POLICY

INCIDENT_SCRIPTS = sorted([
    "tests/e2e/megatron/model_scripts/test_glm5_1_744b_a40b_6layer_lora_ci.py",
    "tests/e2e/megatron/model_scripts/test_glm5_2_744b_a40b_5layer_lora_ci.py",
    "tests/e2e/megatron/model_scripts/test_gpt_oss_20b_moe_lora_ci.py",
    "tests/e2e/megatron/model_scripts/test_inkling_small_4layer_lora_ci.py",
    "tests/e2e/megatron/test_qwen3_5_35b_a3b_lora_ci.py",
])
ASSERT_LINES = range(3081, 3089)
MIN_SUITES = 70
MIN_ACCEPTED = 0.95


def check(repo: Path, cache: Path, base: str, head: str, policy: Path = MILES_POLICY,
          statuses: tuple[int, ...] = (0, 1)) -> tuple[int, dict[str, Any]]:
    run = prtriage("check", "--repo", str(repo), "--base", base, "--head", head, "--policy", str(policy),
                   "--format", "json", cache_dir=cache)
    assert run.returncode in statuses, run.describe()
    return run.returncode, run.json()


@pytest.fixture(scope="module")
def incident(real_miles: Path, real_cache: Path) -> tuple[int, dict[str, Any]]:
    return check(real_miles, real_cache, "base-2077", "pr-2077")


@pytest.fixture(scope="module")
def revert(real_miles: Path, real_cache: Path) -> tuple[int, dict[str, Any]]:
    return check(real_miles, real_cache, "pr-2077", "pr-2203")


def assert_healthy(health: dict[str, Any]) -> None:
    """At least 70 suites, at least 95% of them accepted at the base; any rejection listed with its reason."""
    refused = "\n".join(f"{f['suite']}: {f['outcome']} {f.get('exception')}: {f.get('message')} "
                        f"({f.get('path')}:{f.get('line')})" for f in health["base_failures"])
    assert health["suites"] >= MIN_SUITES, health["scripts"]
    assert health["base"]["accepted_share"] >= MIN_ACCEPTED, f"{health['reason']}; rejected:\n{refused}"
    assert health["could_analyse"] is True, health["reason"]


def test_2077_blocks_exactly_the_five_lora_scripts_at_the_new_assert(
        incident: tuple[int, dict[str, Any]]) -> None:
    status, report = incident
    blocking = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert status == 1, blocking
    [finding] = blocking
    assert finding["kind"] == "new_rejection"
    assert finding["scripts"] == INCIDENT_SCRIPTS
    assert finding["path"] == "miles/utils/arguments.py" and finding["line"] in ASSERT_LINES, finding
    assert finding["in_diff"] is True
    # every variant of each of the five, and nothing else, is rejected at the head only
    newly = {s["id"] for s in report["suites"] if s["base"]["outcome"] == "accepted"
             and s["head"]["outcome"] != "accepted"}
    assert newly == {s["id"] for s in report["suites"] if s["script"] in INCIDENT_SCRIPTS}
    assert set(finding["suites"]) == newly


def test_2077_says_which_arguments_the_new_assert_rejects(incident: tuple[int, dict[str, Any]]) -> None:
    """Not 80-flag command lines: the few arguments the head still rejects at the assert, searched in the
    sandbox; every one of the 13 suites passes those options."""
    [finding] = [f for f in incident[1]["findings"] if f["severity"] == "blocking"]
    minimal = finding["minimal_args"]
    assert minimal["complete"] is True and minimal["every_suite_passes"] is True, minimal
    options = {arg for arg in minimal["args"] if arg.startswith("--")}
    assert {"--colocate", "--disable-weights-backuper", "--lora-rank"} <= options, minimal
    assert minimal["count"] <= 6 and minimal["of"] >= 70, minimal
    assert minimal["suite"] in finding["suites"]


def test_a_clone_whose_origin_names_no_github_repository_picks_the_builtin_policy_by_name(
        real_miles: Path, real_cache: Path) -> None:
    """The clone's origin is the bundle, a path: `--repository` names the built-in policy, no --policy."""
    run = prtriage("check", "--repo", str(real_miles), "--base", "base-2077", "--head", "pr-2077",
                   "--repository", "radixark/miles", "--format", "json", cache_dir=real_cache)
    assert run.returncode == 1, run.describe()
    report = run.json()
    assert report["policy"] == {"source": "builtin", "path": "policies/radixark/miles.yml",
                                "repository": "radixark/miles"}
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert finding["scripts"] == INCIDENT_SCRIPTS


def test_2077_base_is_healthy(incident: tuple[int, dict[str, Any]]) -> None:
    health = incident[1]["health"]
    assert_healthy(health)
    assert health["lines_changed"] is True and health["lines_reached"] is True


def test_2077_capture_sorts_scripts_by_kind(incident: tuple[int, dict[str, Any]]) -> None:
    capture = incident[1]["capture"]
    # CI skips the scripts registered disabled; none of the helpers next to the scripts is taken for one
    assert len(capture["disabled"]) == 13, capture["disabled"]
    scripts = {s["script"] for s in incident[1]["suites"]}
    assert not any(Path(script).name.startswith("_") for script in scripts)
    # the sglang and precision scripts run pytest or a server: another kind of script, no capture failure
    assert capture["failed"] == []
    no_entry = {f["script"] for f in capture["no_entry"]}
    assert "tests/e2e/sglang/test_chat_input_ids_equivalence.py" in no_entry, capture["no_entry"]


def test_revert_fixes_the_five_and_breaks_nothing(revert: tuple[int, dict[str, Any]]) -> None:
    status, report = revert
    assert status == 0, [f for f in report["findings"] if f["severity"] == "blocking"]
    [fixed] = [f for f in report["findings"] if f["kind"] == "fixed"]
    assert fixed["scripts"] == INCIDENT_SCRIPTS
    # the base rejects the five (really: it is the broken revision), and the head accepts them: not blindness
    assert report["health"]["fixed_at_head"] == len(fixed["suites"])
    assert report["health"]["could_analyse"] is True


@pytest.fixture(scope="module")
def newest(real_miles: Path, real_cache: Path) -> dict[str, Any]:
    """`doctor` of the built-in policy at the newest snapshot."""
    run = prtriage("doctor", "--repo", str(real_miles), "--rev", "head-2026-08-21", "--policy",
                   str(MILES_POLICY), "--format", "json", cache_dir=real_cache)
    assert run.returncode == 0, run.describe()
    health: dict[str, Any] = run.json()["health"]
    return health


def test_newest_snapshot_is_healthy(newest: dict[str, Any]) -> None:
    assert_healthy(newest)


def test_init_proposes_a_policy_that_sees_what_the_built_in_sees(
        real_miles: Path, real_cache: Path, tmp_path: Path, newest: dict[str, Any]) -> None:
    # The bar: at least 80% of the built-in policy's suites, with the same base acceptance.
    output = tmp_path / "pr-triage.yml"
    run = prtriage("init", "--repo", str(real_miles), "--rev", "head-2026-08-21", "--output", str(output),
                   "--format", "json", cache_dir=real_cache)
    assert run.returncode == 0, run.describe()
    report = run.json()
    seen = report["health"]
    assert seen["suites"] >= 0.8 * newest["suites"], (seen["scripts"], newest["suites"])
    assert report["health"]["base"]["accepted_share"] >= newest["base"]["accepted_share"], report["health"]
    assert report["policy"]["validation"]["entry"] == "miles.utils.arguments:parse_args"
    assert report["rounds"][-1] == [], report["rounds"]
    assert yaml.safe_load(output.read_text()) == report["policy"]


def test_blind_analysis_of_2077_could_not_analyse(real_miles: Path, real_cache: Path, tmp_path: Path) -> None:
    # The failure this project had on the real repository: one fixed HF config for every model makes
    # hf_validate_args reject every suite at the base, and the new assert goes unseen. Never a pass.
    policy = yaml.safe_load(MILES_POLICY.read_text())
    for replacement in policy["validation"]["replace"]:
        replacement.pop("fixture_file", None)
        replacement.pop("from_args", None)
    blind = tmp_path / "blind.yml"
    blind.write_text(yaml.safe_dump(policy))
    _, report = check(real_miles, real_cache, "base-2077", "pr-2077", policy=blind, statuses=(3,))
    health = report["health"]
    assert health["could_analyse"] is False
    assert health["base"]["accepted_share"] < 0.5, health["base"]
    assert "hf_validate_args failed" in (health["errors"][0].get("message") or ""), health["errors"][0]
    assert len(health["base_failures"]) == health["base"]["rejected"] + health["base"]["error"]
