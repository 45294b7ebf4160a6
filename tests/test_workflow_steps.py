"""The workflow_steps matrix source and Hydra validation, on a twin of volcengine/verl.

The repository here is written after verl's real shape: e2e workflows whose `run:` steps start
`tests/special_e2e/*.sh` with variables in front (`ENGINE=sglang ... bash tests/special_e2e/...sh`), scripts
that build Hydra overrides with `${VAR:-default}` and arithmetic and end in `python3 -m
verl.trainer.main_ppo k=v ... $@ | tee output.txt`, an entry decorated with `@hydra.main(config_path="config",
config_name="ppo_trainer")`, a config with a defaults list, and start-up validation (`validate_config` with
`need_critic(config)`, dataclass `__post_init__` checks, a backend's installed version looked up before its
import). Everything runs in the real bubblewrap sandbox; Hydra is the interpreter's (dev extras).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from analysis_envs import HYDRA
from harness_twin import job, results, run_sandboxed

from app.analysis.core.model import Outcome
from app.analysis.core.policy import Policy, builtin_policy, glob_regex, load_policy
from app.analysis.sources.workflow_rows import WorkflowError
from app.analysis.sources.workflow_steps import list_steps, scripts_named, steps_from_workflow
from app.analysis.sources.workflow_steps_keys import WorkflowSteps
from app.engine.matrix_capture import capture_matrix

POLICIES = Path(__file__).resolve().parents[1] / "policies"
WORKFLOW_PATH = ".github/workflows/e2e_ppo_trainer.yml"
WORKFLOW = """
    name: e2e_ppo_trainer
    env:
      IMAGE: "verl-ci/verl:vllm012"
    jobs:
      e2e_ppo_trainer_fsdp:
        runs-on: [L20x8]
        env:
          HTTP_PROXY: ${{ secrets.PROXY_HTTP }}
          HF_ENDPOINT: "https://hf-mirror.com"
        steps:
          - uses: actions/checkout@v4
          - name: Install the current repository
            run: |
              pip3 install --no-deps -e .
          - name: Prepare GSM8K dataset
            run: |
              python3 examples/data_preprocess/gsm8k.py --local_dataset_path ${HOME}/models/hf_data/gsm8k
          - name: Running GSM8K E2E training tests on 8 GPUs
            run: |
              ray stop --force
              bash tests/special_e2e/run_function_reward.sh
          - name: Running GSM8K E2E with sglang
            run: |
              ray stop --force
              ENGINE=sglang MODEL_ID=deepseek-ai/deepseek-coder-1.3b-instruct \\
                bash tests/special_e2e/run_function_reward.sh trainer.nnodes=1
          - name: Running GSM8K E2E with LoRA on vllm and the critic's larger batch
            env:
              VLLM_USE_V1: "1"
            run: |
              ray stop --force
              LORA_RANK=32 ADV_ESTIMATOR=gae \\
                bash tests/special_e2e/run_function_reward.sh critic.ppo_micro_batch_size_per_gpu=4
          - name: Running the SFT e2e test
            run: |
              bash tests/special_e2e/run_sft.sh
      e2e_ppo_trainer_again:
        runs-on: [L20x8]
        env:
          HTTP_PROXY: ${{ secrets.PROXY_HTTP }}
          HF_ENDPOINT: "https://hf-mirror.com"
        steps:
          - name: The same command in another job
            run: |
              ray stop --force
              bash tests/special_e2e/run_function_reward.sh
      e2e_switched_off:
        if: false
        runs-on: [L20x8]
        steps:
          - run: bash tests/special_e2e/run_function_reward.sh
      pre_commit:
        runs-on: ubuntu-latest
        steps:
          - run: pre-commit run --all-files
"""
PPO_SCRIPT = """
    #!/usr/bin/env bash
    set -xeuo pipefail

    NUM_GPUS=${NUM_GPUS:-8}
    MODEL_ID=${MODEL_ID:-Qwen/Qwen2.5-0.5B}
    MODEL_PATH=${MODEL_PATH:-${HOME}/models/${MODEL_ID}}
    ENGINE=${ENGINE:-vllm}
    ADV_ESTIMATOR=${ADV_ESTIMATOR:-grpo}
    LORA_RANK=${LORA_RANK:-0}

    train_traj_micro_bsz_per_gpu=2
    n_resp_per_prompt=4
    train_traj_micro_bsz=$((train_traj_micro_bsz_per_gpu * NUM_GPUS))
    train_prompt_bsz=$((train_traj_micro_bsz * 2))

    python3 -m verl.trainer.main_ppo \\
        algorithm.adv_estimator="${ADV_ESTIMATOR}" \\
        data.train_batch_size="${train_prompt_bsz}" \\
        actor_rollout_ref.model.path="${MODEL_PATH}" \\
        actor_rollout_ref.model.lora_rank="${LORA_RANK}" \\
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="${train_traj_micro_bsz_per_gpu}" \\
        actor_rollout_ref.rollout.name="${ENGINE}" \\
        actor_rollout_ref.rollout.n="${n_resp_per_prompt}" \\
        trainer.n_gpus_per_node="${NUM_GPUS}" \\
        trainer.device=cuda $@ \\
        | tee "$(pwd)/output.txt"
"""
SFT_SCRIPT = """
    #!/usr/bin/env bash
    set -xeuo pipefail
    ENTRYPOINT=${ENTRYPOINT:-"-m verl.trainer.fsdp_sft_trainer"}
    torchrun --standalone --nnodes=1 --nproc_per_node=8 ${ENTRYPOINT} data.micro_batch_size_per_gpu=2
"""
PPO_TRAINER_YAML = """
    defaults:
      - actor@actor_rollout_ref.actor: dp_actor
      - _self_

    algorithm:
      adv_estimator: gae
    data:
      train_batch_size: 1024
    actor_rollout_ref:
      model:
        path: ~/models/deepseek-llm-7b-chat
        lora_rank: 0
      rollout:
        name: vllm
        n: 1
    critic:
      ppo_micro_batch_size_per_gpu: 2
    trainer:
      n_gpus_per_node: 8
      nnodes: 1
      device: cuda
"""
MAIN_PPO = """
    import hydra

    from verl.trainer.ppo.utils import need_critic
    from verl.utils.config import validate_config


    @hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)
    def main(config):
        raise RuntimeError("training would start here: the harness must never call the task function")


    def run_ppo(config):
        validate_config(config, use_critic=need_critic(config))


    if __name__ == "__main__":
        main()
"""
VALIDATE_CONFIG = """
    from dataclasses import dataclass
    from importlib.metadata import version

    from omegaconf import OmegaConf


    @dataclass
    class ActorConfig:
        strategy: str = "fsdp"
        ppo_mini_batch_size: int = 256
        ppo_micro_batch_size_per_gpu: int = 1

        def __post_init__(self):
            assert self.strategy in ("fsdp", "fsdp2", "megatron"), f"unknown strategy {self.strategy}"


    def validate_config(config, use_critic):
        n_gpus = config.trainer.n_gpus_per_node * config.trainer.nnodes
        real_train_batch_size = config.data.train_batch_size * config.actor_rollout_ref.rollout.n
        assert real_train_batch_size % n_gpus == 0, (
            f"real_train_batch_size ({real_train_batch_size}) must be divisible by n_gpus ({n_gpus})")
        actor = ActorConfig(**OmegaConf.to_container(config.actor_rollout_ref.actor))
        if use_critic:
            assert config.critic.ppo_micro_batch_size_per_gpu <= 4, "critic micro batch too large"
        if config.actor_rollout_ref.model.lora_rank > 0 and config.actor_rollout_ref.rollout.name == "vllm":
            major, minor = (int(part) for part in version("vllm").split(".")[:2])
            assert (major, minor) >= (0, 9), "LoRA needs vllm 0.9 or newer"
        # NEW-CHECK
        return actor
"""
NEED_CRITIC = """
    def need_critic(config):
        return config.algorithm.adv_estimator == "gae"
"""
VERL_SHAPED = {
    WORKFLOW_PATH: WORKFLOW,
    "tests/special_e2e/run_function_reward.sh": PPO_SCRIPT,
    "tests/special_e2e/run_sft.sh": SFT_SCRIPT,
    "examples/data_preprocess/gsm8k.py": "print('preparing')\n",
    "verl/__init__.py": "",
    "verl/trainer/__init__.py": "",
    "verl/trainer/main_ppo.py": MAIN_PPO,
    "verl/trainer/config/ppo_trainer.yaml": PPO_TRAINER_YAML,
    "verl/trainer/config/ppo_megatron_trainer.yaml": PPO_TRAINER_YAML.replace("dp_actor", "megatron_actor"),
    "verl/trainer/config/actor/dp_actor.yaml": """
        strategy: fsdp
        ppo_mini_batch_size: 256
        ppo_micro_batch_size_per_gpu: 1
    """,
    "verl/trainer/config/actor/megatron_actor.yaml": """
        strategy: megatron
        ppo_mini_batch_size: 256
        ppo_micro_batch_size_per_gpu: 1
    """,
    "verl/experimental/__init__.py": "",
    "verl/experimental/transfer_queue/__init__.py": "",
    "verl/experimental/transfer_queue/main_ppo.py": MAIN_PPO,
    "verl/experimental/transfer_queue/config/ppo_trainer.yaml":
        textwrap.dedent(PPO_TRAINER_YAML) + "transfer_queue:\n  enable: true\n",
    "verl/experimental/transfer_queue/config/actor/dp_actor.yaml": "strategy: fsdp\n",
    "verl/trainer/ppo/__init__.py": "",
    "verl/trainer/ppo/utils.py": NEED_CRITIC,
    "verl/utils/__init__.py": "",
    "verl/utils/config.py": VALIDATE_CONFIG,
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def verl_shaped_policy() -> dict[str, object]:
    return {
        "version": 1,
        "validation": {
            "paths": ["verl/**"],
            "entry": "verl.trainer.main_ppo:main",
            "functions": ["verl.utils.config:validate_config"],
            "hydra": {"checks": [{"function": "verl.utils.config:validate_config",
                                  "kwargs_from": {"use_critic": "verl.trainer.ppo.utils:need_critic"}}]},
        },
        "matrix": {"sources": [{
            "kind": "workflow_steps", "workflows": [".github/workflows/*.yml"],
            "scripts": ["tests/special_e2e/**/*.sh"], "entry": r"^verl\.trainer\.main_ppo$",
            "launchers": ["python", "python3", "torchrun", "ray"], "env_from": ["exported"],
            "env_keep": ["HF_ENDPOINT", "VLLM_USE_V1"], "env": {"HOME": "/root"}}]},
        "harness": {"real_packages": ["hydra", "omegaconf"], "requirements": list(HYDRA),
                    "stub_attributes": {"vllm.__version__": "0.12.0"}, "limits": {"suite_seconds": 30}},
    }


def source_of(policy: dict[str, object]) -> WorkflowSteps:
    [source] = Policy.model_validate(policy).matrix.sources
    assert isinstance(source, WorkflowSteps)
    return source


def test_the_builtin_verl_policy_loads_and_is_picked_by_repository_name() -> None:
    path = builtin_policy("volcengine", "verl")
    assert path.resolve() == (POLICIES / "volcengine" / "verl.yml").resolve()
    policy = load_policy(path)
    [source] = policy.matrix.sources
    assert isinstance(source, WorkflowSteps)
    assert "tests/special_e2e/**/*.sh" in source.scripts
    assert policy.validation.entry == "verl.trainer.main_ppo:main"
    assert policy.validation.hydra is not None
    checks = [check.function for check in policy.validation.hydra.checks]
    assert checks[-1] == "verl.utils.config:validate_config"


def test_steps_that_run_a_ci_script_are_listed_with_their_environment() -> None:
    listing = steps_from_workflow(textwrap.dedent(WORKFLOW), WORKFLOW_PATH, source_of(verl_shaped_policy()))
    by_label = {step.label.removeprefix(WORKFLOW_PATH + ":"): step for step in listing.steps}
    # installs, dataset preparation and pre-commit name no CI script: no suite
    assert list(by_label) == ["e2e_ppo_trainer_fsdp:4", "e2e_ppo_trainer_fsdp:5", "e2e_ppo_trainer_fsdp:6",
                              "e2e_ppo_trainer_fsdp:7", "e2e_ppo_trainer_again:1"]
    lora = by_label["e2e_ppo_trainer_fsdp:6"]
    assert lora.scripts == ("tests/special_e2e/run_function_reward.sh",)
    assert lora.run.startswith("ray stop --force\nLORA_RANK=32 ADV_ESTIMATOR=gae")
    # the runner's, the workflow's, the job's and the step's variables; a secret is not evaluated
    assert lora.env == {"HOME": "/root", "IMAGE": "verl-ci/verl:vllm012", "HF_ENDPOINT": "https://hf-mirror.com",
                        "VLLM_USE_V1": "1"}
    assert any("HTTP_PROXY not evaluated" in note for note in listing.notes)
    assert listing.disabled == [f"{WORKFLOW_PATH}:e2e_switched_off"]


def test_script_words_are_found_where_bash_would_run_them() -> None:
    patterns = [glob_regex("tests/e2e/**/*.sh")]
    run = "A=1 bash ./tests/e2e/x.sh && sh tests/e2e/sub/y.sh;echo tests/e2e/x.sh|cat\n# tests/e2e/z.py"
    assert scripts_named(run, patterns) == ("tests/e2e/x.sh", "tests/e2e/sub/y.sh")


def test_an_unreadable_workflow_is_left_out_and_one_command_in_two_jobs_is_one_item() -> None:
    texts = {WORKFLOW_PATH: textwrap.dedent(WORKFLOW), ".github/workflows/broken.yml": "jobs: [1, 2]",
             ".github/workflows/big.yml": "x" * 2_000_000}

    def read(path: str) -> str:
        return texts[path]

    listing = list_steps([*sorted(texts), "README.md"], read, source_of(verl_shaped_policy()))
    items, disabled, not_considered = listing.items, list(listing.disabled), list(listing.not_considered)
    # e2e_ppo_trainer_again:1 runs the very command of e2e_ppo_trainer_fsdp:4, in the same environment
    assert [item["id"].removeprefix(WORKFLOW_PATH + ":") for item in items] == [
        "e2e_ppo_trainer_fsdp:4", "e2e_ppo_trainer_fsdp:5", "e2e_ppo_trainer_fsdp:6",
        "e2e_ppo_trainer_fsdp:7"]
    assert all(item["shell"] and item["args"] == [] for item in items)
    assert disabled == [f"{WORKFLOW_PATH}:e2e_switched_off"]
    assert not_considered == []  # the policy selects every job
    # a job the policy leaves out that runs the source's scripts: not considered; pre_commit runs none
    source = source_of(verl_shaped_policy()).model_copy(
        update={"exclude_jobs": ["e2e_ppo_trainer_again", "e2e_switched_off", "pre_commit"]})
    listing = list_steps(sorted(texts), read, source)
    items, disabled, not_considered = listing.items, list(listing.disabled), list(listing.not_considered)
    assert [item["id"].removeprefix(WORKFLOW_PATH + ":") for item in items] == [
        "e2e_ppo_trainer_fsdp:4", "e2e_ppo_trainer_fsdp:5", "e2e_ppo_trainer_fsdp:6",
        "e2e_ppo_trainer_fsdp:7"]
    assert disabled == []  # CI does not run the job switched off: nothing to consider either
    assert not_considered == [f"{WORKFLOW_PATH}:e2e_ppo_trainer_again (a job the policy leaves out)"]
    try:
        steps_from_workflow("x" * 2_000_000, "big.yml", source_of(verl_shaped_policy()))
    except WorkflowError as exc:
        assert "larger than" in str(exc)
    else:
        raise AssertionError("a workflow over the bound was read")


def test_steps_are_recorded_in_the_sandbox_as_hydra_overrides(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", VERL_SHAPED)
    policy = Policy.model_validate(verl_shaped_policy())
    matrix, cached = capture_matrix(repo, policy, cache_dir=tmp_path / "cache")
    suites = {suite.id.removeprefix(WORKFLOW_PATH + ":"): suite for suite in matrix.suites}
    assert list(suites) == ["e2e_ppo_trainer_fsdp:4", "e2e_ppo_trainer_fsdp:5", "e2e_ppo_trainer_fsdp:6"]
    assert list(suites["e2e_ppo_trainer_fsdp:5"].argv) == [
        "algorithm.adv_estimator=grpo", "data.train_batch_size=32",
        "actor_rollout_ref.model.path=/root/models/deepseek-ai/deepseek-coder-1.3b-instruct",
        "actor_rollout_ref.model.lora_rank=0", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.rollout.n=4", "trainer.n_gpus_per_node=8",
        "trainer.device=cuda", "trainer.nnodes=1"]
    assert suites["e2e_ppo_trainer_fsdp:6"].argv[-1] == "critic.ppo_micro_batch_size_per_gpu=4"
    assert {suite.entry for suite in matrix.suites} == {"verl.trainer.main_ppo"}
    assert suites["e2e_ppo_trainer_fsdp:6"].env == {"HF_ENDPOINT": "https://hf-mirror.com",
                                                    "VLLM_USE_V1": "1"}
    # the SFT step launches torchrun with another entry; `tee` into the read-only tree writes no log, and (as
    # on CI, where it can) the step goes on: the PPO steps are complete captures
    assert matrix.partial == ()
    assert [f.script.removeprefix(WORKFLOW_PATH + ":") for f in matrix.no_entry] == ["e2e_ppo_trainer_fsdp:7"]
    assert matrix.disabled == (f"{WORKFLOW_PATH}:e2e_switched_off",)
    assert (matrix.scripts, matrix.captured, matrix.failed) == (4, 3, ())
    assert not cached
    again, cached = capture_matrix(repo, policy, cache_dir=tmp_path / "cache")
    assert cached and again == matrix


def hydra_suite(name: str, argv: str, entry: str = "verl.trainer.main_ppo") -> dict[str, object]:
    return {"id": name, "script": "step", "argv": argv.split(), "env": {}, "entry": entry}


def test_hydra_composes_the_entry_config_and_runs_the_repository_checks(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", VERL_SHAPED)
    policy = Policy.model_validate(verl_shaped_policy()).model_dump(mode="json", by_alias=True)
    base = "data.train_batch_size=32 trainer.n_gpus_per_node=8"
    suites = [hydra_suite("plain", base),
              hydra_suite("megatron", f"--config-name=ppo_megatron_trainer {base}"),
              hydra_suite("new key", f"{base} +trainer.extra_key=1"),
              hydra_suite("lora on vllm", f"{base} actor_rollout_ref.model.lora_rank=32"),
              hydra_suite("removed key", f"{base} trainer.no_such_key=1"),
              hydra_suite("batch", "data.train_batch_size=30"),
              hydra_suite("post_init", f"{base} actor_rollout_ref.actor.strategy=tpu"),
              hydra_suite("critic", f"{base} critic.ppo_micro_batch_size_per_gpu=8"),
              hydra_suite("unknown option", f"--no-such-option {base}"),
              hydra_suite("config dir", f"-cd /elsewhere {base}"),
              # another module's @hydra.main: its own config directory, where transfer_queue exists
              hydra_suite("transfer queue", f"{base} transfer_queue.enable=false",
                          "verl.experimental.transfer_queue.main_ppo"),
              hydra_suite("transfer queue by path", f"{base} transfer_queue.enable=false",
                          "verl/experimental/transfer_queue/main_ppo.py"),
              hydra_suite("no transfer queue here", f"{base} transfer_queue.enable=false")]
    found = results(run_sandboxed(repo, job(suites, policy)))
    for name in ("plain", "megatron", "new key", "lora on vllm", "transfer queue", "transfer queue by path"):
        assert found[name].outcome == Outcome("accepted"), (name, found[name].outcome)
    removed = found["removed key"].outcome
    assert (removed.outcome, removed.exception) == ("rejected", "ConfigCompositionException")
    assert "trainer.no_such_key" in (removed.message or "")
    batch = found["batch"].outcome
    assert (batch.outcome, batch.exception) == ("rejected", "AssertionError")
    assert batch.path == "verl/utils/config.py"
    assert "must be divisible by n_gpus (8)" in (batch.message or "")
    assert found["post_init"].outcome.message == "unknown strategy tpu"
    assert found["critic"].outcome.message == "critic micro batch too large"
    assert found["unknown option"].outcome.exception == "HydraUsageError"
    assert found["config dir"].outcome.exception == "HydraEntryError"
    assert found["no transfer queue here"].outcome.exception == "ConfigCompositionException"


def test_a_check_the_revision_lacks_is_left_out_as_drift_and_composing_still_rejects(tmp_path: Path) -> None:
    """Written after volcengine/verl before 2025-08: the built-in policy's checks (verl.utils.config:
    validate_config, verl.utils.device:auto_set_device) did not exist yet, the trainer validating itself
    later, and every suite of a base of 2025-06 failed with "module 'verl.utils.device' has no attribute
    'auto_set_device'" (52 of 52, exit 3)."""
    older = {path: text for path, text in VERL_SHAPED.items() if path != "verl/utils/config.py"}
    imports_it = "    from verl.utils.config import validate_config\n"
    older["verl/trainer/main_ppo.py"] = MAIN_PPO.replace(imports_it, "")
    policy = verl_shaped_policy()
    policy["validation"]["hydra"]["checks"].insert(0, {"function": "verl.trainer.ppo.utils:auto_set_device"})
    dumped = Policy.model_validate(policy).model_dump(mode="json", by_alias=True)
    base = "data.train_batch_size=32 trainer.n_gpus_per_node=8"
    suites = [hydra_suite("plain", base), hydra_suite("removed key", f"{base} trainer.no_such_key=1")]
    found = results(run_sandboxed(write_tree(tmp_path / "older", older), job(suites, dumped)))
    assert found["plain"].outcome == Outcome("accepted"), found["plain"].outcome
    assert found["removed key"].outcome.exception == "ConfigCompositionException"
    assert found["plain"].drift == tuple(
        f"validation.hydra.checks {name}: none exists at this revision; the check was left out"
        for name in ("verl.trainer.ppo.utils:auto_set_device", "verl.utils.config:validate_config"))
    # a check whose module exists and fails to import is the revision's own breakage, not drift
    broken = write_tree(tmp_path / "broken",
                        {**older, "verl/utils/config.py": "raise RuntimeError('half-merged')\n"})
    found = results(run_sandboxed(broken, job(suites[:1], dumped)))
    assert found["plain"].outcome.outcome != "accepted", found["plain"].outcome
    assert not any("validate_config" in note for note in found["plain"].drift)


def prtriage(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PRTRIAGE_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=300, check=False)


def test_check_reports_a_new_assert_and_a_removed_key_that_break_ci_steps(tmp_path: Path) -> None:
    base = write_tree(tmp_path / "base", VERL_SHAPED)
    new_assert = VALIDATE_CONFIG.replace(
        "# NEW-CHECK", 'assert config.actor_rollout_ref.rollout.name != "sglang", "sglang is not supported"')
    removed_key = PPO_TRAINER_YAML.replace("    critic:\n      ppo_micro_batch_size_per_gpu: 2\n", "")
    head = write_tree(tmp_path / "head", {**VERL_SHAPED, "verl/utils/config.py": new_assert,
                                          "verl/trainer/config/ppo_trainer.yaml": removed_key})
    policy = tmp_path / "policy.yml"
    policy.write_text(json.dumps(verl_shaped_policy()))
    done = prtriage("check", "--base-tree", str(base), "--head-tree", str(head), "--policy", str(policy),
                    "--format", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    rejected = {finding["message"]: [s.removeprefix(WORKFLOW_PATH + ":") for s in finding["suites"]]
                for finding in report["findings"] if finding["kind"] == "new_rejection"}
    # the LoRA step passes the critic key the head's config no longer has: Hydra refuses to compose it
    assert rejected == {
        "AssertionError: sglang is not supported": ["e2e_ppo_trainer_fsdp:5"],
        "ConfigCompositionException: Could not override 'critic.ppo_micro_batch_size_per_gpu'.\n"
        "To append to your config use +critic.ppo_micro_batch_size_per_gpu=4": ["e2e_ppo_trainer_fsdp:6"],
    }
    [assert_finding] = [f for f in report["findings"] if f["message"].startswith("AssertionError")]
    assert (assert_finding["path"], assert_finding["in_diff"]) == ("verl/utils/config.py", True)


def test_a_job_with_a_matrix_runs_its_steps_once_per_row() -> None:
    workflow = textwrap.dedent("""
        jobs:
          e2e:
            strategy:
              matrix:
                engine: [vllm, sglang]
            env:
              ENGINE: ${{ matrix.engine }}
            steps:
              - run: MODE=${{ matrix.mode || 'sync' }} bash tests/special_e2e/run_function_reward.sh
              - run: bash tests/special_e2e/run_function_reward.sh ${{ github.event.number }}
    """)
    listing = steps_from_workflow(workflow, "w.yml", source_of(verl_shaped_policy()))
    assert [(step.label, step.run.strip(), step.env["ENGINE"]) for step in listing.steps] == [
        ("w.yml:e2e[1]:1", "MODE=sync bash tests/special_e2e/run_function_reward.sh", "vllm"),
        ("w.yml:e2e[2]:1", "MODE=sync bash tests/special_e2e/run_function_reward.sh", "sglang")]
    # a step whose text needs an expression the evaluator leaves out is left out, never guessed, and said
    assert [note for note in listing.left_out if "expression not evaluated" in note] == [
        "w.yml:e2e[1]:2: its text has an expression not evaluated: left out",
        "w.yml:e2e[2]:2: its text has an expression not evaluated: left out"]


def test_a_job_whose_matrix_another_job_computes_takes_the_rows_it_gave() -> None:
    """inclusionAI/AReaL: `variant: ${{ fromJson(needs.determine-variants.outputs.matrix) }}`. Its steps
    were left out for a matrix 'not a list of rows', said only in a log."""
    workflow = textwrap.dedent("""
        jobs:
          plan:
            outputs: {models: "${{ steps.list.outputs.models }}"}
            steps:
              - id: list
                run: echo 'models=["qwen","llama"]' >> "$GITHUB_OUTPUT"
          e2e:
            needs: plan
            strategy:
              matrix:
                model: ${{ fromJson(needs.plan.outputs.models) }}
            env:
              ENGINE: ${{ matrix.model == 'qwen' && 'sglang' || 'vllm' }}
            steps:
              - run: echo "name=runner-${{ github.run_id }}-${{ matrix.model }}" >> "$GITHUB_OUTPUT"
              - run: MODEL=${{ matrix.model }} bash tests/special_e2e/run_function_reward.sh
          provision:
            strategy:
              matrix:
                model: ${{ fromJson(needs.plan.outputs.models) }}
            steps:
              - run: gcloud compute instances create "runner-${{ matrix.model }}"
    """)
    source = source_of(verl_shaped_policy())
    rows = {"w.yml:e2e": [{"model": "qwen"}, {"model": "llama"}]}
    listing = steps_from_workflow(workflow, "w.yml", source, computed=rows)
    assert [(step.label, step.run.split()[0], step.env["ENGINE"]) for step in listing.steps] == [
        ("w.yml:e2e[1]:2", "MODEL=qwen", "sglang"), ("w.yml:e2e[2]:2", "MODEL=llama", "vllm")]
    # the step naming a runner after the matrix, its run id unknown here, runs no script, nor does the job
    # provisioning runners for each row: only logged
    assert listing.left_out == [] and len(listing.notes) == 3
    for computed, why in ((None, "its producing job did not run"),
                          ({"w.yml:e2e": "step list wrote no models to $GITHUB_OUTPUT"},
                           "step list wrote no models to $GITHUB_OUTPUT")):
        listing = steps_from_workflow(workflow, "w.yml", source, computed=computed)
        assert listing.steps == []
        assert listing.left_out == [f"w.yml:e2e: matrix from plan's output models not computed ({why}): its "
                                    "steps are left out"]
