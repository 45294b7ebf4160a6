"""The harness mechanisms found on the real radixark/miles, each reproduced by a scenario of the miles twin.

The twin was first written from a description of miles and stayed green while the analysis failed on the
real tree. Each scenario here is shaped after the real code that broke it (quoted in the twin's files as
"radixark/miles: ..."), runs through the real command line in the real sandbox, and fails when its
mechanism is taken out of the harness.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twin import line_of
from twin.cli import MILES_POLICY, Checker, Report, prtriage
from twin.expected import (
    ALL_SUITES,
    CKPT,
    FT_DUMP_DIR,
    FT_DUMPS,
    GLM5,
    GLM47_COMMON,
    GLM47_R3,
    NO_ENTRY,
    SCRIPTS,
    SGLANG_PYTEST,
    SHORT_FSDP,
)
from twin.variants import ARGUMENTS, DSA_ASSERT

MEGATRON_SCRIPTS = sorted(set(SCRIPTS) - {SHORT_FSDP})  # each converts its checkpoint in prepare()


@pytest.fixture(scope="module")
def matrix(miles_repo: Path, prtriage_cache: Path) -> dict[str, Any]:
    run = prtriage("matrix", "--repo", str(miles_repo), "--rev", "main", "--policy", str(MILES_POLICY),
                   "--format", "json", cache_dir=prtriage_cache)
    assert run.returncode == 0, run.describe()
    found: dict[str, Any] = run.json()
    return found


def argv_of(found: dict[str, Any], suite_id: str) -> list[str]:
    [suite] = [suite for suite in found["suites"] if suite["id"] == suite_id]
    return list(suite["argv"])


def value_after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def base_outcomes(report: Report) -> dict[str, dict[str, Any]]:
    return {suite["id"]: suite["base"] for suite in report["suites"]}


def test_ci_host_paths_read_written_and_removed_like_files_on_the_host(matrix: dict[str, Any]) -> None:
    # 1. `tracker.exists() and tracker.read_text()` in convert_checkpoint: every Megatron script's prepare()
    #    reads a tracker that exists under /root/; read_text() raising killed them all on the real tree.
    assert matrix["failed"] == []
    captured = {suite["script"] for suite in matrix["suites"]}
    assert set(MEGATRON_SCRIPTS) <= captured
    # The FT script removes its dump directory if it exists (rmtree), makes it again (makedirs without
    # exist_ok: the removal must have hidden it), writes its arguments there and reads them back.
    assert FT_DUMPS not in [entry["script"] for entry in matrix["partial"]]
    baseline, target = argv_of(matrix, FT_DUMPS), argv_of(matrix, f"{FT_DUMPS}#2")
    dumps = [value_after(argv, "--save-debug-rollout-data") for argv in (baseline, target)]
    assert dumps == [f"{FT_DUMP_DIR}/{phase}/rollout_{{rollout_id}}.pt" for phase in ("baseline", "target")]
    # what the target read back is what the baseline wrote, not the empty file a CI-host path reads as
    assert value_after(target, "--update-weights-interval") == "2"
    assert "--keep-old-actor" in target and "--keep-old-actor" not in baseline


def test_registries_of_stubbed_transformers_absorb_the_repository_registrations(check: Checker) -> None:
    # 2. load_hf_config() calls AutoConfig.register(model_type, Config, exist_ok=...) and
    #    auto_cls.register(Config, Model, exist_ok=...) before from_pretrained: ABCMeta.register raised.
    _, report = check("incident")
    outcomes = base_outcomes(report)
    megatron = [suite for suite in ALL_SUITES if suite != SHORT_FSDP]
    assert {suite: outcomes[suite]["outcome"] for suite in megatron} == dict.fromkeys(megatron, "accepted")
    assert report["health"]["errors"] == []


def test_a_helper_module_next_to_the_ci_scripts_is_no_ci_script(matrix: dict[str, Any]) -> None:
    # 3. `tests/e2e/**/test_*.py` took tests/e2e/megatron/test_glm47_flash/_common.py: `*` crossed a `/`.
    seen = [suite["script"] for suite in matrix["suites"]]
    seen += [entry["script"] for kind in ("failed", "no_entry", "partial") for entry in matrix[kind]]
    seen += matrix["disabled"]
    assert GLM47_COMMON not in seen
    assert GLM47_R3 in seen  # the script next to it is one
    assert matrix["scripts"] == len(SCRIPTS) + len(NO_ENTRY)


def test_the_first_fixture_that_matches_serves_the_glm5_checkpoint(matrix: dict[str, Any]) -> None:
    # 4a. The GLM-5 script raises unless /root/models/GLM-5.2_5layer/config.json is the native GLM-5
    #     config with 5 layers: the specific fixture comes before /root/models/*/config.json.
    argv = argv_of(matrix, GLM5)
    assert value_after(argv, "--num-layers") == "5"
    assert value_after(argv, "--hf-checkpoint") == "/root/models/GLM-5.2_5layer"


def test_hf_configs_follow_each_suite_model_arguments(check: Checker) -> None:
    # 4b. hf_validate_args compares the checkpoint's config with hidden_size, num_layers ...: one fixed
    #     config matches no two models, yet the base accepts every Megatron suite.
    _, report = check("incident")
    argv = {suite["id"]: suite["argv"] for suite in report["suites"]}
    megatron = [suite for suite in ALL_SUITES if suite != SHORT_FSDP]
    sizes = {(value_after(argv[s], "--hidden-size"), value_after(argv[s], "--num-layers")) for s in megatron}
    assert len(sizes) >= 5  # five models, five shapes
    outcomes = base_outcomes(report)
    assert [s for s in megatron if outcomes[s]["outcome"] != "accepted"] == []


def test_validation_sees_the_config_json_served_at_the_checkpoint(check: Checker, miles_repo: Path) -> None:
    # 4c. `fixture_file: config.json`: the GLM-5 checkpoint is a DSA model (glm_moe_dsa) for validation
    #     too, so a new assert on DSA checkpoints rejects exactly the GLM-5 suite.
    status, report = check("dsa_context_parallel")
    assert status == 1
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"]) == ("new_rejection", "blocking")
    assert (finding["suites"], finding["scripts"]) == ([GLM5], [GLM5])
    line = line_of(miles_repo, "dsa_context_parallel", ARGUMENTS, DSA_ASSERT)
    assert (finding["path"], finding["line"], finding["in_diff"]) == (ARGUMENTS, line, True)
    assert report["health"]["could_analyse"] is True


def test_a_script_that_runs_pytest_launches_no_entry_and_fails_no_capture(matrix: dict[str, Any]) -> None:
    # 5. `raise SystemExit(pytest.main([__file__, "-v"]))`: its tests need a server and fail in the
    #    sandbox; the script is of another kind, not a failure of capture.
    assert matrix["failed"] == []
    [entry] = matrix["no_entry"]
    assert entry["script"] == SGLANG_PYTEST
    assert entry["reason"].startswith("ran to its end; launched python3 -m sglang.launch_server, not the ")


def test_a_script_checking_its_own_side_effects_is_a_partial_capture(matrix: dict[str, Any],
                                                                     check: Checker) -> None:
    # 6. The checkpoint test reads the tracker its save run wrote before launching the load run: in the
    #    sandbox the save run wrote nothing. The launch recorded before is the suite.
    [entry] = matrix["partial"]
    assert entry["script"] == CKPT
    assert entry["reason"].startswith("partial capture: after ")
    assert "ValueError: Invalid latest checkpoint value:" in entry["reason"]
    assert f"(at {CKPT}:" in entry["reason"]
    assert [suite["id"] for suite in matrix["suites"] if suite["script"] == CKPT] == [CKPT]
    assert value_after(argv_of(matrix, CKPT), "--save") == "/root/Qwen3-4B_miles"
    _, report = check("incident")
    assert base_outcomes(report)[CKPT]["outcome"] == "accepted"
    assert [entry["script"] for entry in report["health"]["scripts"]["partial"]] == [CKPT]


def test_a_parser_handed_to_absent_sglang_tolerates_its_flags(check: Checker) -> None:
    # 7. The FSDP backend's strict parser is handed to SGLang's ServerArgs.add_cli_args (absent, stubbed)
    #    and parsed with parse_args(): every --sglang-* flag was "unrecognized".
    _, report = check("incident")
    [fsdp] = [suite for suite in report["suites"] if suite["id"] == SHORT_FSDP]
    assert "--train-backend" in fsdp["argv"] and value_after(fsdp["argv"], "--train-backend") == "fsdp"
    assert value_after(fsdp["argv"], "--sglang-mem-fraction-static") == "0.75"
    assert fsdp["base"]["outcome"] == "accepted", fsdp["base"]
