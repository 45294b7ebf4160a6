"""Source of one e2e CI script from its plan, in the shapes the real ones take.

Shapes: plain `prepare()` + `execute()`; a dataclass of script arguments run in a loop of variants; scripts
that read the model's `config.json` or the checkpoint iteration file before building flags; typer CLIs; and
scripts that start a router and wait for its port before submitting the job.
"""

from __future__ import annotations

from benchmarks.twin.suites import Arg, ScriptPlan, Variant

_HEAD = '''"""E2E {group}: {model} on {gpus} GPU(s), {what}."""

{imports}

import miles.utils.external_utils.command_utils as U
from tests.ci.ci_register import register_cuda_ci
{extra_imports}
register_cuda_ci(est_time={est_time}, suite="{stage}", labels={labels}{disabled})

MODEL_NAME = "{hf_name}"
MODEL_TYPE = "{model_type}"
NUM_GPUS = {gpus}


def prepare():
    U.exec_command("mkdir -p /root/models /root/datasets")
    U.exec_command(f"hf download {org}/{{MODEL_NAME}} --local-dir /root/models/{{MODEL_NAME}}")
    U.hf_download_dataset("zhuzilin/dapo-math-17k")
{convert}'''

_CONVERT = (
    "    U.convert_checkpoint(model_name=MODEL_NAME, megatron_model_type=MODEL_TYPE, "
    'num_gpus_per_node=NUM_GPUS, dir_dst="/root/models")\n'
)

_MAIN_PLAIN = """

if __name__ == "__main__":
    prepare()
    for proxy_var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        os.environ.pop(proxy_var, None)
    execute()
"""

_MAIN_VARIANTS = """

if __name__ == "__main__":
    prepare()
    for mode in ({modes}):
        execute(ScriptArgs(mode=mode))
"""

_MAIN_TYPER = """

app = typer.Typer(pretty_exceptions_enable=False)


@app.command()
def main(num_gpus: int = NUM_GPUS, skip_prepare: bool = False):
    if not skip_prepare:
        prepare()
    execute(num_gpus)


if __name__ == "__main__":
    app()
"""

_ROUTER = '''

def _start_router():
    """The router must be up before the job is submitted; CI has seen it die on a busy port."""
    proc = subprocess.Popen(
        ["python3", "-m", "sglang_router.launch_router", "--port", "30010", "--policy", "cache_aware"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"router exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", 30010), timeout=1):
                return
        except OSError:
            time.sleep(2)
    raise TimeoutError("router did not come up within 120 s")
'''


def _section(name: str, args: list[Arg]) -> list[str]:
    if not args:
        return [f'    {name}_args = ""']
    lines = [f"    {name}_args = ("]
    for arg in args:
        prefix = "f" if "{" in arg.code else ""
        lines.append(f'        {prefix}"{arg.code} "')
    lines.append("    )")
    return lines


def _execute(plan: ScriptPlan, variant: Variant) -> list[str]:
    signature = {"variants": "def execute(args: ScriptArgs):", "typer": "def execute(num_gpus: int):"}
    lines = ["", "", signature.get(plan.template, "def execute():")]
    if plan.template == "config_read":
        lines += [
            '    with open(f"/root/models/{MODEL_NAME}/config.json") as f:',
            "        hf_config = json.load(f)",
            '    num_layers = hf_config["num_hidden_layers"]',
            '    assert hf_config["model_type"] in ("qwen2", "qwen3", "llama", "glm4", "mimo")',
        ]
    if plan.template == "ckpt_read":
        lines += [
            '    with open(f"/root/models/{MODEL_NAME}_miles/latest_checkpointed_iteration.txt") as f:',
            "        iteration = int(f.read().strip())",
        ]
    for name, args in variant.sections.items():
        if name != "extra":
            lines += _section(name, args)
    names = [n for n in variant.sections if n != "extra"]
    if plan.template == "variants":
        extra = next((v.sections.get("extra", []) for v in plan.variants if v.mode != "normal"), [])
        lines += ['    extra_args = ""', f'    if args.mode == "{plan.variants[-1].mode}":']
        lines += [f'        extra_args += "{arg.code} "' for arg in extra]
        names.append("extra")
    lines.append("")
    lines.append("    train_args = (")
    lines += [f'        f"{{{name}_args}}"' for name in names]
    if plan.lora:
        lines.append(f'        f"{{lora_args(rank={plan.lora[0]}, alpha={plan.lora[1]})}}"')
    lines.append('        f"{U.get_default_wandb_args(__file__)}"')
    lines.append("    )")
    lines.append("")
    gpus = "num_gpus" if plan.template == "typer" else "NUM_GPUS"
    call = [
        "        train_args=train_args,",
        f"        num_gpus_per_node={gpus},",
        "        megatron_model_type=" + ("MODEL_TYPE," if plan.backend == "megatron" else "None,"),
    ]
    if plan.train_script != "train.py":
        call.append(f'        train_script="{plan.train_script}",')
    if plan.extra_env:
        call.append(f"        extra_env_vars={plan.extra_env!r},")
    if plan.template == "router_wait":
        call.append("        before_ray_job_submit=_start_router,")
    lines += ["    U.execute_train(", *call, "    )"]
    return lines


def script_source(plan: ScriptPlan) -> str:
    imports = ["import os"]
    extra_imports = []
    if plan.template == "config_read":
        imports.insert(0, "import json")
    if plan.template == "variants":
        imports.insert(0, "from dataclasses import dataclass")
    if plan.template == "router_wait":
        imports = ["import os", "import socket", "import subprocess", "import time"]
    if plan.template == "typer":
        imports += ["", "import typer"]  # third-party block
    if plan.lora:
        extra_imports.append("from tests.e2e.lora.lora_utils import lora_args")
    org = (
        "Qwen"
        if plan.model.hf_name.startswith("Qwen")
        else "zai-org"
        if "GLM" in plan.model.hf_name
        else (
            "meta-llama"
            if "Llama" in plan.model.hf_name
            else "XiaomiMiMo"
            if "MiMo" in plan.model.hf_name
            else "moonshotai"
        )
    )
    head = _HEAD.format(
        group=plan.group,
        model=plan.model.hf_name,
        gpus=plan.num_gpus,
        what=_what(plan),
        imports="\n".join(imports),
        extra_imports="\n".join(extra_imports) + ("\n" if extra_imports else ""),
        est_time=plan.est_time,
        stage=plan.stage,
        labels=repr(plan.labels).replace("'", '"'),
        disabled=f', disabled="{plan.disabled}"' if plan.disabled else "",
        hf_name=plan.model.hf_name,
        model_type=plan.model.type,
        org=org,
        convert=_CONVERT if plan.backend == "megatron" else "",
    )
    body: list[str] = []
    if plan.template == "variants":
        body += [
            "",
            "",
            "@dataclass",
            "class ScriptArgs:",
            '    mode: str = "normal"',
            "    num_gpus: int = NUM_GPUS",
        ]
    if plan.template == "router_wait":
        body.append(_ROUTER.rstrip("\n"))
    body += _execute(plan, plan.variants[0])
    if plan.template == "variants":
        modes = ", ".join(f'"{v.mode}"' for v in plan.variants)
        tail = _MAIN_VARIANTS.format(modes=modes)
    elif plan.template == "typer":
        tail = _MAIN_TYPER
    else:
        tail = _MAIN_PLAIN
    return head + "\n".join(body) + "\n" + tail


def _what(plan: ScriptPlan) -> str:
    roles = {
        "incident": "LoRA colocated without the weights backuper",
        "disabled_incident": "LoRA colocated without the weights backuper",
        "lora_colocate": "LoRA colocated",
        "lora_dwb": "LoRA without the weights backuper",
        "lora_colocate_dwb_no_offload": "LoRA colocated, train offload off",
        "colocate_dwb": "colocated without the weights backuper",
        "broken": "large global batch",
        "fsdp": "FSDP backend",
        "async": "asynchronous training",
    }
    return roles.get(plan.variants[0].role, "GRPO smoke run")
