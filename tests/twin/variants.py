"""The pull requests of the miles twin: each variant's head as edits of the base tree, and its base branch."""

from __future__ import annotations

from dataclasses import dataclass

ARGUMENTS = "miles/utils/arguments.py"
FSDP_TEST = "tests/e2e/short/test_qwen3_0.6B_fsdp.py"


@dataclass(frozen=True)
class Edit:
    """Replace one exact snippet of one file; the snippet must occur exactly once."""

    path: str
    old: str
    new: str

    def apply(self, text: str) -> str:
        found = text.count(self.old)
        if found != 1:
            raise ValueError(f"{self.path}: edit anchor occurs {found} times, expected once: {self.old!r}")
        return text.replace(self.old, self.new)


def _insert_before(path: str, anchor: str, lines: str) -> Edit:
    return Edit(path, anchor, lines + anchor)


def _insert_after(path: str, anchor: str, lines: str) -> Edit:
    return Edit(path, anchor, anchor + lines)


# The PR that broke five LoRA suites: `--colocate` turns offload_train on two statements earlier.
INCIDENT_ASSERT = ("assert not (args.lora_rank and args.offload_train and args.disable_weights_backuper), "
                   '"LoRA with --offload-train and --disable-weights-backuper is not supported: the '
                   'offloaded LoRA weights can only be restored from the backuper"')
INCIDENT = _insert_before(ARGUMENTS, "    if args.rollout_num_gpus is None:\n", f"    {INCIDENT_ASSERT}\n\n")

REMOVED_FLAG = "--check-weight-update-equal"
REMOVE_OPTION = Edit(ARGUMENTS, '    parser.add_argument("--check-weight-update-equal", action="store_true", '
                                'default=False, help="Compare engine weights with the trainer\'s after each '
                                'update.")\n', "")
REMOVE_OPTION_USE = Edit(ARGUMENTS, "    if args.check_weight_update_equal:\n"
                                    "        assert args.colocate, "
                                    "\"--check-weight-update-equal compares the colocated "
                                    "engines' weights\"\n\n",
                         "")

ATTRIBUTE_READ = "if args.no_such_option:"
ATTRIBUTE_ERROR = _insert_before(ARGUMENTS, "    if args.eps_clip_high is None:\n",
                                 "    # greedy evaluation pins the temperature\n"
                                 f"    {ATTRIBUTE_READ}\n        args.rollout_temperature = 0.0\n\n")

UNREACHED_ASSERT = ('assert args.rollout_external_engine_addrs, '
                    '"--rollout-external needs --rollout-external-engine-addrs"')
UNEXERCISED = _insert_after(ARGUMENTS, "    if args.rollout_external:\n", f"        {UNREACHED_ASSERT}\n")

ENV_ASSERT = ('assert not args.partial_rollout, '
              '"--partial-rollout is not supported by the refactored rollout yet"')
ENV_SENSITIVE = _insert_after(ARGUMENTS, "        args.rollout_function_path = REFACTORED_ROLLOUT_FUNCTION\n",
                              f"        {ENV_ASSERT}\n")

# Harness noise: generation_config.json exists on CI hosts, in no sandbox, under no fixture pattern and
# outside the policy's CI-host prefixes (under /root/ it would be an empty file: a JSONDecodeError instead).
NOISE_OPEN = _insert_after(ARGUMENTS, "def miles_validate_args(args):\n",
                           "    # sampling defaults (stop tokens): the model's generation config\n"
                           '    model = os.path.basename(args.hf_checkpoint.rstrip("/"))\n'
                           '    with open(os.path.join("/mnt/nfs/generation_configs", model, '
                           '"generation_config.json")) as f:\n'
                           "        generation_config = json.load(f)\n\n")
NOISE_USE = _insert_before(ARGUMENTS, "    if args.eps_clip_high is None:\n",
                           "    if args.rollout_stop_token_ids is None:\n"
                           '        args.rollout_stop_token_ids = generation_config.get("eos_token_id")\n'
                           "    assert args.rollout_stop_token_ids, "
                           '"no stop token: pass --rollout-stop-token-ids"\n\n')

# A PR that adds an option and makes one CI script depend on a variable only CI runners set.
ADD_SEED_OPTION = _insert_after(ARGUMENTS, '    parser.add_argument("--rollout-temperature", type=float, '
                                           "default=1.0)\n",
                                '    parser.add_argument("--rollout-seed", type=int, default=42)\n')
SEED_FROM_RUNNER = Edit(FSDP_TEST, '        extra_args="--gradient-checkpointing",\n',
                        "        extra_args=f\"--gradient-checkpointing "
                        "--rollout-seed {os.environ['MILES_CI_SEED']}\",\n")
IMPORT_OS = _insert_before(FSDP_TEST, "from scripts.run_qwen3_4b", "import os\n\n")

# A PR that forbids zigzag context parallelism for DSA checkpoints; only the GLM-5 suite's checkpoint is
# one, which the validation sees only in the config.json served at its own path (`fixture_file`).
# radixark/miles: miles/utils/arguments.py hf_validate_args has the same shape for DeepSeek V4:
#   if (hf_config.model_type == "deepseek_v4" or ...) and args.context_parallel_size > 1:
#       assert args.allgather_cp, "zigzag CP is not supported for DeepSeek V4."
DSA_ASSERT = 'assert getattr(args, "allgather_cp", False), "zigzag CP is not supported for DSA models."'
DSA_CONTEXT_PARALLEL = _insert_before(ARGUMENTS, '    if getattr(hf_config, "num_experts", None) and not ',
                                      "    if is_dsa(hf_config) and args.context_parallel_size > 1:\n"
                                      f"        {DSA_ASSERT}\n")


@dataclass(frozen=True)
class Variant:
    name: str
    base: str  # the tree (branch) the head is compared against
    edits: tuple[Edit, ...]  # the head tree, as edits of the pristine base tree
    message: str  # commit message of the head


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("incident", "main", (INCIDENT,),
            "Forbid LoRA + offload-train + disable-weights-backuper"),
    Variant("revert", "incident", (),
            'Revert "Forbid LoRA + offload-train + disable-weights-backuper"\n\n'
            "A follow-up PR will add the fail-fast where the weights are restored instead."),
    Variant("removed_flag", "main", (REMOVE_OPTION, REMOVE_OPTION_USE),
            "Remove the unused --check-weight-update-equal"),
    Variant("attribute_error", "main", (ATTRIBUTE_ERROR,),
            "Pin the temperature for greedy evaluation"),
    Variant("unexercised", "main", (UNEXERCISED,),
            "Require engine addresses with --rollout-external"),
    Variant("harness_noise-base", "main", (NOISE_OPEN, NOISE_USE),
            "Take stop tokens from generation_config.json"),
    Variant("harness_noise", "harness_noise-base", (NOISE_OPEN, NOISE_USE, INCIDENT),
            "Forbid LoRA + offload-train + disable-weights-backuper"),
    Variant("capture_failure", "main", (ADD_SEED_OPTION, SEED_FROM_RUNNER, IMPORT_OS),
            "Add --rollout-seed; the FSDP test takes the runner's seed"),
    Variant("env_sensitive", "main", (ENV_SENSITIVE,),
            "The refactored rollout does not support partial rollout yet"),
    Variant("dsa_context_parallel", "main", (DSA_CONTEXT_PARALLEL,),
            "Zigzag context parallelism is not supported for DSA models"),
)}


def edits_of(tree: str) -> tuple[Edit, ...]:
    """The edits that make `tree` ('base' or 'main' for the pristine tree, else a variant name)."""
    if tree in ("base", "main"):
        return ()
    if tree not in VARIANTS:
        raise KeyError(f"no miles twin variant {tree!r}; known: base, {', '.join(VARIANTS)}")
    return VARIANTS[tree].edits
