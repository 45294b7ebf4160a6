"""What CI runs for each suite of the miles twin: the spec the captured matrix is checked against.

Written from the CI scripts' point of view (flag sections as `scripts/run_*.py` assembles them), not derived
from the twin's code; MODEL_ARGS come from the model `.sh` files, which the test expands with a real bash.
Values CI scripts read from CI-host files come from the policy's fixtures (`host_files`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

LORA_05B = "tests/e2e/lora/test_lora_qwen2.5_0.5B.py"
LORA_TARGETS = "tests/e2e/lora/test_lora_qwen3_4b_targets.py"
LORA_CLI = "tests/e2e/lora/test_lora_qwen3_4b_cli.py"
LORA_GLM = "tests/e2e/lora/test_lora_glm4_9b.py"
SHORT_GSM8K = "tests/e2e/short/test_qwen2.5_0.5B_gsm8k.py"
SHORT_FSDP = "tests/e2e/short/test_qwen3_0.6B_fsdp.py"
ASYNC_ROUTER = "tests/e2e/async/test_qwen3_4b_async_router.py"
ASYNC_REFACTOR = "tests/e2e/async/test_qwen3_4b_rollout_refactor.py"
MOE_RESUME = "tests/e2e/megatron/test_qwen3_30B_A3B_resume.py"
DISABLED = "tests/e2e/megatron/test_glm4_9b_long.py"
# The scripts of the harness mechanisms found on the real miles (tests/test_twin_mechanisms.py).
FT_DUMPS = "tests/e2e/ft/test_trainer_ft_no_failure_dp4.py"  # writes and removes under /node_public/
CKPT = "tests/e2e/ckpt/test_qwen3_4b_ckpt.py"  # checks the save run's tracker between two launches
GLM47_R3 = "tests/e2e/megatron/test_glm47_flash/test_r3_mtp.py"
GLM47_COMMON = "tests/e2e/megatron/test_glm47_flash/_common.py"  # its helper, no CI script
GLM5 = "tests/e2e/megatron/model_scripts/test_glm5_2_744b_a40b_5layer_ci.py"  # checks its config.json
SGLANG_PYTEST = "tests/e2e/sglang/test_chat_input_ids_equivalence.py"  # runs pytest: no train entry

LORA_COLOCATE_SUITES = (LORA_05B, LORA_TARGETS, f"{LORA_TARGETS}#2", LORA_CLI, LORA_GLM)
SCRIPTS = (LORA_05B, LORA_TARGETS, LORA_CLI, LORA_GLM, SHORT_GSM8K, SHORT_FSDP, ASYNC_ROUTER, ASYNC_REFACTOR,
           MOE_RESUME, FT_DUMPS, CKPT, GLM47_R3, GLM5)  # CI runs these and they launch the entry
PARTIAL = (CKPT,)  # of SCRIPTS: stopped after its first launch
NO_ENTRY = (SGLANG_PYTEST,)  # CI runs it too; it launches no entry
DISABLED_SCRIPTS = (DISABLED,)  # CI skips it
ALL_SUITES = (*LORA_COLOCATE_SUITES, SHORT_GSM8K, SHORT_FSDP, ASYNC_ROUTER, ASYNC_REFACTOR, MOE_RESUME,
              FT_DUMPS, f"{FT_DUMPS}#2", CKPT, GLM47_R3, GLM5)
FT_DUMP_DIR = "/node_public/dumps/test_trainer_ft_no_failure_dp4"
CONSIDERED = len(SCRIPTS) + len(NO_ENTRY)  # the scripts CI runs, as the report counts them
# how a report's health line counts the scripts
HEALTH_SCRIPTS = (f"from {len(SCRIPTS)} of {CONSIDERED + len(DISABLED_SCRIPTS)} scripts "
                  f"({len(DISABLED_SCRIPTS)} disabled, {len(NO_ENTRY)} launch no entry, "
                  f"{len(PARTIAL)} partial)")


@dataclass(frozen=True)
class ExpectedSuite:
    id: str
    entry: str  # repo-relative
    model_type: str | None  # scripts/models/<type>.sh sourced before the launch, if any
    train_args: tuple[str, ...]  # the words after ${MODEL_ARGS[@]}
    env: dict[str, str] = field(default_factory=dict)

    @property
    def script(self) -> str:
        return self.id.split("#")[0]


def job_env(*, fsdp: bool = False, **extra: str) -> dict[str, str]:
    """The ray runtime env `execute_train` gives every job (no NVLink on the sandbox's nvidia-smi)."""
    env = {"PYTHONPATH": "/root/Megatron-LM/"}
    if not fsdp:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    job = {"NCCL_NVLS_ENABLE": "0", "no_proxy": "127.0.0.1,127.0.0.1", "MASTER_ADDR": "127.0.0.1"}
    return env | job | extra


def qwen3_4b_recipe(*, model: str = "Qwen3-4B", fsdp: bool = False, tp: int = 2, pp: int = 1,
                    gpus: int = 8, colocate: bool = True, lora: tuple[int, int] | None = None,
                    extra: str = "") -> tuple[str, ...]:
    """The flags `scripts/run_qwen3_4b.py` passes, section by section."""
    ckpt = f"--hf-checkpoint /root/models/{model} "
    if not fsdp:
        ckpt += f"--ref-load /root/models/{model}_torch_dist "
    rollout = ("--prompt-data /root/datasets/dapo-math-17k/dapo-math-17k.jsonl --input-key prompt "
               "--label-key label --apply-chat-template --apply-chat-template-kwargs "
               "'{\"enable_thinking\": false}' --rollout-shuffle --rm-type deepscaler --num-rollout 3 "
               "--rollout-batch-size 8 --n-samples-per-prompt 4 --rollout-max-response-len 1024 "
               "--rollout-temperature 0.8 --global-batch-size 32 ")
    evaluation = ("--eval-interval 20 --eval-prompt-data aime /root/datasets/aime-2024/aime-2024.jsonl "
                  "--n-samples-per-eval-prompt 1 ")
    grpo = ("--advantage-estimator grpo --use-kl-loss --kl-loss-coef 0.00 --kl-loss-type low_var_kl "
            "--entropy-coef 0.00 --eps-clip 0.2 --eps-clip-high 0.28 ")
    optimizer = ("--optimizer adam --lr 1e-6 --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 "
                 "--adam-beta2 0.98 ")
    if fsdp:
        perf, sglang, misc = "--train-backend fsdp --use-dynamic-batch-size --max-tokens-per-gpu 9216 ", \
            "--rollout-num-gpus-per-engine 2 --sglang-mem-fraction-static 0.75 ", ""
    else:
        perf = (f"--tensor-model-parallel-size {tp} --sequence-parallel --pipeline-model-parallel-size {pp} "
                "--context-parallel-size 1 --recompute-granularity full --recompute-method uniform "
                "--recompute-num-layers 1 --use-dynamic-batch-size --max-tokens-per-gpu 9216 ")
        sglang = "--rollout-num-gpus-per-engine 2 --sglang-mem-fraction-static 0.7 "
        misc = ("--attention-dropout 0.0 --hidden-dropout 0.0 --accumulate-allreduce-grads-in-fp32 "
                "--attention-softmax-in-fp32 --attention-backend flash ")
    lora_flags = f"--lora-rank {lora[0]} --lora-alpha {lora[1]} " if lora else ""
    placement = (f"--actor-num-nodes 1 --actor-num-gpus-per-node {gpus} --colocate " if colocate else
                 f"--actor-num-nodes 1 --actor-num-gpus-per-node {gpus // 2} --rollout-num-gpus {gpus // 2} ")
    sections = (ckpt, rollout, evaluation, grpo, optimizer, perf, sglang, lora_flags, misc, placement, extra)
    return tuple(shlex.split("".join(sections)))


def qwen3_30b_recipe(*, num_rollout: int, load: str, extra: str) -> tuple[str, ...]:
    """The flags `scripts/run_qwen3_30b_a3b.py` passes."""
    model = "Qwen3-30B-A3B"
    return tuple(shlex.split(
        f"--hf-checkpoint /root/models/{model} --ref-load /root/models/{model}_torch_dist "
        f"--load {load} --save {load} --save-interval 20 "
        "--prompt-data /root/datasets/dapo-math-17k/dapo-math-17k.jsonl --input-key prompt --label-key label "
        f"--apply-chat-template --rollout-shuffle --rm-type deepscaler --num-rollout {num_rollout} "
        "--rollout-batch-size 16 --n-samples-per-prompt 8 --rollout-max-response-len 4096 "
        "--rollout-temperature 1.0 --global-batch-size 128 "
        "--advantage-estimator gspo --kl-loss-coef 0.00 --entropy-coef 0.00 --eps-clip 4e-4 "
        "--eps-clip-high 5e-4 "
        "--optimizer adam --lr 1e-6 --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 "
        "--adam-beta2 0.98 --optimizer-cpu-offload --overlap-cpu-optimizer-d2h-h2d "
        "--use-precision-aware-optimizer "
        "--tensor-model-parallel-size 4 --sequence-parallel --pipeline-model-parallel-size 1 "
        "--context-parallel-size 1 --expert-model-parallel-size 8 --expert-tensor-parallel-size 1 "
        "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
        "--use-dynamic-batch-size --max-tokens-per-gpu 16384 "
        "--rollout-num-gpus-per-engine 8 --sglang-mem-fraction-static 0.6 --sglang-enable-dp-attention "
        "--sglang-dp-size 8 "
        "--attention-dropout 0.0 --hidden-dropout 0.0 --accumulate-allreduce-grads-in-fp32 "
        "--attention-softmax-in-fp32 --attention-backend flash "
        f"--actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate {extra}"))


def glm47_flash_recipe() -> tuple[str, ...]:
    """The flags `tests/e2e/megatron/test_glm47_flash/_common.py` passes for the r3 MTP case."""
    model = "GLM-4.7-Flash"
    return tuple(shlex.split(
        f"--hf-checkpoint /root/models/{model} --ref-load /root/models/{model}_torch_dist "
        "--prompt-data /root/datasets/dapo-math-17k/dapo-math-17k.jsonl "
        "--input-key prompt --label-key label --apply-chat-template --rollout-shuffle --rm-type deepscaler "
        "--num-rollout 2 --rollout-batch-size 8 --n-samples-per-prompt 8 --rollout-max-response-len 8192 "
        "--rollout-temperature 1 --global-batch-size 32 "
        "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 "
        "--expert-model-parallel-size 4 --use-dynamic-batch-size --max-tokens-per-gpu 8192 "
        "--use-rollout-routing-replay --rollout-num-gpus-per-engine 4 --sglang-mem-fraction-static 0.7 "
        "--actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate"))


def glm5_recipe() -> tuple[str, ...]:
    """The flags the GLM-5.2 5-layer CI script passes."""
    model = "/root/models/GLM-5.2_5layer"
    return tuple(shlex.split(
        f"--hf-checkpoint {model} --ref-load {model}_torch_dist "
        "--prompt-data /root/datasets/dapo-math-17k/dapo-math-17k.jsonl --input-key prompt --label-key label "
        "--apply-chat-template --rm-type deepscaler --num-rollout 2 --rollout-batch-size 4 "
        "--n-samples-per-prompt 4 --rollout-max-response-len 1024 --global-batch-size 16 "
        "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 2 "
        "--use-dynamic-batch-size --max-tokens-per-gpu 8192 "
        "--rollout-num-gpus-per-engine 4 --sglang-mem-fraction-static 0.7 "
        "--actor-num-nodes 1 --actor-num-gpus-per-node 4 --colocate"))


def expected_suites(*, num_hidden_layers: int, checkpointed_iteration: int) -> dict[str, ExpectedSuite]:
    """Every suite CI runs, by id; the arguments are what the CI hosts' files hold (policy fixtures)."""
    lora = (16, 32)
    backuper = "--disable-weights-backuper"
    suites = [
        ExpectedSuite(LORA_05B, "train.py", "qwen2.5-0.5B", qwen3_4b_recipe(
            model="Qwen2.5-0.5B-Instruct", tp=1, gpus=4, lora=lora,
            extra=f"{backuper} --target-modules all-linear")),
        ExpectedSuite(LORA_TARGETS, "train.py", "qwen3-4B", qwen3_4b_recipe(
            lora=lora, extra=f"{backuper} --target-modules all-linear")),
        ExpectedSuite(f"{LORA_TARGETS}#2", "train.py", "qwen3-4B", qwen3_4b_recipe(
            lora=lora, extra=f"{backuper} --target-modules linear_qkv,linear_proj")),
        ExpectedSuite(LORA_CLI, "train.py", "qwen3-4B", qwen3_4b_recipe(
            lora=lora, extra=f"{backuper} --lora-dropout 0.05")),
        ExpectedSuite(LORA_GLM, "train.py", "glm4-9B", qwen3_4b_recipe(
            model="GLM-Z1-9B-0414", pp=2, lora=lora,
            extra=f"{backuper} --decoder-first-pipeline-num-layers {num_hidden_layers // 2}")),
        ExpectedSuite(SHORT_GSM8K, "train.py", "qwen2.5-0.5B", qwen3_4b_recipe(
            model="Qwen2.5-0.5B-Instruct", tp=1, gpus=4, extra=f"{backuper} --check-weight-update-equal")),
        ExpectedSuite(SHORT_FSDP, "train.py", None, qwen3_4b_recipe(
            model="Qwen3-0.6B", fsdp=True, gpus=4, extra="--gradient-checkpointing"), job_env(fsdp=True)),
        ExpectedSuite(ASYNC_ROUTER, "train_async.py", "qwen3-4B", qwen3_4b_recipe(
            colocate=False, lora=lora,
            extra=f"{backuper} --partial-rollout --sglang-router-ip 127.0.0.1 --sglang-router-port 30000")),
        ExpectedSuite(ASYNC_REFACTOR, "train_async.py", "qwen3-4B", qwen3_4b_recipe(
            colocate=False, extra="--partial-rollout"), job_env(MILES_EXPERIMENTAL_ROLLOUT_REFACTOR="1")),
        ExpectedSuite(MOE_RESUME, "train.py", "qwen3-30B-A3B", qwen3_30b_recipe(
            num_rollout=checkpointed_iteration + 3, load="/root/models/Qwen3-30B-A3B_miles",
            extra="--rm-url http://127.0.0.1:8000/reward")),
        # the target replays the arguments the baseline wrote next to its dumps (read back from the overlay)
        ExpectedSuite(FT_DUMPS, "train.py", "qwen3-4B", qwen3_4b_recipe(
            extra=f"--update-weights-interval 2 --save-debug-rollout-data "
                  f"{FT_DUMP_DIR}/baseline/rollout_{{rollout_id}}.pt")),
        ExpectedSuite(f"{FT_DUMPS}#2", "train.py", "qwen3-4B", qwen3_4b_recipe(
            extra=f"--update-weights-interval 2 --keep-old-actor --save-debug-rollout-data "
                  f"{FT_DUMP_DIR}/target/rollout_{{rollout_id}}.pt")),
        # only the save run: the load run needs the tracker the save run writes on GPUs
        ExpectedSuite(CKPT, "train.py", "qwen3-4B", qwen3_4b_recipe(
            extra="--save /root/Qwen3-4B_miles --save-interval 2")),
        ExpectedSuite(GLM47_R3, "train.py", "glm4.7-flash", glm47_flash_recipe()),
        ExpectedSuite(GLM5, "train.py", "glm5.2-744B-A40B_5layer", glm5_recipe()),
    ]
    return {suite.id: suite if suite.env else _with_env(suite) for suite in suites}


def _with_env(suite: ExpectedSuite) -> ExpectedSuite:
    return ExpectedSuite(suite.id, suite.entry, suite.model_type, suite.train_args, job_env())
