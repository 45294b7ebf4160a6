"""CI shapes of the field, each on a twin written after the real repository where capture first failed.

NVIDIA-NeMo/RL: `tests/functional/L1_Functional_Tests_*.sh` (shell scripts, which capture ran as Python) run
each test through a `run_test` function as `uv run --no-sync bash ./tests/functional/dpo.sh` (uv was a no-op:
nothing launched); those scripts start `uv run coverage run -a --data-file=...
$PROJECT_ROOT/examples/run_dpo.py k=v ... 2>&1 | tee $RUN_LOG` under `set -eou pipefail` (tee into an absent
log directory ended the script), some through an array (`TRAIN_CMD=(uv run coverage run ...);
"${TRAIN_CMD[@]}" k=v`, whose command word the recording bash read as one word), then check the metrics or
checkpoints the training would have written, and fail here: on CI the caller goes on to its next test.

RLinf/RLinf: every e2e step of its workflows sources the virtual environment an earlier step built, under the
runner's `bash -e` (`source .venv/bin/activate`), some a CI host's file as well (`source
/workspace/dataset/isaac-sim-5.1/setup_conda_env.sh`), then `bash tests/e2e_tests/embodied/run.sh <config>`,
whose last line starts `python ${REPO_PATH}/examples/embodiment/train_embodied_agent.py --config-path ...
--config-name ${CONFIG} $@`. Neither file exists in the sandbox, so every step ended at its first line and
"launched nothing" (0 suites of 117 steps). Everything here runs in the real bubblewrap sandbox.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from needs import working_sandbox

from app.analysis.core.policy import Policy, load_policy
from app.analysis.sources.record_launches_keys import RecordLaunches
from app.analysis.sources.workflow_steps_keys import WorkflowSteps
from app.engine.matrix_capture import capture_matrix

RLINF_WORKFLOW = """
    name: Embodied End-to-End Tests
    on:
      workflow_call:
    jobs:
      embodied-mlp-sac-maniskill-test:
        runs-on: embodied
        steps:
          - name: Checkout code
            uses: actions/checkout@v5
          - name: Create embodied environment
            run: |
              export UV_PATH=/workspace/dataset/.uv
              bash requirements/install.sh embodied --model openvla --env maniskill_libero
          - name: ManiSkill SAC test
            timeout-minutes: 20
            run: |
              unset PYTHONPATH
              export REPO_PATH=$(pwd)
              source .venv/bin/activate
              bash tests/e2e_tests/embodied/run.sh maniskill_sac_mlp
          - name: D4RL Offline IQL test (FSDP wrap)
            run: |
              export REPO_PATH=$(pwd)
              . "$REPO_PATH/.venv/bin/activate"
              bash tests/e2e_tests/embodied/run.sh d4rl_iql_mujoco egl actor.use_fsdp_wrap=true
      embodied-gr00t-isaaclab-test:
        runs-on: embodied
        steps:
          - name: ISAACLAB PPO test
            run: |
              unset PYTHONPATH
              export REPO_PATH=$(pwd)
              source .venv/bin/activate
              source /workspace/dataset/isaac-sim-5.1/setup_conda_env.sh
              bash tests/e2e_tests/embodied/run.sh isaaclab_ppo_gr00t
"""
RLINF_RUN = """
    #! /bin/bash
    set -x
    tabs 4
    CONFIG=$1
    # $2 is a backend only if it's non-empty and not a hydra override
    if [[ -n "${2:-}" && "${2:-}" != +* && "${2:-}" != *=* ]]; then
        BACKEND=$2
        SHIFT_COUNT=2
    else
        BACKEND="egl"
        SHIFT_COUNT=1
    fi
    export MUJOCO_GL=${BACKEND}
    export PYTHONPATH=${REPO_PATH}:$PYTHONPATH
    shift $SHIFT_COUNT
    python ${REPO_PATH}/examples/embodiment/train_embodied_agent.py \\
        --config-path ${REPO_PATH}/tests/e2e_tests/embodied --config-name ${CONFIG} $@
"""
RLINF_FILES = {
    ".github/workflows/embodied-e2e-tests.yml": RLINF_WORKFLOW,
    "tests/e2e_tests/embodied/run.sh": RLINF_RUN,
    "requirements/install.sh": "#!/bin/bash\nset -e\nuv venv .venv\n",
    "examples/embodiment/train_embodied_agent.py": "import sys\nprint(sys.argv)\n",
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def rlinf_policy() -> Policy:
    return Policy.model_validate({
        "version": 1,
        "validation": {"paths": ["examples/**"], "entry": "examples.embodiment.train_embodied_agent:main"},
        "matrix": {"sources": [{
            "kind": "workflow_steps", "workflows": [".github/workflows/*.yml"],
            "scripts": ["tests/e2e_tests/**/*.sh"], "entry": r"(^|/)examples/.*\.py$",
            "launchers": ["python", "python3", "torchrun", "ray"], "env_from": ["exported"],
            "env_keep": ["MUJOCO_GL"]}]},
        "harness": {"limits": {"suite_seconds": 30}},
    })


def test_rlinf_steps_that_source_a_venv_and_a_host_file_under_bash_e_launch_their_suites(
        tmp_path: Path) -> None:
    working_sandbox()
    repo = write_tree(tmp_path / "repo", RLINF_FILES)
    matrix, _ = capture_matrix(repo, rlinf_policy(), cache_dir=None)
    suites = {suite.id.split(":", 1)[1]: suite for suite in matrix.suites}
    assert sorted(suites) == ["embodied-gr00t-isaaclab-test:1", "embodied-mlp-sac-maniskill-test:3",
                              "embodied-mlp-sac-maniskill-test:4"]
    assert (matrix.captured, matrix.failed, matrix.no_entry, matrix.partial) == (3, (), (), ())
    sac = suites["embodied-mlp-sac-maniskill-test:3"]
    assert sac.entry == "examples/embodiment/train_embodied_agent.py"
    assert list(sac.argv[2:]) == ["--config-name", "maniskill_sac_mlp"]
    assert sac.argv[1].endswith("/tests/e2e_tests/embodied")
    # `set -e` is back after the skipped source: the rest of the step ran under it as CI runs it
    fsdp = suites["embodied-mlp-sac-maniskill-test:4"]
    assert list(fsdp.argv[2:]) == ["--config-name", "d4rl_iql_mujoco", "actor.use_fsdp_wrap=true"]
    assert fsdp.env == {"MUJOCO_GL": "egl"}
    assert list(suites["embodied-gr00t-isaaclab-test:1"].argv[3:]) == ["isaaclab_ppo_gr00t"]


NEMO_RL_L1 = """
    #!/bin/bash
    set -xeuo pipefail
    SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd )
    PROJECT_ROOT=$(realpath ${SCRIPT_DIR}/../..)
    cd ${PROJECT_ROOT}
    run_test() {
        if [[ "$1" == "fast" ]]; then
            shift
            time "$@"
        elif [[ "${FAST:-0}" == "1" ]]; then
            echo "FAST: Skipping: $*"
        else
            time "$@"
        fi
    }
    run_test fast uv run --no-sync bash ./tests/functional/dpo.sh
    run_test      uv run --no-sync bash ./tests/functional/grpo_checkpoint.sh
    run_test fast uv run --no-sync bash ./tests/functional/sft.sh
    cd ${PROJECT_ROOT}/tests
    if compgen -G ".coverage*" > /dev/null; then
        coverage combine .coverage*
    fi
"""
NEMO_RL_DPO = """
    #!/bin/bash
    SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd)
    PROJECT_ROOT=$(realpath $SCRIPT_DIR/../..)
    set -eou pipefail
    EXP_NAME=$(basename $0 .sh)
    EXP_DIR=$SCRIPT_DIR/$EXP_NAME
    LOG_DIR=$EXP_DIR/logs
    JSON_METRICS=$EXP_DIR/metrics.json
    RUN_LOG=$EXP_DIR/run.log
    export PYTHONPATH=${PROJECT_ROOT}:${PYTHONPATH:-}
    mkdir -p $EXP_DIR $LOG_DIR
    cd $PROJECT_ROOT
    uv run coverage run -a --data-file=$PROJECT_ROOT/tests/.coverage --source=$PROJECT_ROOT/nemo_rl \\
        $PROJECT_ROOT/examples/run_dpo.py \\
        policy.model_name=Qwen/Qwen3-0.6B \\
        logger.log_dir=$LOG_DIR \\
        $@ \\
        2>&1 | tee $RUN_LOG
    uv run tests/json_dump_tb_logs.py $LOG_DIR --output_path $JSON_METRICS
    uv run tests/check_metrics.py $JSON_METRICS 'data["train/loss"]["3"] < 0.8'
"""
NEMO_RL_CHECKPOINT = """
    #!/bin/bash
    SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd)
    PROJECT_ROOT=$(realpath $SCRIPT_DIR/../..)
    set -eou pipefail
    CKPT_DIR=$SCRIPT_DIR/grpo_checkpoint/ckpts
    TRAIN_CMD=(
        uv run coverage run -a --data-file=$PROJECT_ROOT/tests/.coverage --source=$PROJECT_ROOT/nemo_rl
        $PROJECT_ROOT/examples/run_grpo.py
        policy.model_name=Qwen/Qwen3-0.6B
        checkpointing.checkpoint_dir=$CKPT_DIR
    )
    "${TRAIN_CMD[@]}" grpo.max_num_steps=2 2>&1 | tee $SCRIPT_DIR/run1.log
    if [[ ! -f $CKPT_DIR/step_2/replay_buffer.pt ]]; then
        echo "FAIL: replay_buffer.pt not found"
        exit 1
    fi
    "${TRAIN_CMD[@]}" grpo.max_num_steps=4
"""
NEMO_RL_SFT = """
    #!/bin/bash
    set -eou pipefail
    python -m coverage run --source nemo_rl examples/run_sft.py sft.max_num_steps=3
    bash -c 'uv run --extra mcore examples/run_sft.py --config examples/configs/sft_mcore.yaml | tee sft.log'
"""
NEMO_RL_FILES = {
    "tests/functional/L1_Functional_Tests_GRPO.sh": NEMO_RL_L1,
    "tests/functional/dpo.sh": NEMO_RL_DPO,
    "tests/functional/grpo_checkpoint.sh": NEMO_RL_CHECKPOINT,
    "tests/functional/sft.sh": NEMO_RL_SFT,
    "tests/check_metrics.py": "raise SystemExit('capture never runs a launched script')\n",
    "examples/run_dpo.py": "raise SystemExit('capture never runs a launched script')\n",
    "examples/run_grpo.py": "raise SystemExit('capture never runs a launched script')\n",
    "examples/run_sft.py": "raise SystemExit('capture never runs a launched script')\n",
}


def nemo_rl_policy() -> Policy:
    return Policy.model_validate({
        "version": 1,
        "validation": {"paths": ["examples/**"], "entry": "examples.run_grpo:main"},
        "matrix": {"sources": [{
            "kind": "record_launches", "scripts": ["tests/functional/L1_Functional_Tests_*.sh"],
            "entry": r"(^|/)examples/run_\w+\.py$", "launchers": ["python", "python3", "torchrun", "ray"],
            "env_from": ["exported"], "env_keep": ["PYTHONPATH"]}]},
        "harness": {"limits": {"suite_seconds": 30}},
    })


def test_nemo_rl_shell_scripts_through_uv_coverage_arrays_tee_and_failing_checks_launch_every_test(
        tmp_path: Path) -> None:
    working_sandbox()
    repo = write_tree(tmp_path / "repo", NEMO_RL_FILES)
    matrix, _ = capture_matrix(repo, nemo_rl_policy(), cache_dir=None)
    script = "tests/functional/L1_Functional_Tests_GRPO.sh"
    assert [suite.id for suite in matrix.suites] == [script, f"{script}#2", f"{script}#3", f"{script}#4"]
    assert [suite.entry for suite in matrix.suites] == ["examples/run_dpo.py", "examples/run_grpo.py",
                                                        "examples/run_sft.py", "examples/run_sft.py"]
    dpo, grpo, sft, megatron = (list(suite.argv) for suite in matrix.suites)
    assert dpo[0] == "policy.model_name=Qwen/Qwen3-0.6B" and dpo[1].endswith("/tests/functional/dpo/logs")
    assert len(dpo) == 2  # `$@` empty, `2>&1 | tee` no word
    assert grpo[0] == "policy.model_name=Qwen/Qwen3-0.6B" and grpo[-1] == "grpo.max_num_steps=2"
    assert sft == ["sft.max_num_steps=3"]
    assert megatron == ["--config", "examples/configs/sft_mcore.yaml"]
    assert matrix.suites[0].env["PYTHONPATH"].endswith(":")
    # the checkpoint check failed here (no training ran): its second launch is lost, and the report says so
    [partial] = matrix.partial
    assert partial.script == script
    assert "a nested script failed: bash ./tests/functional/grpo_checkpoint.sh ended with status 1" in (
        partial.reason)
    assert (matrix.scripts, matrix.captured, matrix.failed, matrix.no_entry) == (1, 1, (), ())


NEMO_RL_WORKFLOW = """
    name: CICD NeMo RL
    jobs:
      cicd-functional-tests:
        strategy:
          fail-fast: false
          matrix:
            include:
              - script: L1_Functional_Tests_GRPO
              - script: L1_Functional_Tests_SFT
        runs-on: h100
        name: ${{ matrix.script }}
        steps:
          - name: Checkout
            uses: actions/checkout@v6
          - name: main
            uses: ./.github/actions/test-template
            env:
              NRL_FORCE_REBUILD_VENVS: "false"
            with:
              runner: h100
              script: ${{ matrix.script }}
      cicd-doc-tests:
        runs-on: h100
        steps:
          - uses: ./.github/actions/test-template
            with:
              script: docs_quickstart
              is_doc_test: "true"
"""
NEMO_RL_ACTION = """
    name: "Test Template"
    inputs:
      runner:
        required: true
      script:
        required: true
      is_doc_test:
        default: "false"
      is_unit_test:
        default: "false"
    runs:
      using: "composite"
      steps:
        - name: Install uuidgen
          shell: bash
          run: apt-get install -y uuid-runtime
        - name: Run tests
          shell: bash
          env:
            GHA_RUNNER: ${{ inputs.runner }}
          run: |
            echo "script: ${{ inputs.script }}"
            bash tests/${{ inputs.is_doc_test == 'true' && 'docs' ||
              (inputs.is_unit_test == 'true' && 'unit' || 'functional') }}/${{ inputs.script }}.sh && \\
              echo "Finished successfully." || echo "Did not finish."
"""
NEMO_RL_COMPOSITE_FILES = {
    **NEMO_RL_FILES,
    ".github/workflows/cicd-main.yml": NEMO_RL_WORKFLOW,
    ".github/actions/test-template/action.yml": NEMO_RL_ACTION,
    "tests/functional/L1_Functional_Tests_SFT.sh": "bash ./tests/functional/sft.sh\n",
    "tests/docs/docs_quickstart.sh": "uv run examples/run_grpo.py --config examples/configs/start.yaml\n",
}


def test_nemo_rl_matrix_rows_reach_their_scripts_through_the_shared_composite_action(
        tmp_path: Path) -> None:
    working_sandbox()
    repo = write_tree(tmp_path / "repo", NEMO_RL_COMPOSITE_FILES)
    policy = Policy.model_validate({
        **nemo_rl_policy().model_dump(mode="json", by_alias=True),
        "matrix": {"sources": [{
            "kind": "workflow_steps", "workflows": [".github/workflows/*.yml"],
            "scripts": ["tests/functional/L1_*.sh", "tests/docs/*.sh"],
            "entry": r"(^|/)examples/run_\w+\.py$",
            "launchers": ["python", "python3", "torchrun", "ray"], "env_from": ["exported"],
            "env_keep": ["GHA_RUNNER", "NRL_FORCE_REBUILD_VENVS"]}]}})
    matrix, _ = capture_matrix(repo, policy, cache_dir=None)
    workflow = ".github/workflows/cicd-main.yml"
    # the action's second step (2.2, 1.2) is the one that names a test script; the install step is none
    grpo = f"{workflow}:cicd-functional-tests[1]:2.2"
    sft = f"{workflow}:cicd-functional-tests[2]:2.2"
    docs = f"{workflow}:cicd-doc-tests:1.2"
    assert [suite.id for suite in matrix.suites] == [
        docs, grpo, f"{grpo}#2", f"{grpo}#3", f"{grpo}#4", sft, f"{sft}#2"]
    by_id = {suite.id: suite for suite in matrix.suites}
    assert list(by_id[docs].argv) == ["--config", "examples/configs/start.yaml"]
    assert [by_id[i].entry for i in (sft, f"{sft}#2")] == ["examples/run_sft.py", "examples/run_sft.py"]
    # `with:` reaches the action's env, the calling step's env reaches the action's steps
    assert by_id[sft].env == {"GHA_RUNNER": "h100", "NRL_FORCE_REBUILD_VENVS": "false"}
    assert (matrix.scripts, matrix.failed, matrix.no_entry) == (3, (), ())


def test_the_example_policies_for_these_shapes_load_with_the_sources_their_twins_exercise() -> None:
    examples = Path(__file__).resolve().parents[1] / "examples" / "capture"
    nemo_rl = load_policy(examples / "nemo-rl.yml").matrix.sources[0]
    assert isinstance(nemo_rl, RecordLaunches)
    assert nemo_rl.scripts == ["tests/functional/L1_Functional_Tests_*.sh"]
    assert nemo_rl.command == ["bash", "{script}"]
    rlinf = load_policy(examples / "rlinf.yml").matrix.sources[0]
    assert isinstance(rlinf, WorkflowSteps) and rlinf.scripts == ["tests/e2e_tests/**/*.sh"]
