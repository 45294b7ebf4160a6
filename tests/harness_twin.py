"""A small miles-shaped repository for the validation harness tests, and ways to run the harness on it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from analysis_envs import twin_environment

from app.analysis.core.model import SuiteResult
from app.analysis.core.policy import Limits, load_policy
from app.sandbox.runner import SandboxSpec, run_harness

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "app" / "sandbox" / "harness"
MILES_POLICY = ROOT / "tests" / "twin" / "policy.yml"

# miles.utils.arguments at its base revision: a provider of options, a plain parser for --train-backend,
# Megatron's parser (absent: stubbed, then replaced), the HF config (replaced by a fixture) and a validator
# full of asserts, raises and coercions reading upstream attributes. `{validate_body}` is the validator's
# body, so that each test chooses what it validates.
ARGUMENTS = '''\
import argparse
import logging
import os
from typing import Optional

import torch
import torch.distributed as dist
from megatron.core import mpu
from transformers import AutoConfig

from miles.backends.megatron_utils.arguments import parse_args as megatron_parse_args

EXPERIMENTAL = os.environ.get("MILES_EXPERIMENTAL_ROLLOUT_REFACTOR", "0") == "1"


class RolloutBuffer(torch.nn.Module):
    def __init__(self, size: int, device: Optional[torch.device] = None) -> None:
        super().__init__()
        self.size = size


@torch.no_grad()
def gather(tensor: torch.Tensor | None) -> int:
    return 0 if tensor is None else dist.get_world_size()


def add_miles_arguments(parser):
    group = parser.add_argument_group("miles")
    group.add_argument("--train-backend", choices=["megatron", "fsdp"], default="megatron")
    group.add_argument("--hf-checkpoint", type=str, default=None)
    group.add_argument("--colocate", action="store_true")
    group.add_argument("--offload-train", action="store_true", default=None)
    group.add_argument("--disable-weights-backuper", action="store_true")
    group.add_argument("--lora-rank", type=int, default=0)
    group.add_argument("--rollout-batch-size", type=int, default=8)
    group.add_argument("--n-samples-per-prompt", type=int, default=1)
    if EXPERIMENTAL:
        group.add_argument("--rollout-refactor-mode", default="new")
    return parser


def parse_args():
    logging.getLogger("miles").info("parsing")
    backend_parser = argparse.ArgumentParser(add_help=False)
    backend_parser.add_argument("--train-backend", default="megatron")
    backend, _ = backend_parser.parse_known_args()
    if backend.train_backend == "megatron":
        args = megatron_parse_args(extra_args_provider=add_miles_arguments)
    else:
        args = add_miles_arguments(argparse.ArgumentParser(allow_abbrev=False)).parse_args()
    args.hf_config = AutoConfig.from_pretrained(args.hf_checkpoint, trust_remote_code=True)
    miles_validate_args(args)
    return args


def miles_validate_args(args):
{validate_body}
'''

MEGATRON_ARGUMENTS = '''\
def parse_args(extra_args_provider=None):
    from megatron.training.arguments import parse_args as _megatron_parse_args

    return _megatron_parse_args(extra_args_provider=extra_args_provider, ignore_unknown_args=False)
'''

VALIDATE = '''\
    if args.colocate and args.offload_train is None:
        args.offload_train = True
    world = args.tensor_model_parallel_size * args.pipeline_model_parallel_size
    assert args.rollout_batch_size % world == 0, "rollout batch size must divide by tp * pp"
    if args.lora_rank > 0:
        assert not (args.colocate and args.offload_train and args.disable_weights_backuper), (
            "lora with colocate and offload needs the weights backuper"
        )
    if args.hf_config.num_hidden_layers % args.pipeline_model_parallel_size != 0:
        raise ValueError("layers must divide by pp")
'''


def make_twin(root: Path, validate_body: str = VALIDATE, files: dict[str, str] | None = None) -> Path:
    """The repository under `root`/repo, readable by the sandbox's unprivileged uid."""
    repo = root / "repo"
    body = textwrap.indent(textwrap.dedent(validate_body), "    ")
    sources = {
        "train.py": "from miles.utils.arguments import parse_args\n\nparse_args()\n",
        "miles/__init__.py": "",
        "miles/utils/__init__.py": "",
        "miles/utils/arguments.py": ARGUMENTS.replace("{validate_body}", body.rstrip("\n")) + "\n",
        "miles/backends/__init__.py": "",
        "miles/backends/megatron_utils/__init__.py": "",
        "miles/backends/megatron_utils/arguments.py": MEGATRON_ARGUMENTS,
        **(files or {}),
    }
    for name, text in sources.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for directory in [root, *(p for p in repo.rglob("*") if p.is_dir()), repo]:
        directory.chmod(0o755)
    return repo


def line_of(repo: Path, path: str, marker: str) -> int:
    """The 1-based line of `path` holding `marker` (exactly one must)."""
    lines = [n for n, text in enumerate((repo / path).read_text().splitlines(), 1) if marker in text]
    assert len(lines) == 1, f"{marker!r} found on lines {lines} of {path}"
    return lines[0]


def miles_policy(**limits: Any) -> dict[str, Any]:
    """The real miles policy as the harness receives it, with quicker limits and fewer real packages."""
    policy = load_policy(MILES_POLICY).model_dump(mode="json", by_alias=True)
    policy["harness"]["real_packages"] = ["yaml"]
    # torch is absent on a miles CI host's validation path here: stubbed even where CPU torch is installed
    policy["harness"]["stub_modules"] = ["torch", *policy["harness"].get("stub_modules", [])]
    policy["harness"]["limits"].update({"suite_seconds": 20, **limits})
    return policy


def suite(suite_id: str, argv: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {"id": suite_id, "script": f"tests/e2e/test_{suite_id}.py", "argv": argv.split(),
            "env": env or {}, "entry": "train.py"}


def job(suites: list[dict[str, Any]], policy: dict[str, Any] | None = None, *, workers: int = 2,
        trace: dict[str, list[int]] | None = None) -> dict[str, Any]:
    return {"policy": policy or miles_policy(), "workers": workers, "suites": suites, "trace": trace or {}}


def run_sandboxed(repo: Path, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The harness's messages, run by the real bubblewrap sandbox."""
    limits = Limits.model_validate(job["policy"]["harness"]["limits"])
    run = run_harness(SandboxSpec(program="validate.py", repo_dir=repo, job=job, limits=limits,
                                  interpreter=twin_environment()))
    assert run.sandboxed
    assert run.messages and run.messages[-1] == {"type": "done"}, (run.ended, run.stderr_tail)
    return run.messages


def run_plain(repo: Path, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The harness's messages, run as a plain subprocess (for cases the sandbox adds nothing to)."""
    job_file = repo.parent / "job.json"
    job_file.write_text(json.dumps({**job, "repo": str(repo)}))
    done = subprocess.run([sys.executable, "-B", "-s", str(HARNESS / "validate.py"), str(job_file)],
                          cwd=repo, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    assert messages and messages[-1] == {"type": "done"}, done.stderr
    return messages


def results(messages: list[dict[str, Any]]) -> dict[str, SuiteResult]:
    """Each suite message parsed as the host parses it: the shape must be SuiteResult's exactly."""
    found: dict[str, SuiteResult] = {}
    for message in messages:
        if message["type"] == "suite":
            raw = {k: v for k, v in message.items() if k != "type"}
            result = SuiteResult.from_json(raw)
            assert result.to_json() == raw
            assert result.suite_id not in found, f"{result.suite_id} reported twice"
            found[result.suite_id] = result
    return found
