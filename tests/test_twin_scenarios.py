"""Each pull request of the miles twin through the real `prtriage check` in the real sandbox.

One CLI run per variant (cached for the module), many assertions on its JSON report: exact suite ids,
kinds, severities, the path and line of the new code, and the exit status.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from twin import base_branch, line_of
from twin.cli import MILES_POLICY, Checker, Report, prtriage
from twin.expected import (
    ALL_SUITES,
    ASYNC_REFACTOR,
    ASYNC_ROUTER,
    CONSIDERED,
    HEALTH_SCRIPTS,
    LORA_COLOCATE_SUITES,
    NO_ENTRY,
    PARTIAL,
    SCRIPTS,
    SHORT_FSDP,
    SHORT_GSM8K,
)
from twin.variants import (
    ARGUMENTS,
    ATTRIBUTE_READ,
    ENV_ASSERT,
    INCIDENT_ASSERT,
    REMOVED_FLAG,
    UNREACHED_ASSERT,
)

REPORT_KEYS = {"base", "head", "validation_changed", "suites", "findings", "capture", "timing", "health",
               "policy"}
SUITE_KEYS = {"id", "script", "argv", "base", "head"}
FINDING_KEYS = {"kind", "severity", "scripts", "suites", "path", "line", "in_diff", "message", "minimal_args"}
NOISE_OPEN = '"generation_config.json")) as f:'


def sha(repo: Path, rev: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", rev], capture_output=True, text=True,
                          check=True).stdout.strip()


def assert_contract(report: Report, repo: Path, variant: str) -> None:
    assert set(report) >= REPORT_KEYS
    assert (report["base"], report["head"]) == (sha(repo, base_branch(variant)), sha(repo, variant))
    assert report["validation_changed"] is True
    assert all(set(suite) >= SUITE_KEYS for suite in report["suites"])
    assert all(set(finding) == FINDING_KEYS for finding in report["findings"])


def assert_full_capture(report: Report) -> None:
    capture = report["capture"]
    assert (capture["scripts"], capture["captured"], capture["failed"]) == (CONSIDERED, len(SCRIPTS), [])
    assert [entry["script"] for entry in capture["no_entry"]] == list(NO_ENTRY)
    assert [entry["script"] for entry in capture["partial"]] == list(PARTIAL)
    assert sorted(suite["id"] for suite in report["suites"]) == sorted(ALL_SUITES)


def assert_healthy(report: Report) -> None:
    """The base accepts every suite CI starts: the analysis saw the whole matrix."""
    health = report["health"]
    assert health["could_analyse"] is True, health["reason"]
    assert health["base"] == {"accepted": len(ALL_SUITES), "rejected": 0, "error": 0, "accepted_share": 1.0}
    assert health["suites"] == len(ALL_SUITES) and health["errors"] == [] and health["base_failures"] == []


def outcomes(report: Report, side: str) -> dict[str, dict[str, Any]]:
    return {suite["id"]: suite[side] for suite in report["suites"]}


def by_severity(report: Report, severity: str) -> list[dict[str, Any]]:
    return [finding for finding in report["findings"] if finding["severity"] == severity]


def scripts_of(suites: tuple[str, ...] | list[str]) -> list[str]:
    return sorted({suite.split("#")[0] for suite in suites})


def test_incident_blocks_exactly_the_five_lora_colocate_suites(check: Checker, miles_repo: Path) -> None:
    status, report = check("incident")
    assert status == 1
    assert_contract(report, miles_repo, "incident")
    assert_full_capture(report)
    assert_healthy(report)
    assert report["health"]["lines_changed"] is True and report["health"]["lines_reached"] is True
    line = line_of(miles_repo, "incident", ARGUMENTS, INCIDENT_ASSERT)
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"]) == ("new_rejection", "blocking")
    assert finding["suites"] == sorted(LORA_COLOCATE_SUITES)
    assert finding["scripts"] == scripts_of(LORA_COLOCATE_SUITES)
    assert (finding["path"], finding["line"], finding["in_diff"]) == (ARGUMENTS, line, True)
    assert "--disable-weights-backuper" in finding["message"]
    # the five are exactly the suites that pass LoRA, --colocate and --disable-weights-backuper
    combo = {"--colocate", "--disable-weights-backuper", "--lora-rank"}
    passing = sorted(suite["id"] for suite in report["suites"] if combo <= set(suite["argv"]))
    assert passing == sorted(LORA_COLOCATE_SUITES)
    # and the search in the sandbox finds that combination (with what the suites need to reach the assert)
    minimal = finding["minimal_args"]
    assert minimal["complete"] is True and minimal["every_suite_passes"] is True, minimal
    assert combo <= set(minimal["args"]), minimal
    assert (report["policy"]["source"], report["policy"]["path"]) == ("option", str(MILES_POLICY))
    base, head = outcomes(report, "base"), outcomes(report, "head")
    assert {suite: base[suite]["outcome"] for suite in ALL_SUITES} == dict.fromkeys(ALL_SUITES, "accepted")
    for suite in ALL_SUITES:
        if suite in LORA_COLOCATE_SUITES:
            assert (head[suite]["outcome"], head[suite]["exception"]) == ("rejected", "AssertionError")
            assert (head[suite]["path"], head[suite]["line"]) == (ARGUMENTS, line)
        else:
            assert head[suite]["outcome"] == "accepted", suite


def test_revert_reports_the_suites_it_fixes_and_passes(check: Checker, miles_repo: Path) -> None:
    status, report = check("revert")
    assert status == 0
    assert_contract(report, miles_repo, "revert")
    assert_full_capture(report)
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"]) == ("fixed", "info")
    assert finding["suites"] == sorted(LORA_COLOCATE_SUITES)
    assert finding["scripts"] == scripts_of(LORA_COLOCATE_SUITES)
    base_line = line_of(miles_repo, "incident", ARGUMENTS, INCIDENT_ASSERT)
    assert f"{ARGUMENTS}:{base_line}" in finding["message"]
    assert all(outcome["outcome"] == "accepted" for outcome in outcomes(report, "head").values())


def test_removed_flag_blocks_the_suite_that_still_passes_it(check: Checker, miles_repo: Path) -> None:
    status, report = check("removed_flag")
    assert status == 1
    assert_contract(report, miles_repo, "removed_flag")
    assert_full_capture(report)
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"]) == ("removed_flag", "blocking")
    assert (finding["suites"], finding["scripts"]) == ([SHORT_GSM8K], [SHORT_GSM8K])
    assert REMOVED_FLAG in finding["message"]
    passing = [suite["id"] for suite in report["suites"] if REMOVED_FLAG in suite["argv"]]
    assert passing == [SHORT_GSM8K]


def test_reading_an_option_the_replaced_upstream_parser_may_define_is_blindness(check: Checker,
                                                                               miles_repo: Path) -> None:
    # Megatron's parser is replaced here (absent upstream): `no_such_option` may be one of its options
    # (radixark/miles, July 2026: `optimizer_cpu_offload` blocked falsely), so the read is counted in the
    # health, not reported as "reads args.X, which no parser defines".
    status, report = check("attribute_error")
    assert status == 0
    assert_contract(report, miles_repo, "attribute_error")
    assert_full_capture(report)
    assert by_severity(report, "blocking") == [] and by_severity(report, "warning") == []
    assert report["health"]["could_analyse"] is True
    assert report["health"]["stubbed_parser_reads"] == ["no_such_option"]
    line = line_of(miles_repo, "attribute_error", ARGUMENTS, ATTRIBUTE_READ)
    # the guarded body can only be reported as unreached, never as a finding of its own
    for info in by_severity(report, "info"):
        assert (info["kind"], info["path"], info["line"]) == ("not_exercised", ARGUMENTS, line + 1)


def test_an_assert_no_suite_reaches_is_not_exercised(check: Checker, miles_repo: Path) -> None:
    status, report = check("unexercised")
    assert status == 0
    assert_contract(report, miles_repo, "unexercised")
    assert_full_capture(report)
    assert_healthy(report)  # unreached by suites the head accepts: healthy, and worth a note
    assert report["health"]["lines_reached"] is False
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"]) == ("not_exercised", "info")
    line = line_of(miles_repo, "unexercised", ARGUMENTS, UNREACHED_ASSERT)
    assert (finding["path"], finding["line"], finding["in_diff"]) == (ARGUMENTS, line, True)
    assert all(suite["head"]["outcome"] == "accepted" for suite in report["suites"])


def test_record_mode_isolates_the_incident_under_harness_noise(check: Checker, miles_repo: Path) -> None:
    status, report = check("harness_noise")
    assert status == 3  # the base rejects every suite CI starts: blind, whatever record mode found
    assert_contract(report, miles_repo, "harness_noise")
    assert_full_capture(report)
    # the noise: both revisions reject every suite early, at the same unchanged line
    noise = line_of(miles_repo, "harness_noise", ARGUMENTS, NOISE_OPEN)
    assert noise == line_of(miles_repo, "harness_noise-base", ARGUMENTS, NOISE_OPEN)
    for side in ("base", "head"):
        for suite, outcome in outcomes(report, side).items():
            ended = (outcome["outcome"], outcome["exception"])
            assert ended == ("rejected", "FileNotFoundError"), (side, suite)
            assert (outcome["path"], outcome["line"]) == (ARGUMENTS, noise), (side, suite)
    # only the new assert is reported; the asserts the noise trips at both revisions are not
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"]) == ("new_rejection", "blocking")
    assert finding["suites"] == sorted(LORA_COLOCATE_SUITES)
    line = line_of(miles_repo, "harness_noise", ARGUMENTS, INCIDENT_ASSERT)
    assert (finding["path"], finding["line"], finding["in_diff"]) == (ARGUMENTS, line, True)


def test_a_script_failing_before_its_launch_is_reported_not_dropped(check: Checker, miles_repo: Path) -> None:
    status, report = check("capture_failure")
    assert status == 0
    assert_contract(report, miles_repo, "capture_failure")
    capture = report["capture"]
    assert (capture["scripts"], capture["captured"]) == (CONSIDERED, len(SCRIPTS) - 1)
    [failure] = capture["failed"]
    assert failure["script"] == SHORT_FSDP
    assert "MILES_CI_SEED" in failure["reason"]
    assert sorted(s["id"] for s in report["suites"]) == sorted(set(ALL_SUITES) - {SHORT_FSDP})
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"], finding["scripts"]) == ("capture_failed", "warning",
                                                                           [SHORT_FSDP])


def test_an_env_flag_read_at_import_breaks_only_the_suite_with_it(check: Checker, miles_repo: Path) -> None:
    status, report = check("env_sensitive")
    assert status == 1
    assert_contract(report, miles_repo, "env_sensitive")
    assert_full_capture(report)
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"]) == ("new_rejection", "blocking")
    assert (finding["suites"], finding["scripts"]) == ([ASYNC_REFACTOR], [ASYNC_REFACTOR])
    line = line_of(miles_repo, "env_sensitive", ARGUMENTS, ENV_ASSERT)
    assert (finding["path"], finding["line"], finding["in_diff"]) == (ARGUMENTS, line, True)
    # the router suite passes --partial-rollout too, without the variable: still accepted
    argv = {suite["id"]: suite["argv"] for suite in report["suites"]}
    assert "--partial-rollout" in argv[ASYNC_ROUTER] and "--partial-rollout" in argv[ASYNC_REFACTOR]
    assert outcomes(report, "head")[ASYNC_ROUTER]["outcome"] == "accepted"


def test_a_base_rejecting_every_suite_could_not_analyse_and_says_why(check: Checker,
                                                                     miles_repo: Path) -> None:
    status, report = check("harness_noise")
    assert status == 3
    health = report["health"]
    assert health["could_analyse"] is False
    assert health["base"] == {"accepted": 0, "rejected": len(ALL_SUITES), "error": 0, "accepted_share": 0.0}
    noise = line_of(miles_repo, "harness_noise", ARGUMENTS, NOISE_OPEN)
    [group] = health["errors"]
    assert (group["exception"], group["path"], group["line"], group["count"]) == (
        "FileNotFoundError", ARGUMENTS, noise, len(ALL_SUITES))
    assert f"rejects or errors on {len(ALL_SUITES)} of {len(ALL_SUITES)} CI suites" in health["reason"]
    assert sorted(failure["suite"] for failure in health["base_failures"]) == sorted(ALL_SUITES)


def test_the_blind_text_report_names_the_reason_and_each_rejected_suite(
        miles_repo: Path, prtriage_cache: Path) -> None:
    result = prtriage("check", "--repo", str(miles_repo), "--base", base_branch("harness_noise"), "--head",
                      "harness_noise", "--policy", str(MILES_POLICY), cache_dir=prtriage_cache)
    assert result.returncode == 3, result.describe()
    lines = result.stdout.splitlines()
    assert lines[0].startswith("COULD NOT ANALYSE")
    noise = line_of(miles_repo, "harness_noise", ARGUMENTS, NOISE_OPEN)
    [health] = [line for line in lines if line.startswith("health: ")]
    assert health.startswith(f"health: {len(ALL_SUITES)} suites {HEALTH_SCRIPTS}; "
                             f"base accepts 0/{len(ALL_SUITES)} (0%)")
    assert "most common base error: FileNotFoundError: " in health and f"{ARGUMENTS}:{noise}" in health
    [reason] = [line for line in lines if line.startswith("could not analyse: ")]
    assert "the base revision rejects or errors on" in reason
    for suite in ALL_SUITES:
        [listed] = [line for line in lines if line.startswith(f"  {suite}: ")]
        assert "FileNotFoundError" in listed and listed.endswith(f"{ARGUMENTS}:{noise}")
    assert "[blocking] new_rejection" in result.stdout  # the findings are still listed


def test_a_healthy_text_report_shows_its_health_block(miles_repo: Path, prtriage_cache: Path) -> None:
    result = prtriage("check", "--repo", str(miles_repo), "--base", "main", "--head", "incident", "--policy",
                      str(MILES_POLICY), cache_dir=prtriage_cache)
    assert result.returncode == 1, result.describe()
    suites = len(ALL_SUITES)
    expected = (f"health: {suites} suites {HEALTH_SCRIPTS}; "
                f"base accepts {suites}/{suites} (100%), rejects 0, errors 0\n")
    assert expected in result.stdout
    assert "could not analyse" not in result.stdout
