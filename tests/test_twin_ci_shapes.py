"""CI shapes of the field, each on a twin written after the real repository where capture first failed.

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

from app.analysis.core.policy import Policy
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
