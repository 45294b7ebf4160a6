"""Source of the twin's `miles/utils/arguments.py`: provider, parse_args, and the two validators.

The validator is a hand-written core (the checks the CI suites exercise, including the `--colocate` coercion
of the incident) around seeded blocks on the synthetic options, up to the requested length. Every block
holds for the option's default and for every value a suite passes, so the base revision accepts the suites
except the ones planned as already broken.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from benchmarks.twin.options import CORE_OPTIONS, DEFAULT_ROLLOUT_FUNCTION_PATH, Option, provider_source

# The incident: one assert added after the `--colocate` coercion of offload_train.
INCIDENT_ASSERT = """\
    assert not (args.lora_rank > 0 and args.offload_train and args.disable_weights_backuper), (
        "--disable-weights-backuper cannot be used with LoRA when the actor is offloaded (--offload-train, "
        "or --colocate which turns it on): the adapter weights would not survive the reload"
    )
"""
INCIDENT_MESSAGE = "--disable-weights-backuper cannot be used with LoRA"

_HEADER = '''"""Command-line arguments of miles: the extra-args provider, parse_args and the validators."""

import argparse
import logging
import os

import yaml
from transformers import AutoConfig

from miles.backends.sglang_utils.arguments import add_sglang_arguments
from miles.backends.sglang_utils.arguments import validate_args as sglang_validate_args
from miles.utils.chat_templates import CHAT_TEMPLATES
from miles.utils.eval_config import build_eval_dataset_configs
from miles.utils.flops_utils import FLOPS_TABLE
from miles.utils.logging_utils import configure_logger
from miles.utils.misc import load_function

logger = logging.getLogger(__name__)

DEFAULT_ROLLOUT_FUNCTION_PATH = "{default_rollout}"
ROLLOUT_REFACTOR_FUNCTION_PATH = "miles.rollout.refactor.generate_rollout"


def reset_arg(parser, name, **kwargs):
    """Redefine an option Megatron already declares (its default differs in miles), or add it."""
    for action in parser._actions:
        if name in action.option_strings:
            for key, value in kwargs.items():
                setattr(action, key, value)
            return
    parser.add_argument(name, **kwargs)
'''

_PARSE = """

def parse_args_train_backend():
    if os.environ.get("MILES_BACKEND") is not None:
        raise ValueError("MILES_BACKEND has been removed, use --train-backend instead")
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    get_miles_extra_args_provider()(parser)
    args_partial, _ = parser.parse_known_args()
    return args_partial.train_backend


def parse_args(add_custom_arguments=None):
    configure_logger()
    add_miles_arguments = get_miles_extra_args_provider(add_custom_arguments)
    backend = parse_args_train_backend()
    if backend == "megatron":
        from miles.backends.megatron_utils.arguments import parse_args as megatron_parse_args
        from miles.backends.megatron_utils.arguments import set_default_megatron_args
        from miles.backends.megatron_utils.arguments import validate_args as megatron_validate_args

        args = megatron_parse_args(extra_args_provider=add_miles_arguments)
        if args.hf_checkpoint:
            hf_config = AutoConfig.from_pretrained(args.hf_checkpoint, trust_remote_code=True)
            hf_validate_args(args, hf_config)
        args.rank = 0
        args.world_size = args.actor_num_nodes * args.actor_num_gpus_per_node
        args = set_default_megatron_args(args)
    else:
        parser = argparse.ArgumentParser(allow_abbrev=False)
        add_miles_arguments(parser)
        args = parser.parse_args()
        args.rank = 0
        args.world_size = args.actor_num_nodes * args.actor_num_gpus_per_node
    miles_validate_args(args)
    if backend == "megatron":
        megatron_validate_args(args)
    sglang_validate_args(args)
    return args


_HF_MEGATRON_FIELDS = (
    ("hidden_size", "hidden_size"),
    ("num_attention_heads", "num_attention_heads"),
    ("num_hidden_layers", "num_layers"),
    ("intermediate_size", "ffn_hidden_size"),
    ("vocab_size", "vocab_size"),
)


def hf_validate_args(args, hf_config):
    mismatches = []
    for hf_name, megatron_name in _HF_MEGATRON_FIELDS:
        hf_value = getattr(hf_config, hf_name, None)
        arg_value = getattr(args, megatron_name, None)
        if hf_value is None or arg_value is None:
            continue
        if hf_value != arg_value:
            mismatches.append(f"{hf_name}: hf={hf_value} megatron={arg_value}")
    tie = getattr(hf_config, "tie_word_embeddings", None)
    if tie is not None and getattr(args, "untie_embeddings_and_output_weights", False) == tie:
        mismatches.append(f"tie_word_embeddings={tie} but untie_embeddings_and_output_weights is set alike")
    if mismatches:
        message = "HF config does not match the Megatron model arguments: " + "; ".join(mismatches)
        if args.hf_config_mismatch == "error":
            raise AssertionError(message)
        logger.warning(message)


def _resolve_target_modules(target_modules):
    if target_modules == "all-linear":
        return ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]
    return [module.strip() for module in target_modules.split(",") if module.strip()]
"""

_CORE_START = """

def miles_validate_args(args):
    # ---- parallelism (Megatron owns these; the defaults stand in when it is absent) ----
    if args.train_backend == "megatron":
        model_parallel = (
            args.tensor_model_parallel_size * args.pipeline_model_parallel_size * args.context_parallel_size
        )
        assert args.world_size % model_parallel == 0, (
            f"world size {args.world_size} is not divisible by tp * pp * cp = {model_parallel}"
        )
        args.data_parallel_size = args.world_size // model_parallel
        if args.expert_model_parallel_size > 1:
            assert args.world_size % args.expert_model_parallel_size == 0, (
                f"world size {args.world_size} is not divisible by ep {args.expert_model_parallel_size}"
            )
        if (
            args.num_layers is not None
            and args.num_layers % args.pipeline_model_parallel_size != 0
            and args.decoder_first_pipeline_num_layers is None
        ):
            raise ValueError(
                f"num_layers {args.num_layers} is not divisible by pp {args.pipeline_model_parallel_size}"
            )
    elif args.hf_checkpoint is None:
        raise ValueError("--hf-checkpoint is required with --train-backend fsdp")

    # ---- reference model and checkpoints ----
    if args.kl_coef != 0 or args.use_kl_loss:
        if args.ref_load is None and args.train_backend == "megatron":
            raise ValueError("--ref-load is required when the KL penalty is on (--kl-coef or --use-kl-loss)")
        if args.ref_load is not None and not os.path.exists(args.ref_load):
            raise FileNotFoundError(f"--ref-load {args.ref_load} does not exist, please check the path.")
    if args.load is None and args.ref_load is not None:
        args.load = args.ref_load
        args.start_rollout_id = 0
    if args.save_interval is not None:
        assert args.save is not None, "'--save-interval' needs '--save'"

    # ---- data and evaluation ----
    if args.prompt_data is not None and not os.path.exists(args.prompt_data):
        raise FileNotFoundError(f"--prompt-data {args.prompt_data} does not exist")
    if args.eval_interval is not None:
        assert args.eval_prompt_data is not None or args.eval_config is not None, (
            "--eval-interval needs --eval-prompt-data or --eval-config"
        )
    if args.eval_prompt_data is not None:
        assert len(args.eval_prompt_data) % 2 == 0, "--eval-prompt-data takes pairs of name and path"
        args.eval_datasets = build_eval_dataset_configs(args.eval_prompt_data)
    if args.eval_max_response_len is None:
        args.eval_max_response_len = args.rollout_max_response_len
    if args.eval_temperature is None:
        args.eval_temperature = args.rollout_temperature
    if args.custom_config_path is not None:
        with open(args.custom_config_path) as handle:
            for key, value in (yaml.safe_load(handle) or {}).items():
                setattr(args, key, value)

    # ---- experimental rollout refactor, switched on by the job environment ----
    if os.environ.get("MILES_EXPERIMENTAL_ROLLOUT_REFACTOR", "0") == "1":
        if args.rollout_function_path == DEFAULT_ROLLOUT_FUNCTION_PATH:
            args.rollout_function_path = ROLLOUT_REFACTOR_FUNCTION_PATH
        assert not args.partial_rollout, "--partial-rollout is not supported by the rollout refactor yet"
        assert (
            args.over_sampling_batch_size is None or args.over_sampling_batch_size >= args.rollout_batch_size
        ), "--over-sampling-batch-size must be at least --rollout-batch-size"
    elif args.rollout_function_path != DEFAULT_ROLLOUT_FUNCTION_PATH:
        load_function(args.rollout_function_path)
"""

_CORE_MIDDLE = """
    # ---- colocation and offload ----
    if args.offload:
        args.offload_train = True
        args.offload_rollout = True
    if args.colocate:
        if args.offload_train is None:
            args.offload_train = True
        if args.offload_rollout is None:
            args.offload_rollout = True
        if args.rollout_num_gpus != args.actor_num_gpus_per_node * args.actor_num_nodes:
            logger.info(
                f"rollout_num_gpus {args.rollout_num_gpus} != actor gpus "
                f"{args.actor_num_gpus_per_node * args.actor_num_nodes}; colocated rollout uses the actor's"
            )
            args.rollout_num_gpus = args.actor_num_gpus_per_node * args.actor_num_nodes
{incident}    if args.offload_train is None:
        args.offload_train = False
    if args.offload_rollout is None:
        args.offload_rollout = False
    if not args.colocate and args.rollout_num_gpus is None and not args.debug_train_only:
        raise ValueError("--rollout-num-gpus is required without --colocate")
    if args.rollout_num_gpus is not None:
        assert args.rollout_num_gpus % args.rollout_num_gpus_per_engine == 0, (
            f"rollout_num_gpus {args.rollout_num_gpus} is not a multiple of "
            f"rollout_num_gpus_per_engine {args.rollout_num_gpus_per_engine}"
        )
    if args.rollout_num_gpus_per_engine > args.num_gpus_per_node:
        logger.warning("an engine spans several nodes: --rollout-num-gpus-per-engine > --num-gpus-per-node")

    # ---- LoRA ----
    if args.lora_rank > 0:
        assert args.target_modules is not None, "LoRA needs --target-modules"
        assert args.lora_alpha > 0, f"--lora-alpha must be positive, got {args.lora_alpha}"
        if args.train_backend == "megatron":
            assert args.megatron_to_hf_mode == "bridge", (
                "LoRA with Megatron needs --megatron-to-hf-mode bridge"
            )
        args.target_modules = _resolve_target_modules(args.target_modules)
        if args.exclude_modules is not None:
            excluded = set(_resolve_target_modules(args.exclude_modules))
            args.target_modules = [m for m in args.target_modules if m not in excluded]
    if args.disable_weights_backuper:
        logger.warning("the weights backuper is off: the actor weights are not kept on the host")

    # ---- batch sizes ----
    if args.num_steps_per_rollout is not None:
        global_batch_size = args.rollout_batch_size * args.n_samples_per_prompt // args.num_steps_per_rollout
        if args.global_batch_size is not None:
            assert args.global_batch_size == global_batch_size, (
                f"--global-batch-size {args.global_batch_size} disagrees with --num-steps-per-rollout"
            )
        args.global_batch_size = global_batch_size
    if args.global_batch_size is None:
        args.global_batch_size = args.rollout_batch_size * args.n_samples_per_prompt
    assert args.rollout_batch_size * args.n_samples_per_prompt % args.global_batch_size == 0, (
        f"rollout_batch_size {args.rollout_batch_size} * n_samples_per_prompt {args.n_samples_per_prompt} "
        f"is not a multiple of global_batch_size {args.global_batch_size}"
    )
    if args.use_dynamic_batch_size:
        assert args.max_tokens_per_gpu is not None, "--use-dynamic-batch-size needs --max-tokens-per-gpu"
    if args.log_probs_max_tokens_per_gpu is None:
        args.log_probs_max_tokens_per_gpu = args.max_tokens_per_gpu
    if args.over_sampling_batch_size is None:
        args.over_sampling_batch_size = args.rollout_batch_size
    assert args.over_sampling_batch_size >= args.rollout_batch_size, (
        f"--over-sampling-batch-size {args.over_sampling_batch_size} < --rollout-batch-size"
    )

    # ---- algorithm ----
    if args.eps_clip_high is None:
        args.eps_clip_high = args.eps_clip
    if args.advantage_estimator in ("reinforce_plus_plus", "reinforce_plus_plus_baseline"):
        args.normalize_advantages = True
    if args.advantage_estimator == "ppo" and args.critic_num_gpus_per_node is None:
        args.critic_num_gpus_per_node = args.actor_num_gpus_per_node
    if args.use_tis:
        assert args.tis_clip > 1.0, f"--tis-clip must exceed 1, got {args.tis_clip}"
    if args.debug_rollout_only and args.debug_train_only:
        raise ValueError("--debug-rollout-only and --debug-train-only are mutually exclusive")
    if args.load_debug_rollout_data is not None:
        args.debug_train_only = True
    if args.ci_test and args.ci_metric_checker_key is not None:
        assert args.ci_metric_checker_threshold is not None, "--ci-metric-checker-key needs a threshold"
    if args.use_fault_tolerance:
        assert args.rollout_health_check_interval > 0, "--rollout-health-check-interval must be positive"
"""

_CORE_END = """
    # ---- logging ----
    if args.use_wandb and args.wandb_key is None and os.environ.get("WANDB_API_KEY") is None:
        logger.warning("--use-wandb without --wandb-key or WANDB_API_KEY: wandb runs offline")
    args.chat_template = CHAT_TEMPLATES.get(args.model_name or "", CHAT_TEMPLATES["default"])
    args.rollout_flops_per_token = FLOPS_TABLE.get(args.model_name or "", 0.0)
"""


class _Blocks:
    """Seeded validator blocks on synthetic options; `pool` holds the options some suite passes."""

    def __init__(self, options: list[Option], pool: set[str], rng: random.Random) -> None:
        self.options = options
        self.pool = pool
        self.rng = rng
        self.unused_flags = [o for o in options if o.kind == "flag" and o.dest not in pool]
        self.any_flags = [o for o in options if o.kind == "flag"]
        self.plain_strs = [o for o in options if o.kind == "str" and o.dest not in pool]

    def primary(self, option: Option) -> list[str]:
        makers: dict[str, Callable[[Option], list[str]]] = {
            "flag": self._flag,
            "int": self._number,
            "float": self._number,
            "opt_int": self._optional,
            "opt_float": self._optional,
            "str": self._string,
            "choice": self._choice,
            "list_str": self._list,
            "list_int": self._list,
        }
        return makers[option.kind](option)

    def _number(self, o: Option) -> list[str]:
        lo, hi = _num(o.low), _num(o.high)
        roll = self.rng.random()
        if roll < 0.4:
            return [
                f"    assert {lo} <= args.{o.dest} <= {hi}, (",
                f'        f"{o.flag} must be in [{lo}, {hi}], got {{args.{o.dest}}}"',
                "    )",
            ]
        if roll < 0.75:
            return [
                f"    if args.{o.dest} < {lo}:",
                f'        raise ValueError(f"{o.flag} must be at least {lo}, got {{args.{o.dest}}}")',
            ]
        return [
            f"    if args.{o.dest} > {hi}:",
            f'        logger.warning(f"{o.flag}={{args.{o.dest}}} is above {hi}; clamping")',
            f"        args.{o.dest} = {hi}",
        ]

    def _optional(self, o: Option) -> list[str]:
        lo, hi = _num(o.low), _num(o.high)
        if self.rng.random() < 0.5:
            return [
                f"    if args.{o.dest} is not None and args.{o.dest} < {lo}:",
                f'        raise ValueError(f"{o.flag} must be at least {lo}, got {{args.{o.dest}}}")',
            ]
        if o.kind == "opt_int":
            derived = f"min({hi}, max({lo}, args.rollout_batch_size // 2))"
        else:
            derived = f"min({hi}, max({lo}, args.rollout_temperature))"
        return [f"    if args.{o.dest} is None:", f"        args.{o.dest} = {derived}"]

    def _string(self, o: Option) -> list[str]:
        if o.noun in ("dir", "path"):
            return [
                f"    if args.{o.dest} is not None and not os.path.exists(args.{o.dest}):",
                f'        raise FileNotFoundError(f"{o.flag} {{args.{o.dest}}} does not exist")',
            ]
        if o.noun == "endpoint":
            return [
                f'    if args.{o.dest} is not None and not args.{o.dest}.startswith(("http://", "https://")):',
                f'        raise ValueError(f"{o.flag} must be an http(s) URL, got {{args.{o.dest}}}")',
            ]
        return [
            f"    if args.{o.dest} is not None:",
            f"        args.{o.dest} = args.{o.dest}.strip()",
            f"        if not args.{o.dest}:",
            f'            raise ValueError("{o.flag} must not be empty")',
        ]

    def _choice(self, o: Option) -> list[str]:
        choices = ", ".join(f'"{c}"' for c in o.choices)
        if self.rng.random() < 0.5:
            return [
                f"    if args.{o.dest} not in ({choices}):",
                f'        raise ValueError(f"unknown {o.flag} {{args.{o.dest}}}")',
            ]
        return [
            f'    if args.{o.dest} == "{o.choices[-1]}" and args.colocate:',
            f'        logger.warning("{o.flag} {o.choices[-1]} is slow with --colocate")',
        ]

    def _list(self, o: Option) -> list[str]:
        lines = [
            f"    if args.{o.dest} is not None:",
            f"        if len(args.{o.dest}) == 0:",
            f'            raise ValueError("{o.flag} needs at least one value")',
            f"        for item in args.{o.dest}:",
        ]
        if o.kind == "list_int":
            return [
                *lines,
                f'            assert item >= 0, f"{o.flag} values must be non-negative, got {{item}}"',
            ]
        return [
            *lines,
            "            if not item:",
            f'                raise ValueError("{o.flag} has an empty value")',
        ]

    def _flag(self, o: Option) -> list[str]:
        roll = self.rng.random()
        if roll < 0.35:
            other = self.rng.choice(self.unused_flags if o.dest in self.pool else self.any_flags)
            if other.dest != o.dest:
                return [
                    f"    if args.{o.dest} and args.{other.dest}:",
                    f'        raise ValueError("{o.flag} and {other.flag} cannot be used together")',
                ]
        if roll < 0.6 and o.dest not in self.pool and self.plain_strs:
            needed = self.rng.choice(self.plain_strs)
            return [
                f"    if args.{o.dest} and args.{needed.dest} is None:",
                f'        raise ValueError("{o.flag} requires {needed.flag}")',
            ]
        if roll < 0.8:
            return [
                f"    if args.{o.dest} and args.colocate:",
                f'        logger.warning("{o.flag} has no effect with --colocate")',
            ]
        return [
            f"    if args.{o.dest} and args.debug_rollout_only:",
            f'        logger.info("{o.flag} is ignored by --debug-rollout-only")',
        ]

    def loop(self, members: list[Option]) -> list[str]:
        numbers = [o for o in members if o.kind in ("int", "float") and (o.low or 0) >= 0][:6]
        if len(numbers) < 2:
            return []
        names = ", ".join(f'"{o.dest}"' for o in numbers)
        return [
            f"    for name in ({names}):",
            "        value = getattr(args, name)",
            "        if value < 0:",
            "            raise ValueError(f\"--{name.replace('_', '-')} must be non-negative, got {value}\")",
        ]


def _num(value: float | None) -> str:
    if value is None:
        return "0"
    return str(int(value)) if float(value).is_integer() else repr(value)


def synthetic_blocks(
    options: list[Option], pool: set[str], rng: random.Random, target_lines: int
) -> list[str]:
    """Blocks on the synthetic options, a section per provider group, grown to about `target_lines`."""
    blocks = _Blocks(options, pool, rng)
    groups: dict[str, list[Option]] = {}
    for option in options:
        groups.setdefault(option.group, []).append(option)
    lines: list[str] = []
    for group, members in groups.items():
        lines += ["", f"    # ---- {group.replace('_', ' ')} ----"]
        for option in members:
            lines += blocks.primary(option)
        lines += blocks.loop(members)
    # Second passes over the options (extra checks of the same kind) until the validator is full size.
    while len(lines) < target_lines:
        option = rng.choice(options)
        lines += blocks.primary(option)
    return lines


def arguments_source(
    options: list[Option], pool: set[str], *, head: bool, seed: int, validator_lines: int
) -> str:
    """`miles/utils/arguments.py` at base (head=False) or head; the two differ only by the incident."""
    rng = random.Random(seed)
    synthetic = [o for o in options if o not in _CORE]
    core_lines = _CORE_START.count("\n") + _CORE_MIDDLE.count("\n") + _CORE_END.count("\n")
    blocks = synthetic_blocks(synthetic, pool, rng, max(0, validator_lines - core_lines))
    half = _split_at_section(blocks)
    # str.replace, not format: the templates are full of f-string braces.
    middle = _CORE_MIDDLE.replace("{incident}", INCIDENT_ASSERT if head else "")
    parts = [
        _HEADER.replace("{default_rollout}", DEFAULT_ROLLOUT_FUNCTION_PATH),
        provider_source(options),
        _PARSE,
        _CORE_START,
        "\n".join(blocks[:half]) + "\n",
        middle,
        "\n".join(blocks[half:]) + "\n",
        _CORE_END,
    ]
    return "".join(parts)


_CORE = frozenset(CORE_OPTIONS)


def _split_at_section(lines: list[str]) -> int:
    """Index of the section start nearest the middle, so that the core sits between two whole sections."""
    middle = len(lines) // 2
    starts = [
        i
        for i, line in enumerate(lines)
        if line == "" and i + 1 < len(lines) and lines[i + 1].startswith("    # ---- ")
    ]
    return min(starts, key=lambda i: abs(i - middle)) if starts else middle
