"""`prtriage matrix` on the miles twin: every CI suite with the exact argv and env CI would launch."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from twin import build_miles_twin
from twin.cli import MILES_POLICY, prtriage
from twin.expected import (
    ALL_SUITES,
    CONSIDERED,
    DISABLED,
    NO_ENTRY,
    PARTIAL,
    SCRIPTS,
    ExpectedSuite,
    expected_suites,
)

from app.analysis.core.policy import load_policy, path_matches


def host_file(path: str) -> Any:
    """What the policy serves for a CI-host file the twin's scripts read: the first fixture that matches."""
    for fixture in load_policy(MILES_POLICY).harness.fixtures:
        if path_matches(path, fixture.path):
            return fixture.content
    raise AssertionError(f"the miles policy has no fixture for {path}")


def model_args(tree: Path, model_type: str | None) -> list[str]:
    """MODEL_ARGS as CI's bash expands them: source the model file in a real bash, print NUL-separated."""
    if model_type is None:
        return []
    script = f'source "{tree}/scripts/models/{model_type}.sh" && printf "%s\\0" "${{MODEL_ARGS[@]}}"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    return done.stdout.split("\0")[:-1]


@pytest.fixture(scope="module")
def matrix(miles_repo: Path, prtriage_cache: Path) -> dict[str, Any]:
    run = prtriage("matrix", "--repo", str(miles_repo), "--rev", "main", "--policy", str(MILES_POLICY),
                   "--format", "json", cache_dir=prtriage_cache)
    assert run.returncode == 0, run.describe()
    found: dict[str, Any] = run.json()
    return found


@pytest.fixture(scope="module")
def expected() -> dict[str, ExpectedSuite]:
    config = host_file("/root/models/GLM-Z1-9B-0414/config.json")
    iteration = host_file("/root/models/Qwen3-30B-A3B_miles/latest_checkpointed_iteration.txt")
    return expected_suites(num_hidden_layers=config["num_hidden_layers"],
                           checkpointed_iteration=int(iteration))


def test_every_ci_script_is_captured_and_the_disabled_one_skipped(matrix: dict[str, Any]) -> None:
    assert [suite["id"] for suite in matrix["suites"]] == sorted(ALL_SUITES)
    assert (matrix["scripts"], matrix["captured"], matrix["failed"]) == (CONSIDERED, len(SCRIPTS), [])
    assert [entry["script"] for entry in matrix["partial"]] == list(PARTIAL)
    assert [entry["script"] for entry in matrix["no_entry"]] == list(NO_ENTRY)
    assert matrix["disabled"] == [DISABLED]
    assert all(suite["script"] != DISABLED for suite in matrix["suites"])


def test_each_suite_has_the_argv_and_env_ci_launches(matrix: dict[str, Any], tmp_path: Path,
                                                     expected: dict[str, ExpectedSuite]) -> None:
    tree = build_miles_twin(tmp_path / "main")
    for suite in matrix["suites"]:
        spec = expected[suite["id"]]
        assert suite["script"] == spec.script, suite["id"]
        assert suite["entry"] == spec.entry, suite["id"]
        assert suite["argv"] == [*model_args(tree, spec.model_type), *spec.train_args], suite["id"]
        assert suite["env"] == spec.env, suite["id"]


def test_mechanisms_reach_the_argv(matrix: dict[str, Any]) -> None:
    """Spot checks that name the mechanism, so a failure says which one broke."""
    argv = {suite["id"]: suite["argv"] for suite in matrix["suites"]}
    moe = argv["tests/e2e/megatron/test_qwen3_30B_A3B_resume.py"]
    assert moe[moe.index("--ffn-hidden-size") + 1] == "6144"  # $((768 * 8)) in the model file
    assert moe[moe.index("--moe-layer-freq") + 1] == "[" + ",".join(["1"] * 48) + "]"  # bash loop + printf -v
    qwen3 = argv["tests/e2e/lora/test_lora_qwen3_4b_cli.py"]
    assert qwen3[:2] == ["--swiglu", "--disable-bias-linear"]  # base.sh sourced through $(dirname ...)
    assert qwen3[qwen3.index("--rotary-base") + 1] == "1000000"  # ${VAR:-default}
    assert '{"enable_thinking": false}' in qwen3  # single-quoted JSON stays one word
    assert qwen3[qwen3.index("--lora-dropout") + 1] == "0.05"  # typer defaults
    glm = argv["tests/e2e/lora/test_lora_glm4_9b.py"]
    layers = host_file("/root/models/GLM-Z1-9B-0414/config.json")["num_hidden_layers"]
    assert glm[glm.index("--decoder-first-pipeline-num-layers") + 1] == str(layers // 2)  # config.json read
    targets = [argv[f"tests/e2e/lora/test_lora_qwen3_4b_targets.py{n}"] for n in ("", "#2")]
    assert [a[a.index("--target-modules") + 1] for a in targets] == ["all-linear", "linear_qkv,linear_proj"]
