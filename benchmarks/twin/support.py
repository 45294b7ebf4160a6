"""The twin's files around the validator: launch chain, model `.sh` files, heavy imports, import-time work.

The launch chain is the real one in shape: `execute_train` runs shell strings through `exec_command`
(`subprocess.run(..., shell=True)`), sources `scripts/models/<type>.sh` and ends in `ray job submit ... --
python3 <repo>/train.py ${MODEL_ARGS[@]} <train_args>`. Importing `miles.utils.arguments` with stubs does
real work (jinja2 compiles, table builds, a large literal module without bytecode) worth about 0.8 s, as the
real module does: a forking harness pays it once per revision, a process per suite pays it every time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    """One `scripts/models/<type>.sh` and the HF directory the CI scripts download for it."""

    type: str
    hf_name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    groups: int
    vocab: int = 151936
    rotary_base: int = 1000000
    extra: tuple[str, ...] = ()
    moe: tuple[int, int, int, int] | None = None  # experts, topk, moe ffn, first dense layers
    gpus: tuple[int, ...] = (1, 2, 4, 8)

    def script(self) -> str:
        lines = ["#!/bin/bash", f"# {self.hf_name}: Megatron model arguments, sourced by execute_train.", ""]
        if self.moe is not None:
            experts, topk, moe_ffn, dense = self.moe
            lines += [
                f"NLAYERS={self.layers}",
                f"FIRST_K_DENSE_REPLACE={dense}",
                "",
                "arr=()",
                "for ((i=0; i<NLAYERS; i++)); do",
                "  if (( i < FIRST_K_DENSE_REPLACE )); then",
                "    arr+=(0)",
                "  else",
                "    arr+=(1)",
                "  fi",
                "done",
                'printf -v MOE_LAYER_FREQ "[%s]" "$(IFS=\', \'; echo "${arr[*]}")"',
                "",
            ]
        lines += [
            "MODEL_ARGS=(",
            "   --swiglu",
            f"   --num-layers {self.layers}",
            f"   --hidden-size {self.hidden}",
            f"   --ffn-hidden-size {self.ffn}",
            f"   --num-attention-heads {self.heads}",
            "   --group-query-attention",
            f"   --num-query-groups {self.groups}",
            "   --use-rotary-position-embeddings",
            "   --disable-bias-linear",
            '   --normalization "RMSNorm"',
            "   --norm-epsilon 1e-6",
            f'   --rotary-base "${{MODEL_ARGS_ROTARY_BASE:-{self.rotary_base}}}"',
            f"   --vocab-size {self.vocab}",
        ]
        lines += [f"   {word}" for word in self.extra]
        if self.moe is not None:
            experts, topk, moe_ffn, _ = self.moe
            lines += [
                f"   --num-experts {experts}",
                f"   --moe-router-topk {topk}",
                f"   --moe-ffn-hidden-size {moe_ffn}",
                '   --moe-layer-freq "$MOE_LAYER_FREQ"',
                "   --moe-grouped-gemm",
                "   --moe-token-dispatcher-type alltoall",
                "   --moe-router-load-balancing-type none",
            ]
        lines += [")", ""]
        return "\n".join(lines)

    def argv(self) -> list[str]:
        """What bash makes of `${MODEL_ARGS[@]}` (the self-check compares it with a real bash)."""
        words = [
            "--swiglu",
            "--num-layers",
            str(self.layers),
            "--hidden-size",
            str(self.hidden),
            "--ffn-hidden-size",
            str(self.ffn),
            "--num-attention-heads",
            str(self.heads),
            "--group-query-attention",
            "--num-query-groups",
            str(self.groups),
            "--use-rotary-position-embeddings",
            "--disable-bias-linear",
            "--normalization",
            "RMSNorm",
            "--norm-epsilon",
            "1e-6",
            "--rotary-base",
            str(self.rotary_base),
            "--vocab-size",
            str(self.vocab),
        ]
        for word in self.extra:
            words += word.split()
        if self.moe is not None:
            experts, topk, moe_ffn, dense = self.moe
            # bash joins "${arr[*]}" with the first character of IFS only
            freq = "[" + ",".join("0" if i < dense else "1" for i in range(self.layers)) + "]"
            words += [
                "--num-experts",
                str(experts),
                "--moe-router-topk",
                str(topk),
                "--moe-ffn-hidden-size",
                str(moe_ffn),
                "--moe-layer-freq",
                freq,
                "--moe-grouped-gemm",
                "--moe-token-dispatcher-type",
                "alltoall",
                "--moe-router-load-balancing-type",
                "none",
            ]
        return words


MODELS: tuple[Model, ...] = (
    Model("qwen2.5-0.5B", "Qwen2.5-0.5B-Instruct", 24, 896, 4864, 14, 2, extra=("--add-qkv-bias",)),
    Model("qwen2.5-1.5B", "Qwen2.5-1.5B-Instruct", 28, 1536, 8960, 12, 2, extra=("--add-qkv-bias",)),
    Model("qwen2.5-3B", "Qwen2.5-3B-Instruct", 36, 2048, 11008, 16, 2, extra=("--add-qkv-bias",)),
    Model(
        "qwen2.5-7B",
        "Qwen2.5-7B-Instruct",
        28,
        3584,
        18944,
        28,
        4,
        gpus=(4, 8),
        extra=("--add-qkv-bias", "--untie-embeddings-and-output-weights"),
    ),
    Model("qwen3-0.6B", "Qwen3-0.6B", 28, 1024, 3072, 16, 8, extra=("--kv-channels 128", "--qk-layernorm")),
    Model("qwen3-1.7B", "Qwen3-1.7B", 28, 2048, 6144, 16, 8, extra=("--kv-channels 128", "--qk-layernorm")),
    Model(
        "qwen3-4B",
        "Qwen3-4B",
        36,
        2560,
        9728,
        32,
        8,
        gpus=(2, 4, 8),
        extra=("--kv-channels 128", "--qk-layernorm"),
    ),
    Model(
        "qwen3-8B",
        "Qwen3-8B",
        36,
        4096,
        12288,
        32,
        8,
        gpus=(4, 8),
        extra=("--kv-channels 128", "--qk-layernorm", "--untie-embeddings-and-output-weights"),
    ),
    Model(
        "qwen3-30B-A3B",
        "Qwen3-30B-A3B",
        48,
        2048,
        6144,
        32,
        4,
        gpus=(8,),
        extra=("--kv-channels 128", "--qk-layernorm", "--untie-embeddings-and-output-weights"),
        moe=(128, 8, 768, 0),
    ),
    Model(
        "llama3.2-3B",
        "Llama-3.2-3B-Instruct",
        28,
        3072,
        8192,
        24,
        8,
        vocab=128256,
        rotary_base=500000,
        gpus=(2, 4, 8),
    ),
    Model(
        "glm4-9B",
        "GLM-Z1-9B-0414",
        40,
        4096,
        13696,
        32,
        2,
        vocab=151552,
        rotary_base=10000,
        gpus=(4, 8),
        extra=("--add-qkv-bias", "--untie-embeddings-and-output-weights"),
    ),
    Model(
        "moonlight",
        "Moonlight-16B-A3B-Instruct",
        27,
        2048,
        11264,
        16,
        16,
        vocab=163840,
        rotary_base=50000,
        gpus=(8,),
        extra=(
            "--multi-latent-attention",
            "--kv-lora-rank 512",
            "--qk-head-dim 128",
            "--qk-pos-emb-head-dim 64",
            "--v-head-dim 128",
        ),
        moe=(64, 6, 1408, 1),
    ),
    Model("mimo-7B-rl", "MiMo-7B-RL", 36, 4096, 11008, 32, 8, gpus=(4, 8), extra=("--mtp-num-layers 1",)),
)

# Top-level modules of real miles that are not installable here (no accelerator, no CUDA toolchain): each is
# imported at module top somewhere on the validator's import chain and stubbed by the harness.
HEAVY_IMPORTS: dict[str, tuple[str, ...]] = {
    "miles/utils/logging_utils.py": ("torch", "torch.distributed"),
    "miles/utils/types.py": ("torch", "torch.nn"),
    "miles/utils/memory_utils.py": ("torch", "torch_memory_saver", "pynvml", "psutil", "setproctitle"),
    "miles/utils/distributed_utils.py": (
        "torch.distributed",
        "deep_ep",
        "mooncake",
        "nvtx",
        "ray",
        "ray.util",
        "zmq",
        "msgspec",
    ),
    "miles/utils/wandb_utils.py": ("wandb", "tensorboardX", "omegaconf"),
    "miles/utils/data.py": ("datasets", "pyarrow", "pandas", "safetensors", "einops", "PIL", "qwen_vl_utils"),
    "miles/utils/reward_utils.py": ("sympy", "math_verify", "pylatexenc", "openai", "pybase64", "aiohttp"),
    "miles/utils/kernels.py": (
        "triton",
        "flash_attn",
        "flashinfer",
        "sgl_kernel",
        "liger_kernel",
        "apex",
        "transformer_engine",
    ),
    "miles/utils/hf_utils.py": ("transformers", "tokenizers", "huggingface_hub", "accelerate", "peft"),
    "miles/utils/flops_utils.py": ("torch", "megatron.core", "megatron.core.transformer"),
}


def heavy_module(path: str, names: tuple[str, ...]) -> str:
    lines = [f'"""{path.rsplit("/", 1)[-1][:-3].replace("_", " ").capitalize()} helpers of miles."""', ""]
    lines += [f"import {name}" for name in names]
    lines += [
        "",
        "",
        "def available_backends():",
        f"    return {[name.split('.')[0] for name in names]!r}",
        "",
    ]
    return "\n".join(lines)


MISC = '''"""Process and import helpers shared by the launch scripts and the trainer."""

import importlib
import os
import subprocess

import ray


def exec_command(cmd: str, capture_output: bool = False):
    print(f"EXEC: {cmd}", flush=True)
    try:
        result = subprocess.run(
            cmd,
            shell=True,
            check=True,
            capture_output=capture_output,
            text=True,
            executable="/bin/bash",
        )
    except subprocess.CalledProcessError as e:
        if capture_output:
            print(f"{e.stdout=} {e.stderr=}")
        raise
    if capture_output:
        print(f"Captured stdout={result.stdout} stderr={result.stderr}")
        return result.stdout
    return None


def load_function(path):
    module_path, _, attr = path.rpartition(".")
    module = importlib.import_module(module_path)
    return getattr(module, attr)


def get_bool_env_var(name: str, default: str = "false") -> bool:
    return os.environ.get(name, default).lower() in ("1", "true", "yes")


@ray.remote
class Lock:
    def __init__(self):
        self._locked = False

    def acquire(self):
        if self._locked:
            return False
        self._locked = True
        return True

    def release(self):
        self._locked = False
'''

COMMAND_UTILS = '''\
"""What the e2e CI scripts call: downloads, checkpoint conversion and the training job submission."""

import datetime
import json
import os
import random
from pathlib import Path

from miles.utils.misc import exec_command, get_bool_env_var

repo_base_dir = Path(os.path.abspath(__file__)).resolve().parents[3]


def convert_checkpoint(model_name, megatron_model_type, num_gpus_per_node: int, dir_dst="/root"):
    path_dst = f"{dir_dst}/{model_name}_torch_dist"
    if Path(f"{path_dst}/latest_checkpointed_iteration.txt").exists():
        print(f"convert_checkpoint skip {path_dst} since exists")
        return
    exec_command(
        f"source {repo_base_dir}/scripts/models/{megatron_model_type}.sh && "
        f"PYTHONPATH=/root/Megatron-LM torchrun --nproc-per-node {num_gpus_per_node} "
        f"{repo_base_dir}/tools/convert_hf_to_torch_dist.py "
        "${MODEL_ARGS[@]} "
        f"--hf-checkpoint /root/models/{model_name} "
        f"--save {path_dst}"
    )


def hf_download_dataset(full_name: str):
    _, partial_name = full_name.split("/")
    exec_command(f"hf download --repo-type dataset {full_name} --local-dir /root/datasets/{partial_name}")


def check_has_nvlink():
    output = exec_command(
        "nvidia-smi topo -m 2>/dev/null | grep -o 'NV[0-9][0-9]*' | wc -l", capture_output=True
    )
    return int(output) > 0


def get_default_wandb_args(test_file: str, run_name_prefix=None, run_id=None):
    if not os.environ.get("WANDB_API_KEY"):
        print("Skip wandb configuration since WANDB_API_KEY is not found")
        return ""
    test_name = Path(test_file).stem
    run_name = f"{datetime.datetime.now().strftime('%Y%m%d%H%M%S')}-{random.randint(0, 1000000000)}"
    if run_name_prefix:
        run_name = f"{run_name_prefix}-{run_name}"
    return (
        "--use-wandb "
        "--wandb-project miles-ci "
        f"--wandb-group {test_name}-{run_name} "
        f"--wandb-key {os.environ['WANDB_API_KEY']} "
        "--disable-wandb-random-suffix "
    )


def execute_train(
    train_args: str,
    num_gpus_per_node: int,
    megatron_model_type,
    train_script: str = "train.py",
    before_ray_job_submit=None,
    extra_env_vars=None,
):
    external_ray = get_bool_env_var("MILES_SCRIPT_EXTERNAL_RAY")
    master_addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    if not external_ray:
        exec_command(
            "pkill -9 sglang; sleep 3; ray stop --force; pkill -9 ray; pkill -9 python; sleep 3; "
            "pkill -9 ray; pkill -9 python; pkill -9 redis; true;"
        )
        exec_command(
            f"export PYTHONBUFFERED=16 && ray start --head --node-ip-address {master_addr} "
            f"--num-gpus {num_gpus_per_node} --disable-usage-stats"
        )
    if before_ray_job_submit is not None:
        before_ray_job_submit()
    runtime_env_json = json.dumps(
        {
            "env_vars": {
                "PYTHONPATH": "/root/Megatron-LM/",
                "CUDA_DEVICE_MAX_CONNECTIONS": "1",
                "NCCL_NVLS_ENABLE": str(int(check_has_nvlink())),
                "no_proxy": f"127.0.0.1,{master_addr}",
                **(extra_env_vars or {}),
            }
        }
    )
    source_cmd = ""
    if megatron_model_type:
        source_cmd = f'source "{repo_base_dir}/scripts/models/{megatron_model_type}.sh" && '
    model_args_str = "${MODEL_ARGS[@]}" if megatron_model_type else ""
    exec_command(
        "export no_proxy=127.0.0.1 && export PYTHONBUFFERED=16 && "
        f"{source_cmd}"
        'ray job submit --address="http://127.0.0.1:8265" '
        f"--runtime-env-json='{runtime_env_json}' "
        f"-- python3 {repo_base_dir}/{train_script} {model_args_str} {train_args}"
    )
'''

MEGATRON_ARGUMENTS = '''"""Megatron's parser and validator, with the defaults miles needs on top of them."""

from megatron.training.arguments import parse_args, validate_args
from megatron.training.tokenizer.tokenizer import _vocab_size_with_padding

__all__ = ["parse_args", "set_default_megatron_args", "validate_args"]


def set_default_megatron_args(args):
    # always use the distributed optimizer
    args.use_distributed_optimizer = True
    args.bf16 = not args.fp16
    if args.seq_length is None:
        args.seq_length = 4096
    args.max_position_embeddings = args.seq_length
    if args.vocab_size and not args.padded_vocab_size:
        args.padded_vocab_size = _vocab_size_with_padding(args.vocab_size, args)
    if not args.tokenizer_model and not args.tokenizer_type:
        args.tokenizer_type = "HuggingFaceTokenizer"
    return args
'''

SGLANG_ARGUMENTS = '''"""SGLang's server and router options, prefixed --sglang-*, and their checks."""

from sglang.srt.server_args import ServerArgs
from sglang_router.launch_router import RouterArgs

SKIPPED_SERVER_ARGS = ("model_path", "dtype", "trust_remote_code", "random_seed", "tp_size", "port", "host")


def add_sglang_router_arguments(parser):
    RouterArgs.add_cli_args(parser, use_router_prefix=True, exclude_host_port=True)
    return parser


def add_sglang_arguments(parser):
    parser = add_sglang_router_arguments(parser)
    parser.add_argument("--sglang-server-concurrency", type=int, default=512)
    old_add_argument = parser.add_argument

    def new_add_argument_wrapper(*name_or_flags, **kwargs):
        dest = kwargs.get("dest") or name_or_flags[0].lstrip("-").replace("-", "_")
        if dest in SKIPPED_SERVER_ARGS:
            return None
        renamed = [f"--sglang-{name.lstrip('-')}" for name in name_or_flags if name.startswith("--")]
        kwargs["dest"] = f"sglang_{dest}"
        return old_add_argument(*renamed, **kwargs)

    parser.add_argument = new_add_argument_wrapper
    ServerArgs.add_cli_args(parser)
    parser.add_argument = old_add_argument
    return parser


def validate_args(args):
    args.sglang_tp_size = args.rollout_num_gpus_per_engine
    args.sglang_pp_size = 1
    assert args.sglang_dp_size >= 1, f"--sglang-dp-size must be positive, got {args.sglang_dp_size}"
    if getattr(args, "sglang_enable_dp_attention", False):
        assert args.sglang_dp_size > 1, "--sglang-enable-dp-attention needs --sglang-dp-size > 1"
    assert args.sglang_server_concurrency > 0
'''

LOGGING_UTILS = '''"""Logging set-up shared by the trainer and the rollout workers."""

import logging

import torch
import torch.distributed

_CONFIGURED = False


def configure_logger(prefix: str = ""):
    global _CONFIGURED
    if _CONFIGURED:
        return
    _CONFIGURED = True
    logging.basicConfig(
        level=logging.INFO, format=f"[%(asctime)s{prefix}] %(filename)s:%(lineno)d - %(message)s"
    )
'''

EVAL_CONFIG = '''"""Evaluation datasets: `--eval-prompt-data name path ...` or a YAML `--eval-config`."""

from pydantic import BaseModel


class EvalDatasetConfig(BaseModel):
    name: str
    path: str
    n_samples_per_eval_prompt: int | None = None
    max_response_len: int | None = None


def build_eval_dataset_configs(pairs):
    return [EvalDatasetConfig(name=name, path=path) for name, path in zip(pairs[::2], pairs[1::2])]
'''

TRAIN = '''"""Synchronous RL training: rollout, then train, then push the weights to the engines."""

import ray

from miles.ray.placement_group import create_placement_groups, create_rollout_manager, create_training_models
from miles.utils.arguments import parse_args


def train(args):
    pgs = create_placement_groups(args)
    rollout_manager = create_rollout_manager(args, pgs["rollout"])
    actor_model = create_training_models(args, pgs, rollout_manager)
    for rollout_id in range(args.start_rollout_id, args.num_rollout):
        rollout_data_ref = ray.get(rollout_manager.generate.remote(rollout_id))
        ray.get(actor_model.async_train(rollout_id, rollout_data_ref))
        ray.get(actor_model.update_weights())


if __name__ == "__main__":
    args = parse_args()
    train(args)
'''

TRAIN_ASYNC = '''\
"""Asynchronous RL training: the next rollout runs while the actor trains on the previous one."""

import ray

from miles.ray.placement_group import create_placement_groups, create_rollout_manager, create_training_models
from miles.utils.arguments import parse_args


def train(args):
    assert not args.colocate, "Colocation is not supported for async training."
    pgs = create_placement_groups(args)
    rollout_manager = create_rollout_manager(args, pgs["rollout"])
    actor_model = create_training_models(args, pgs, rollout_manager)
    rollout_data_next_future = rollout_manager.generate.remote(args.start_rollout_id)
    for rollout_id in range(args.start_rollout_id, args.num_rollout):
        rollout_data_curr_ref = ray.get(rollout_data_next_future)
        if rollout_id + 1 < args.num_rollout:
            rollout_data_next_future = rollout_manager.generate.remote(rollout_id + 1)
        ray.get(actor_model.async_train(rollout_id, rollout_data_curr_ref))


if __name__ == "__main__":
    args = parse_args()
    train(args)
'''

PLACEMENT_GROUP = '''"""Ray placement groups for the actor, the critic and the rollout engines."""

import ray
from ray.util.placement_group import placement_group


def create_placement_groups(args):
    return {"actor": placement_group([{"GPU": 1}] * args.actor_num_gpus_per_node), "rollout": None}


def create_rollout_manager(args, pg):
    return ray.remote(object).remote()


def create_training_models(args, pgs, rollout_manager):
    return ray.remote(object).remote()
'''

CI_REGISTER = '''\
"""CI registration: every e2e script calls register_cuda_ci at import; run_suite.py reads the registry."""

REGISTRY = []


def register_cuda_ci(est_time: int, suite: str, labels=None, disabled=None, nightly: bool = False):
    REGISTRY.append(
        {
            "est_time": est_time,
            "suite": suite,
            "labels": list(labels or []),
            "disabled": disabled,
            "nightly": nightly,
        }
    )
'''

RUN_SUITE = '''"""Runs every registered e2e script of one CI stage, one after the other."""

import argparse
import glob
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", required=True)
    args = parser.parse_args()
    for path in sorted(glob.glob("tests/e2e/**/test_*.py", recursive=True)):
        with open(path) as handle:
            if f'suite="{args.suite}"' not in handle.read():
                continue
        subprocess.run([sys.executable, path], check=True)


if __name__ == "__main__":
    main()
'''

LORA_UTILS = '''"""LoRA flags shared by the LoRA e2e scripts."""


def lora_args(rank: int = 32, alpha: int = 32, target_modules: str = "all-linear") -> str:
    return (
        f"--lora-rank {rank} "
        f"--lora-alpha {alpha} "
        "--lora-dropout 0.0 "
        f"--target-modules {target_modules} "
        "--megatron-to-hf-mode bridge "
    )
'''

CONVERT = '''"""Converts a HF checkpoint to Megatron's torch_dist format (runs on GPUs under torchrun)."""

import torch
from megatron.training.checkpointing import save_checkpoint

if __name__ == "__main__":
    torch.distributed.init_process_group("nccl")
    save_checkpoint(0, None, None, None, 0)
'''

ROLLOUT = '''"""The default rollout: generate with the SGLang engines through the router."""

import sglang
from sglang.srt.utils import kill_process_tree


def generate_rollout(args, rollout_id, data_source, evaluation=False):
    return sglang.generate(args, rollout_id, data_source, evaluation)
'''

RUN_SCRIPT = '''\
"""Launches a {model} training run by hand (not CI): `python scripts/run_{slug}.py --num-gpus 8`."""

import typer

import miles.utils.external_utils.command_utils as U

app = typer.Typer()


@app.command()
def main(num_gpus: int = 8, mode: str = "normal"):
    train_args = (
        "--hf-checkpoint /root/models/{hf}/ --ref-load /root/models/{hf}_torch_dist/ "
        "--prompt-data /root/datasets/dapo-math-17k/dapo-math-17k.jsonl --input-key prompt --label-key label "
        "--rollout-batch-size 32 --n-samples-per-prompt 8 --rollout-max-response-len 8192 "
        f"--actor-num-nodes 1 --actor-num-gpus-per-node {{num_gpus}} --colocate "
    )
    if mode == "debug_minimal":
        train_args += "--debug-rollout-only "
    U.execute_train(train_args=train_args, num_gpus_per_node=num_gpus, megatron_model_type="{type}")


if __name__ == "__main__":
    app()
'''


def flops_module(work: float) -> str:
    """Per-architecture FLOP tables, built at import (the real module spends its import time similarly)."""
    archs = max(1, int(48 * work))
    return f'''\
"""FLOP estimates per model and sequence length, tabulated once at import for the rollout scheduler."""

import math

import numpy as np
import torch
from megatron.core.transformer import TransformerConfig

from miles.utils.model_presets import MODEL_PRESETS

_SEQ_LENS = list(range(128, 65536 + 1, 128))


def _layer_flops(hidden, ffn, heads, seq):
    attention = 4 * seq * hidden * hidden + 2 * seq * seq * hidden
    mlp = 6 * seq * hidden * ffn
    return attention + mlp + heads * math.log2(seq)


def _build_seq_table():
    table = {{}}
    for index, (name, preset) in enumerate(sorted(MODEL_PRESETS.items())[:{archs}]):
        hidden, ffn, heads, layers = preset["hidden"], preset["ffn"], preset["heads"], preset["layers"]
        table[name] = [layers * _layer_flops(hidden, ffn, heads, seq) for seq in _SEQ_LENS]
    return table


SEQ_FLOPS_TABLE = _build_seq_table()
FLOPS_TABLE = {{name: float(np.mean(rows)) for name, rows in SEQ_FLOPS_TABLE.items()}}
'''


def presets_module(rng: random.Random, work: float) -> str:
    """A large literal table without bytecode in the read-only sandbox: it is compiled at every import."""
    lines = [
        '"""Architecture presets of every model family miles has been run with (generated)."""',
        "",
        "MODEL_PRESETS = {",
    ]
    for index in range(max(1, int(2600 * work))):
        hidden = rng.choice((896, 1024, 1536, 2048, 2560, 3072, 3584, 4096, 5120, 7168))
        lines.append(
            f'    "family-{index:05d}": {{"hidden": {hidden}, "ffn": {hidden * rng.choice((3, 4, 5))}, '
            f'"heads": {rng.choice((14, 16, 24, 28, 32, 40, 64))}, "layers": {rng.randint(12, 96)}, '
            f'"vocab": {rng.choice((32000, 128256, 151936, 163840))}, '
            f'"rope_theta": {rng.choice((10000.0, 500000.0, 1000000.0))}}},'
        )
    lines += ["}", ""]
    return "\n".join(lines)


def chat_templates_module(rng: random.Random, work: float) -> str:
    """Jinja2 chat templates compiled at import (jinja2 is real inside the sandbox)."""
    count = max(1, int(24 * work))
    out = [
        '"""Chat templates per model family, compiled once at import."""',
        "",
        "import jinja2",
        "import tokenizers",
        "from huggingface_hub import constants",
        "",
        "_ENV = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)",
        "",
        "_SOURCES = {",
    ]
    for index in range(count):
        roles = rng.sample(("system", "user", "assistant", "tool", "observation", "function"), 4)
        branches = "".join(
            f"{{% {'if' if i == 0 else 'elif'} message['role'] == '{role}' %}}<|{role}_{index}|>"
            f"{{{{ message['content'] | trim }}}}{{% if message.get('name') %}} ({{{{ message['name'] }}}})"
            f"{{% endif %}}<|end|>\\n"
            for i, role in enumerate(roles)
        )
        body = (
            f"{{% for message in messages %}}{branches}{{% else %}}{{{{ message['content'] }}}}{{% endif %}}"
            f"{{% endfor %}}{{% if add_generation_prompt %}}<|assistant_{index}|>{{% endif %}}"
        )
        out.append(f'    "family-{index:03d}": "{body}",')
    out += [
        "}",
        '_SOURCES["default"] = _SOURCES["family-000"]',
        "",
        "CHAT_TEMPLATES = {name: _ENV.from_string(source) for name, source in _SOURCES.items()}",
        "",
    ]
    return "\n".join(out)


def static_files(rng: random.Random, import_work: float) -> dict[str, str]:
    """Every file of the twin except the validator and the CI scripts, by repo-relative path."""
    files = {
        "README.md": "# miles (synthetic twin)\n\nRL post-training with Megatron and SGLang.\n",
        "pyproject.toml": '[project]\nname = "miles"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n',
        "requirements.txt": "ray[default]\nsglang\ntransformers\nwandb\npydantic\npyyaml\njinja2\ntyper\n",
        "miles/__init__.py": '"""miles: large-scale RL post-training."""\n',
        "miles/utils/__init__.py": "",
        "miles/utils/misc.py": MISC,
        "miles/utils/logging_utils.py": LOGGING_UTILS,
        "miles/utils/eval_config.py": EVAL_CONFIG,
        "miles/utils/external_utils/__init__.py": "",
        "miles/utils/external_utils/command_utils.py": COMMAND_UTILS,
        "miles/utils/flops_utils.py": flops_module(import_work),
        "miles/utils/model_presets.py": presets_module(rng, import_work),
        "miles/utils/chat_templates.py": chat_templates_module(rng, import_work),
        "miles/backends/__init__.py": "",
        "miles/backends/megatron_utils/__init__.py": "",
        "miles/backends/megatron_utils/arguments.py": MEGATRON_ARGUMENTS,
        "miles/backends/sglang_utils/__init__.py": "",
        "miles/backends/sglang_utils/arguments.py": SGLANG_ARGUMENTS,
        "miles/ray/__init__.py": "",
        "miles/ray/placement_group.py": PLACEMENT_GROUP,
        "miles/rollout/__init__.py": "",
        "miles/rollout/sglang_rollout.py": ROLLOUT,
        "miles/rollout/refactor.py": ROLLOUT,
        "train.py": TRAIN,
        "train_async.py": TRAIN_ASYNC,
        "tools/convert_hf_to_torch_dist.py": CONVERT,
        "tests/__init__.py": "",
        "tests/ci/__init__.py": "",
        "tests/ci/ci_register.py": CI_REGISTER,
        "tests/ci/run_suite.py": RUN_SUITE,
        "tests/e2e/__init__.py": "",
        "tests/e2e/lora/__init__.py": "",
        "tests/e2e/lora/lora_utils.py": LORA_UTILS,
    }
    for path, names in HEAVY_IMPORTS.items():
        if path not in files:
            files[path] = heavy_module(path, names)
    # The validator's import chain reaches every heavy module, as the real one does.
    chain = "".join(
        f"import {p[:-3].replace('/', '.')}  # noqa: F401\n"
        for p in sorted(HEAVY_IMPORTS)
        if p != "miles/utils/flops_utils.py"
    )
    files["miles/utils/flops_utils.py"] = files["miles/utils/flops_utils.py"].replace(
        "from miles.utils.model_presets import MODEL_PRESETS\n",
        "from miles.utils.model_presets import MODEL_PRESETS\n" + chain,
    )
    for model in MODELS:
        files[f"scripts/models/{model.type}.sh"] = model.script()
    for model in MODELS[::2]:
        slug = model.type.replace(".", "_").replace("-", "_").lower()
        files[f"scripts/run_{slug}.py"] = (
            RUN_SCRIPT.replace("{model}", model.hf_name)
            .replace("{slug}", slug)
            .replace("{hf}", model.hf_name)
            .replace("{type}", model.type)
            .replace("{{", "{")
            .replace("}}", "}")
        )
    return files
