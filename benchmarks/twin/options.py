"""The twin's ~700 command-line options: hand-written core ones, seeded synthetic ones, their source.

The core options are the ones the CI suites and the hand-written validator use (cluster, rollout, LoRA,
offload ...), named as in miles. The synthetic ones pad the provider to the real size; each has a valid range
so that generated validator blocks and suite values agree by construction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

Kind = Literal[
    "flag", "bool_opt", "int", "opt_int", "float", "opt_float", "str", "choice", "list_str", "list_int"
]


@dataclass(frozen=True)
class Option:
    """One option of the miles parser, with the range of values the validator accepts."""

    flag: str
    kind: Kind
    group: str
    default: object = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    help: str = ""
    reset: bool = False  # added through reset_arg: Megatron owns it upstream, miles redefines it

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def noun(self) -> str:
        return self.flag.rsplit("-", 1)[-1]

    def source(self) -> list[str]:
        """Lines of the `parser.add_argument(...)` (or `reset_arg(...)`) call, indented as in a function."""
        kwargs = self._kwargs()
        call = "reset_arg(parser, " if self.reset else "parser.add_argument("
        one_line = f"    {call}{self.flag!r}, {', '.join(kwargs)})"
        if len(one_line) <= 110 and not self.help:
            return [one_line.replace("'", '"')]
        lines = [f"    {call}", f'        "{self.flag}",']
        lines += [f"        {kw}," for kw in kwargs]
        if self.help:
            lines.append(f'        help="{self.help}",')
        lines.append("    )")
        return lines

    def _kwargs(self) -> list[str]:
        default = repr(self.default).replace("'", '"')
        if self.kind == "flag":
            return ['action="store_true"', "default=False"]
        if self.kind == "bool_opt":
            return ["action=argparse.BooleanOptionalAction", "default=None"]
        if self.kind in ("int", "opt_int"):
            return ["type=int", f"default={default}"]
        if self.kind in ("float", "opt_float"):
            return ["type=float", f"default={default}"]
        if self.kind == "choice":
            choices = ", ".join(f'"{c}"' for c in self.choices)
            return ["type=str", f"choices=[{choices}]", f"default={default}"]
        if self.kind == "list_str":
            return ["type=str", 'nargs="+"', "default=None"]
        if self.kind == "list_int":
            return ["type=int", 'nargs="+"', "default=None"]
        return ["type=str", f"default={default}"]


def _o(
    group: str,
    flag: str,
    kind: Kind,
    default: object = None,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] = (),
    help: str = "",
    reset: bool = False,
) -> Option:
    if kind == "flag":
        default = False
    return Option(flag, kind, group, default, low, high, choices, help, reset)


DEFAULT_ROLLOUT_FUNCTION_PATH = "miles.rollout.sglang_rollout.generate_rollout"

CORE_OPTIONS: tuple[Option, ...] = (
    _o("cluster", "--actor-num-nodes", "int", 1, 1, 64),
    _o("cluster", "--actor-num-gpus-per-node", "int", 8, 1, 8),
    _o("cluster", "--critic-num-nodes", "opt_int"),
    _o("cluster", "--critic-num-gpus-per-node", "opt_int"),
    _o(
        "cluster",
        "--rollout-num-gpus",
        "opt_int",
        help="Number of GPUs for inference; ignored with --colocate.",
    ),
    _o("cluster", "--rollout-num-gpus-per-engine", "int", 1, 1, 8),
    _o("cluster", "--num-gpus-per-node", "int", 8, 1, 8),
    _o(
        "cluster",
        "--colocate",
        "flag",
        help="Colocate the inference engines and the actor on the same GPUs; turns train offload on.",
    ),
    _o("cluster", "--offload", "flag", help="Equivalent to --offload-train --offload-rollout."),
    _o("cluster", "--offload-train", "bool_opt", help="Offload the training actor to CPU during rollout."),
    _o(
        "cluster", "--offload-rollout", "bool_opt", help="Offload the rollout engines to CPU during training."
    ),
    _o("train", "--train-backend", "choice", "megatron", choices=("megatron", "fsdp")),
    _o(
        "train",
        "--disable-weights-backuper",
        "flag",
        help="Do not keep a CPU copy of the actor weights (saves host memory).",
    ),
    _o("train", "--megatron-to-hf-mode", "choice", "raw", choices=("raw", "bridge")),
    _o("train", "--custom-model-provider-path", "str"),
    _o("train", "--recompute-loss-function", "flag"),
    _o("train", "--keep-old-actor", "flag"),
    _o("train", "--use-dynamic-batch-size", "flag"),
    _o("train", "--max-tokens-per-gpu", "opt_int"),
    _o("train", "--log-probs-max-tokens-per-gpu", "opt_int"),
    _o("train", "--ref-load", "str", help="Checkpoint of the reference model (KL penalty)."),
    _o("train", "--ref-ckpt-step", "opt_int"),
    _o("train", "--update-weight-buffer-size", "int", 512 * 1024**2, 1, 1 << 40),
    _o("lora", "--lora-rank", "int", 0, 0, 1024, help="LoRA rank; 0 disables LoRA."),
    _o("lora", "--lora-alpha", "int", 16, 1, 4096),
    _o("lora", "--lora-dropout", "float", 0.0, 0.0, 1.0),
    _o("lora", "--target-modules", "str", help="Comma-separated module names, or all-linear."),
    _o("lora", "--exclude-modules", "str"),
    _o("lora", "--lora-adapter-path", "str"),
    _o("rollout", "--hf-checkpoint", "str"),
    _o("rollout", "--rollout-function-path", "str", DEFAULT_ROLLOUT_FUNCTION_PATH),
    _o("rollout", "--rollout-temperature", "float", 1.0, 0.0, 2.0),
    _o("rollout", "--rollout-top-p", "float", 1.0, 0.0, 1.0),
    _o("rollout", "--rollout-top-k", "int", -1, -1, 1000),
    _o("rollout", "--rollout-max-response-len", "int", 1024, 1, 1 << 20),
    _o("rollout", "--rollout-max-prompt-len", "opt_int"),
    _o("rollout", "--rollout-stop", "list_str"),
    _o("rollout", "--rollout-shuffle", "flag"),
    _o("rollout", "--rollout-seed", "int", 42, 0, 1 << 31),
    _o("rollout", "--over-sampling-batch-size", "opt_int"),
    _o("rollout", "--dynamic-sampling-filter-path", "str"),
    _o("rollout", "--partial-rollout", "flag"),
    _o("rollout", "--rollout-batch-size", "int", 32, 1, 1 << 16),
    _o("rollout", "--n-samples-per-prompt", "int", 1, 1, 1024),
    _o("rollout", "--num-rollout", "opt_int"),
    _o("rollout", "--num-epoch", "opt_int"),
    _o("rollout", "--num-steps-per-rollout", "opt_int"),
    _o("rollout", "--balance-data", "flag"),
    _o("rollout", "--use-rollout-routing-replay", "flag"),
    _o("data", "--prompt-data", "str"),
    _o("data", "--input-key", "str", "input"),
    _o("data", "--label-key", "str"),
    _o("data", "--metadata-key", "str", "metadata"),
    _o("data", "--tool-key", "str"),
    _o("data", "--apply-chat-template", "flag"),
    _o("data", "--rm-type", "str"),
    _o("data", "--reward-key", "str"),
    _o("data", "--custom-rm-path", "str"),
    _o("eval", "--eval-interval", "opt_int"),
    _o("eval", "--eval-prompt-data", "list_str", help="Pairs of dataset name and path."),
    _o("eval", "--eval-config", "str"),
    _o("eval", "--n-samples-per-eval-prompt", "int", 1, 1, 1024),
    _o("eval", "--eval-max-response-len", "opt_int"),
    _o("eval", "--eval-top-p", "float", 1.0, 0.0, 1.0),
    _o("eval", "--eval-top-k", "int", -1, -1, 1000),
    _o("eval", "--eval-temperature", "opt_float"),
    _o(
        "algo",
        "--advantage-estimator",
        "choice",
        "grpo",
        choices=("grpo", "gspo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "ppo"),
    ),
    _o("algo", "--use-kl-loss", "flag"),
    _o("algo", "--kl-coef", "float", 0.0, 0.0, 10.0),
    _o("algo", "--kl-loss-coef", "float", 0.0, 0.0, 10.0),
    _o("algo", "--kl-loss-type", "choice", "kl", choices=("kl", "k2", "k3", "low_var_kl")),
    _o("algo", "--entropy-coef", "float", 0.0, 0.0, 1.0),
    _o("algo", "--eps-clip", "float", 0.2, 0.0, 1.0),
    _o("algo", "--eps-clip-high", "opt_float"),
    _o("algo", "--eps-clip-c", "opt_float"),
    _o("algo", "--normalize-advantages", "flag"),
    _o("algo", "--use-tis", "flag"),
    _o("algo", "--tis-clip", "float", 2.0, 1.0, 100.0),
    _o("debug", "--debug-rollout-only", "flag"),
    _o("debug", "--debug-train-only", "flag"),
    _o("debug", "--save-debug-rollout-data", "str"),
    _o("debug", "--load-debug-rollout-data", "str"),
    _o("debug", "--check-weight-update-equal", "flag"),
    _o("ci", "--ci-test", "flag"),
    _o("ci", "--ci-disable-kl-checker", "flag"),
    _o("ci", "--ci-metric-checker-key", "str"),
    _o("ci", "--ci-metric-checker-threshold", "opt_float"),
    _o("wandb", "--use-wandb", "flag"),
    _o("wandb", "--wandb-project", "str"),
    _o("wandb", "--wandb-group", "str"),
    _o("wandb", "--wandb-key", "str"),
    _o("fault_tolerance", "--use-fault-tolerance", "flag"),
    _o("fault_tolerance", "--rollout-health-check-interval", "float", 30.0, 0.0, 3600.0),
    _o("fault_tolerance", "--rollout-health-check-timeout", "float", 30.0, 0.0, 3600.0),
    _o(
        "misc",
        "--hf-config-mismatch",
        "choice",
        "warn",
        choices=("warn", "error"),
        help="What to do when the HF config and the Megatron model arguments disagree.",
    ),
    _o("misc", "--custom-config-path", "str"),
    _o("misc", "--model-name", "str"),
    # Megatron owns these upstream; miles re-declares them with its own defaults.
    _o("megatron", "--load", "str", reset=True),
    _o("megatron", "--save", "str", reset=True),
    _o("megatron", "--save-interval", "opt_int", reset=True),
    _o("megatron", "--seed", "int", 1234, 0, 1 << 31, reset=True),
    _o("megatron", "--lr", "float", 1e-6, 0.0, 1.0, reset=True),
    _o("megatron", "--min-lr", "float", 0.0, 0.0, 1.0, reset=True),
    _o(
        "megatron",
        "--lr-decay-style",
        "choice",
        "constant",
        choices=("constant", "linear", "cosine"),
        reset=True,
    ),
    _o("megatron", "--weight-decay", "float", 0.0, 0.0, 1.0, reset=True),
    _o("megatron", "--clip-grad", "float", 1.0, 0.0, 100.0, reset=True),
    _o("megatron", "--global-batch-size", "opt_int", reset=True),
    _o("megatron", "--tokenizer-type", "str", "HuggingFaceTokenizer", reset=True),
    _o("megatron", "--padded-vocab-size", "opt_int", reset=True),
)

# Flags that Megatron or SGLang define and the CI suites pass: the miles parser never defines them, so no
# generated miles option may start with one of them (argparse abbreviations would swallow it).
UPSTREAM_FLAGS: tuple[str, ...] = (
    "--tensor-model-parallel-size",
    "--sequence-parallel",
    "--pipeline-model-parallel-size",
    "--context-parallel-size",
    "--expert-model-parallel-size",
    "--expert-tensor-parallel-size",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--optimizer",
    "--attention-dropout",
    "--hidden-dropout",
    "--accumulate-allreduce-grads-in-fp32",
    "--attention-softmax-in-fp32",
    "--attention-backend",
    "--adam-beta1",
    "--adam-beta2",
    "--num-layers",
    "--hidden-size",
    "--ffn-hidden-size",
    "--num-attention-heads",
    "--group-query-attention",
    "--num-query-groups",
    "--use-rotary-position-embeddings",
    "--disable-bias-linear",
    "--normalization",
    "--norm-epsilon",
    "--rotary-base",
    "--vocab-size",
    "--kv-channels",
    "--qk-layernorm",
    "--swiglu",
    "--untie-embeddings-and-output-weights",
    "--add-qkv-bias",
    "--num-experts",
    "--moe-router-topk",
    "--moe-ffn-hidden-size",
    "--moe-layer-freq",
    "--moe-grouped-gemm",
    "--moe-token-dispatcher-type",
    "--moe-router-score-function",
    "--moe-aux-loss-coeff",
    "--moe-router-load-balancing-type",
    "--multi-latent-attention",
    "--q-lora-rank",
    "--kv-lora-rank",
    "--qk-head-dim",
    "--qk-pos-emb-head-dim",
    "--v-head-dim",
    "--position-embedding-type",
    "--rotary-percent",
    "--mtp-num-layers",
    "--sglang-mem-fraction-static",
    "--sglang-enable-dp-attention",
    "--sglang-dp-size",
    "--sglang-cuda-graph-max-bs",
    "--sglang-enable-metrics",
    "--sglang-router-ip",
    "--sglang-router-port",
    "--use-distributed-optimizer",
    "--bf16",
    "--micro-batch-size",
    "--decoder-last-pipeline-num-layers",
    "--calculate-per-token-loss",
    "--log-interval",
    "--eval-iters",
    "--no-load-optim",
    "--no-load-rng",
)

_SYNTHETIC_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rollout_buffer", ("buffer", "rollout-buffer")),
    ("router", ("miles-router", "router-policy")),
    ("network", ("http", "rpc", "dist-init")),
    ("reward_model", ("rm", "reward", "verifier")),
    ("profiling", ("profile", "memory-snapshot", "trace")),
    ("checkpoint", ("ckpt", "async-save", "hf-export")),
    ("fault_tolerance", ("ft", "health")),
    ("onpolicy_distillation", ("opd", "teacher")),
    ("mtp_training", ("mtp-train", "draft")),
    ("disaggregation", ("prefill", "decode-side", "kv-transfer")),
    ("multi_turn", ("multi-turn", "tool-call", "agent")),
    ("dump", ("dump", "debug-dump")),
    ("update_weight", ("update-weight", "weight-sync")),
    ("sampling", ("sampling", "filter")),
    ("dataset", ("dataset", "packing")),
    ("logging", ("log-extra", "metrics", "tb")),
    ("critic", ("critic", "value-head")),
    ("partial_rollout", ("partial", "abort")),
    ("scheduler", ("sched", "queue")),
    ("memory", ("mem", "cpu-adam")),
)
_QUALIFIERS = (
    "max",
    "min",
    "num",
    "target",
    "default",
    "base",
    "extra",
    "async",
    "prefetch",
    "warmup",
    "eval",
    "train",
    "global",
    "local",
    "per-gpu",
    "per-engine",
    "per-node",
    "initial",
    "soft",
    "hard",
)
_INT_NOUNS = (
    "batch",
    "workers",
    "requests",
    "chunks",
    "shards",
    "steps",
    "retries",
    "port",
    "slots",
    "capacity",
    "tokens",
    "samples",
    "stages",
    "epochs",
    "pages",
    "blocks",
    "replicas",
)
_FLOAT_NOUNS = (
    "timeout",
    "interval",
    "ratio",
    "threshold",
    "weight",
    "scale",
    "factor",
    "margin",
    "delay",
    "fraction",
    "budget",
)
_STR_NOUNS = ("dir", "path", "name", "tag", "prefix", "endpoint")
_CHOICE_NOUNS = ("mode", "level", "policy", "strategy", "backend")
_FLAG_VERBS = ("enable", "disable", "use", "skip", "force", "keep", "log")
_FLAG_NOUNS = (
    "cache",
    "compression",
    "overlap",
    "pinning",
    "checks",
    "stats",
    "fallback",
    "sharding",
    "prefetch",
    "dedup",
    "warmup",
    "padding",
    "streaming",
    "timing",
)
_CHOICES = (
    ("auto", "always", "never"),
    ("fifo", "lifo", "priority"),
    ("none", "basic", "full"),
    ("local", "remote", "hybrid"),
    ("fast", "balanced", "exact"),
)


def synthetic_options(count: int, rng: random.Random, taken: set[str]) -> list[Option]:
    """`count` seeded options spread over the provider's groups, none colliding with `taken` or upstream."""
    options: list[Option] = []
    while len(options) < count:
        group, prefixes = _SYNTHETIC_GROUPS[len(options) % len(_SYNTHETIC_GROUPS)]
        option = _one_synthetic(group, rng.choice(prefixes), rng)
        if option.flag in taken or not _prefix_safe(option.flag):
            continue
        taken.add(option.flag)
        options.append(option)
    return options


def _prefix_safe(flag: str) -> bool:
    return not any(flag.startswith(up) or up.startswith(flag) for up in UPSTREAM_FLAGS)


def _one_synthetic(group: str, prefix: str, rng: random.Random) -> Option:
    roll = rng.random()
    qualifier = rng.choice(_QUALIFIERS)
    if roll < 0.22:
        flag = f"--{prefix}-{rng.choice(_FLAG_VERBS)}-{rng.choice(_FLAG_NOUNS)}"
        return _o(group, flag, "flag")
    if roll < 0.47:
        noun = rng.choice(_INT_NOUNS)
        int_low = rng.choice((0, 1, 1, 2))
        int_high = int_low + rng.choice((8, 64, 1024, 65536))
        default = rng.randint(int_low, min(int_high, int_low + 16))
        kind: Kind = "opt_int" if rng.random() < 0.3 else "int"
        return _o(
            group,
            f"--{prefix}-{qualifier}-{noun}",
            kind,
            None if kind == "opt_int" else default,
            int_low,
            int_high,
        )
    if roll < 0.67:
        noun = rng.choice(_FLOAT_NOUNS)
        low = rng.choice((0.0, 0.0, 0.01, 1.0))
        high = low + rng.choice((1.0, 10.0, 600.0))
        float_default = round(rng.uniform(low, low + (high - low) / 2), 3)
        kind = "opt_float" if rng.random() < 0.25 else "float"
        return _o(
            group,
            f"--{prefix}-{qualifier}-{noun}",
            kind,
            None if kind == "opt_float" else float_default,
            low,
            high,
        )
    if roll < 0.82:
        noun = rng.choice(_STR_NOUNS)
        return _o(group, f"--{prefix}-{qualifier}-{noun}", "str")
    if roll < 0.93:
        choices = rng.choice(_CHOICES)
        return _o(
            group,
            f"--{prefix}-{qualifier}-{rng.choice(_CHOICE_NOUNS)}",
            "choice",
            choices[0],
            choices=choices,
        )
    noun = rng.choice(_INT_NOUNS + _STR_NOUNS)
    kind = "list_int" if noun in _INT_NOUNS else "list_str"
    return _o(group, f"--{prefix}-{qualifier}-{noun}s-list", kind, low=0, high=1 << 16)


# Declared in miles/backends/sglang_utils/arguments.py (support.py), not by the provider's groups.
SGLANG_OWN_OPTIONS = ("--sglang-server-concurrency",)


def all_options(total: int, rng: random.Random) -> list[Option]:
    """The core options and enough synthetic ones that, with SGLANG_OWN_OPTIONS, miles defines `total`."""
    taken = {o.flag for o in CORE_OPTIONS} | set(SGLANG_OWN_OPTIONS)
    count = max(0, total - len(CORE_OPTIONS) - len(SGLANG_OWN_OPTIONS))
    return [*CORE_OPTIONS, *synthetic_options(count, rng, taken)]


def provider_source(options: list[Option]) -> str:
    """The `add_*_arguments` functions and `get_miles_extra_args_provider`, in source order."""
    groups: dict[str, list[Option]] = {}
    for option in options:
        groups.setdefault(option.group, []).append(option)
    out: list[str] = []
    for group, members in groups.items():
        out += ["", "", f"def add_{group}_arguments(parser):"]
        for option in members:
            out += option.source()
        out.append("    return parser")
    calls = "\n".join(f"        parser = add_{group}_arguments(parser)" for group in groups)
    out += ["", "", _PROVIDER.format(calls=calls)]
    return "\n".join(out) + "\n"


_PROVIDER = """def get_miles_extra_args_provider(add_custom_arguments=None):
    def add_miles_arguments(parser):
        # Megatron calls this with its own parser: every miles option joins Megatron's.
{calls}
        parser = add_sglang_arguments(parser)
        if add_custom_arguments is not None:
            parser = add_custom_arguments(parser)
        return parser

    return add_miles_arguments"""
