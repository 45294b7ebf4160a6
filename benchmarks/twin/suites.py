"""The twin's CI suites: a seeded plan per e2e script (model, GPUs, flags, role) and the script's source.

Roles say what the verdict must make of a suite: most are accepted at both revisions; the incident suites
(LoRA + `--colocate` + `--disable-weights-backuper`) are newly rejected at head; decoys pass part of that
combination and must stay accepted; a few suites are already broken at base (rejected at both revisions).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from benchmarks.twin.options import CORE_OPTIONS, Option
from benchmarks.twin.support import MODELS, Model

Expect = Literal["accepted", "new_rejection", "rejected_both"]
Template = Literal["plain", "variants", "config_read", "ckpt_read", "typer", "router_wait"]

# What the policy's fixtures serve to the scripts that read them (benchmarks/twin/policy.yml).
FIXTURE_NUM_HIDDEN_LAYERS = 28
FIXTURE_CHECKPOINT_ITERATION = 0


@dataclass(frozen=True)
class Arg:
    """One flag with its value(s): `code` as written in the script, `text` what it evaluates to."""

    code: str
    text: str

    @classmethod
    def plain(cls, text: str) -> Arg:
        return cls(text, text)


@dataclass
class Variant:
    """One launch of a script: its flag sections and what the verdict must say about it."""

    role: str
    expect: Expect
    sections: dict[str, list[Arg]]
    mode: str = "normal"

    def train_args(self) -> str:
        return "".join(arg.text + " " for args in self.sections.values() for arg in args)


@dataclass
class ScriptPlan:
    path: str
    group: str
    template: Template
    model: Model
    num_gpus: int
    backend: str
    train_script: str
    stage: str
    est_time: int
    labels: list[str]
    disabled: str | None
    extra_env: dict[str, str]
    variants: list[Variant] = field(default_factory=list)
    lora: tuple[int, int] | None = None  # rank, alpha through tests/e2e/lora/lora_utils.py

    def to_json(self) -> dict[str, Any]:
        return {
            "script": self.path,
            "template": self.template,
            "disabled": self.disabled,
            "model_type": self.model.type if self.backend == "megatron" else None,
            "train_script": self.train_script,
            "extra_env": self.extra_env,
            "variants": [
                {"role": v.role, "expect": v.expect, "mode": v.mode, "train_args": self.full_train_args(v)}
                for v in self.variants
            ],
        }

    def full_train_args(self, variant: Variant) -> str:
        lora = _lora_text(*self.lora) if self.lora else ""
        return variant.train_args() + lora


def _lora_text(rank: int, alpha: int) -> str:
    return (
        f"--lora-rank {rank} --lora-alpha {alpha} --lora-dropout 0.0 --target-modules all-linear "
        "--megatron-to-hf-mode bridge "
    )


# (role, count at 150 scripts); the rest are ordinary suites.
_ROLE_COUNTS: tuple[tuple[str, int], ...] = (
    ("incident", 5),
    ("disabled_incident", 1),
    ("disabled", 2),
    ("variants", 3),
    ("lora_colocate", 6),
    ("lora_dwb", 3),
    ("lora_colocate_dwb_no_offload", 1),
    ("colocate_dwb", 3),
    ("broken", 2),
    ("fsdp", 3),
    ("async", 6),
    ("config_read", 12),
    ("ckpt_read", 8),
    ("typer", 10),
    ("router_wait", 4),
)
_DATASETS = (
    ("dapo-math-17k", "dapo-math-17k.jsonl", "prompt", "deepscaler"),
    ("gsm8k", "train.parquet", "messages", "math"),
    ("deepscaler", "deepscaler.jsonl", "prompt", "deepscaler"),
    ("countdown", "train.jsonl", "messages", "countdown"),
    ("search-r1", "train.parquet", "question", "search"),
)
_EVALS = (
    ("aime", "aime-2024/aime-2024.jsonl"),
    ("gsm8k", "gsm8k/test.parquet"),
    ("gpqa", "gpqa/gpqa_diamond.jsonl"),
    ("math500", "math500/test.jsonl"),
)
_GROUPS = ("short", "long", "ckpt", "precision", "eval", "multi_turn", "megatron", "sglang")


class Planner:
    """Seeded plans for `count` scripts using `pool` (synthetic options suites may pass, with values)."""

    def __init__(self, count: int, pool: dict[str, tuple[Option, str | None]], rng: random.Random) -> None:
        self.count = count
        self.pool = pool
        self.rng = rng
        self.paths: set[str] = set()

    def roles(self) -> list[str]:
        scale = self.count / 150
        roles: list[str] = []
        for role, count in _ROLE_COUNTS:
            roles += [role] * max(1, round(count * scale))
        roles = roles[: self.count]
        roles += ["normal"] * (self.count - len(roles))
        self.rng.shuffle(roles)
        return roles

    def plans(self) -> list[ScriptPlan]:
        return [self.plan(role, index) for index, role in enumerate(self.roles())]

    def plan(self, role: str, index: int) -> ScriptPlan:
        rng = self.rng
        lora_role = role.startswith("lora") or role in ("incident", "disabled_incident")
        backend = "fsdp" if role == "fsdp" else "megatron"
        models = [m for m in MODELS if m.moe is None] if lora_role or backend == "fsdp" else list(MODELS)
        model = rng.choice(models)
        gpus = [g for g in model.gpus if g >= 2] if role in ("async", "lora_dwb") else list(model.gpus)
        num_gpus = rng.choice(gpus or [8])
        group = (
            "lora"
            if lora_role
            else "fsdp"
            if backend == "fsdp"
            else "async"
            if role == "async"
            else "router"
            if role == "router_wait"
            else "moe"
            if model.moe
            else rng.choice(_GROUPS)
        )
        templates: tuple[Template, ...] = ("variants", "config_read", "ckpt_read", "typer", "router_wait")
        template: Template = next((t for t in templates if t == role), "plain")
        plan = ScriptPlan(
            path=self._path(group, model, role),
            group=group,
            template=template,
            model=model,
            num_gpus=num_gpus,
            backend=backend,
            train_script="train_async.py" if role == "async" else "train.py",
            stage=f"stage-{'abcd'[min(3, num_gpus // 2)]}-{num_gpus}-gpu",
            est_time=rng.choice((300, 600, 900, 1800)),
            labels=[group, model.type.split("-")[0]],
            disabled=("flaky on the H200 runners, see #1187" if role.startswith("disabled") else None),
            extra_env=(
                {"MILES_EXPERIMENTAL_ROLLOUT_REFACTOR": "1"}
                if role == "normal" and rng.random() < 0.15
                else {}
            ),
            lora=(rng.choice((8, 16, 32, 64)), rng.choice((16, 32, 64))) if lora_role else None,
        )
        plan.variants.append(self._variant(plan, role))
        if role == "variants":
            second = self._variant(plan, role)
            second.sections = {
                **plan.variants[0].sections,
                "extra": [Arg.plain("--use-tis"), Arg.plain("--tis-clip 2.0")],
            }
            second.mode = "tis"
            plan.variants.append(second)
        return plan

    def _path(self, group: str, model: Model, role: str) -> str:
        topic = self.rng.choice(
            (
                "gsm8k",
                "dapo_math",
                "deepscaler",
                "aime",
                "countdown",
                "search_r1",
                "retool",
                "gpqa",
                "short_run",
                "ckpt_resume",
                "mem_leak",
                "precision",
            )
        )
        slug = model.type.replace("-", "_").replace(".", "_").lower()
        base = f"tests/e2e/{group}/test_{slug}_{topic}"
        path, suffix = f"{base}.py", 2
        while path in self.paths:
            path, suffix = f"{base}_{suffix}.py", suffix + 1
        self.paths.add(path)
        return path

    def _variant(self, plan: ScriptPlan, role: str) -> Variant:
        colocate = (
            role
            in (
                "incident",
                "disabled_incident",
                "lora_colocate",
                "lora_colocate_dwb_no_offload",
                "colocate_dwb",
            )
            or (plan.num_gpus == 1)
            or (role not in ("async", "lora_dwb") and self.rng.random() < 0.5)
        )
        megatron = plan.backend == "megatron"
        sections = {
            "ckpt": self._ckpt(plan, megatron),
            "rollout": self._rollout(role),
            "eval": self._eval() if self.rng.random() < 0.5 else [],
            "perf": self._perf(plan, colocate) if megatron else [],
            "grpo": self._grpo(megatron),
            "optimizer": self._optimizer(megatron),
            "sglang": self._sglang(plan, colocate, megatron),
            "cluster": self._cluster(plan, colocate),
            "ci": [Arg.plain("--ci-test")]
            + ([Arg.plain("--ci-disable-kl-checker")] if self.rng.random() < 0.2 else []),
            "misc": self._misc(role, megatron),
        }
        expect: Expect = (
            "new_rejection"
            if role in ("incident", "disabled_incident")
            else "rejected_both"
            if role == "broken"
            else "accepted"
        )
        return Variant(role=role, expect=expect, sections=sections)

    def _ckpt(self, plan: ScriptPlan, megatron: bool) -> list[Arg]:
        name = plan.model.hf_name
        args = [Arg("--hf-checkpoint /root/models/{MODEL_NAME}/", f"--hf-checkpoint /root/models/{name}/")]
        if megatron:
            args.append(
                Arg(
                    "--ref-load /root/models/{MODEL_NAME}_torch_dist/",
                    f"--ref-load /root/models/{name}_torch_dist/",
                )
            )
        if plan.template == "ckpt_read":
            args.append(
                Arg(
                    "--load /root/models/{MODEL_NAME}_miles/ --ref-ckpt-step {iteration}",
                    f"--load /root/models/{name}_miles/ --ref-ckpt-step {FIXTURE_CHECKPOINT_ITERATION}",
                )
            )
        elif megatron and self.rng.random() < 0.3:
            args += [
                Arg("--save /root/models/{MODEL_NAME}_miles/", f"--save /root/models/{name}_miles/"),
                Arg.plain("--save-interval 20"),
            ]
        return args

    def _rollout(self, role: str) -> list[Arg]:
        rng = self.rng
        dataset, filename, key, rm = rng.choice(_DATASETS)
        if role == "broken":
            batch, samples, global_batch = 30, 3, "--global-batch-size 64"
        else:
            batch, samples = rng.choice((8, 16, 32, 64)), rng.choice((2, 4, 8, 16))
            divisor = rng.choice((1, 2, 4))
            global_batch = f"--global-batch-size {batch * samples // divisor}" if rng.random() < 0.7 else ""
        args = [
            f"--prompt-data /root/datasets/{dataset}/{filename}",
            f"--input-key {key}",
            "--label-key label",
            "--apply-chat-template",
            "--rollout-shuffle",
            f"--rm-type {rm}",
            f"--num-rollout {rng.choice((2, 3, 10, 100, 3000))}",
            f"--rollout-batch-size {batch}",
            f"--n-samples-per-prompt {samples}",
            f"--rollout-max-response-len {rng.choice((1024, 2048, 4096, 8192))}",
            f"--rollout-temperature {rng.choice(('0.8', '1.0', '1'))}",
        ]
        if global_batch:
            args.append(global_batch)
        if rng.random() < 0.2:
            args.append(f"--over-sampling-batch-size {batch * 2}")
        return [Arg.plain(a) for a in args]

    def _eval(self) -> list[Arg]:
        name, path = self.rng.choice(_EVALS)
        return [
            Arg.plain(a)
            for a in (
                "--eval-interval 20",
                f"--eval-prompt-data {name} /root/datasets/{path}",
                f"--n-samples-per-eval-prompt {self.rng.choice((1, 4, 16))}",
                f"--eval-max-response-len {self.rng.choice((4096, 16384))}",
                "--eval-top-k 1",
            )
        ]

    def _perf(self, plan: ScriptPlan, colocate: bool) -> list[Arg]:
        actor = plan.num_gpus if colocate else plan.num_gpus // 2
        tp = 2 if actor % 2 == 0 and plan.model.heads % 2 == 0 and self.rng.random() < 0.5 else 1
        ep = actor if plan.model.moe else 1
        recompute = (
            "--recompute-num-layers {max(1, num_layers // 28)}"
            if plan.template == "config_read"
            else "--recompute-num-layers 1"
        )
        args = [
            Arg.plain(a)
            for a in (
                f"--tensor-model-parallel-size {tp}",
                "--sequence-parallel",
                "--pipeline-model-parallel-size 1",
                "--context-parallel-size 1",
                f"--expert-model-parallel-size {ep}",
                "--expert-tensor-parallel-size 1",
                "--recompute-granularity full",
                "--recompute-method uniform",
            )
        ]
        args.append(
            Arg(
                recompute,
                f"--recompute-num-layers {max(1, FIXTURE_NUM_HIDDEN_LAYERS // 28)}"
                if plan.template == "config_read"
                else recompute,
            )
        )
        args += [
            Arg.plain("--use-dynamic-batch-size"),
            Arg.plain(f"--max-tokens-per-gpu {self.rng.choice((4608, 9216, 16384))}"),
        ]
        return args

    def _grpo(self, megatron: bool) -> list[Arg]:
        estimator = self.rng.choice(("grpo", "grpo", "gspo", "reinforce_plus_plus"))
        args = [f"--advantage-estimator {estimator}"]
        if megatron:
            args += ["--use-kl-loss", "--kl-loss-coef 0.00", "--kl-loss-type low_var_kl"]
        args += ["--entropy-coef 0.00", "--eps-clip 0.2", "--eps-clip-high 0.28"]
        return [Arg.plain(a) for a in args]

    def _optimizer(self, megatron: bool) -> list[Arg]:
        args = ["--optimizer adam"] if megatron else []
        args += ["--lr 1e-6", "--lr-decay-style constant", "--weight-decay 0.1"]
        if megatron:
            args += ["--adam-beta1 0.9", "--adam-beta2 0.98"]
        return [Arg.plain(a) for a in args]

    def _sglang(self, plan: ScriptPlan, colocate: bool, megatron: bool) -> list[Arg]:
        rollout_gpus = plan.num_gpus if colocate else plan.num_gpus - plan.num_gpus // 2
        per_engine = 2 if rollout_gpus % 2 == 0 and self.rng.random() < 0.4 else 1
        args = [f"--rollout-num-gpus-per-engine {per_engine}"]
        if megatron:
            args.append(f"--sglang-mem-fraction-static {self.rng.choice(('0.5', '0.6', '0.7', '0.8'))}")
            if self.rng.random() < 0.3:
                args.append("--sglang-cuda-graph-max-bs 32")
        if plan.template == "router_wait":
            args += ["--sglang-router-ip 127.0.0.1", "--sglang-router-port 30010"]
        return [Arg.plain(a) for a in args]

    def _cluster(self, plan: ScriptPlan, colocate: bool) -> list[Arg]:
        gpus = plan.num_gpus
        if colocate:
            args = ["--actor-num-nodes 1", f"--actor-num-gpus-per-node {gpus}", "--colocate"]
        else:
            args = [
                "--actor-num-nodes 1",
                f"--actor-num-gpus-per-node {gpus // 2}",
                f"--rollout-num-gpus {gpus - gpus // 2}",
            ]
        args.append(f"--num-gpus-per-node {gpus}")
        return [Arg.plain(a) for a in args]

    def _misc(self, role: str, megatron: bool) -> list[Arg]:
        args = []
        if megatron:
            args += [
                "--attention-dropout 0.0",
                "--hidden-dropout 0.0",
                "--accumulate-allreduce-grads-in-fp32",
                "--attention-softmax-in-fp32",
                "--attention-backend flash",
            ]
        if role in (
            "incident",
            "disabled_incident",
            "lora_dwb",
            "lora_colocate_dwb_no_offload",
            "colocate_dwb",
        ):
            args.append("--disable-weights-backuper")
        if role == "lora_colocate_dwb_no_offload":
            args.append("--no-offload-train")
        for dest in self.rng.sample(sorted(self.pool), self.rng.choice((0, 1, 2, 3, 4))):
            option, value = self.pool[dest]
            args.append(option.flag if value is None else f"{option.flag} {value}")
        return [Arg.plain(a) for a in args]


def choose_pool(
    options: list[Option], rng: random.Random, size: int = 48
) -> dict[str, tuple[Option, str | None]]:
    """Synthetic options some suites pass, each with a value inside its valid range (None: a bare flag)."""
    core = set(CORE_OPTIONS)
    candidates = [o for o in options if o not in core and o.kind in ("flag", "int", "float", "str", "choice")]
    pool: dict[str, tuple[Option, str | None]] = {}
    for option in rng.sample(candidates, min(size, len(candidates))):
        pool[option.dest] = (option, _value(option, rng))
    return pool


def _value(option: Option, rng: random.Random) -> str | None:
    low = option.low or 0
    high = option.high if option.high is not None else low + 64
    if option.kind == "flag":
        return None
    if option.kind == "int":
        return str(rng.randint(int(low), int(min(high, low + 64))))
    if option.kind == "float":
        return str(round(rng.uniform(low, high), 3))
    if option.kind == "choice":
        return rng.choice(option.choices)
    if option.noun in ("dir", "path"):
        return f"/root/miles_ci/{option.dest}"
    if option.noun == "endpoint":
        return "http://127.0.0.1:30000"
    return f"ci-{option.noun}-{rng.randint(1, 99)}"
