"""Entry-to-boundary validation: each suite's own launch runs in the real sandbox until training would start.

Synthetic repositories shaped after the field's start-up code (argparse, Hydra/OmegaConf, pydantic configs
checked in `setup()`), with no validator named in the policy: the launch's first call that needs CI's
hardware or services (a process group, a Ray cluster, a device, weights) is where it is accepted, and an
exception before it rejects the suite at its line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from analysis_envs import environment_of
from harness_twin import job, line_of, results, run_sandboxed
from launch_twin import (
    ARGPARSE_TRAIN,
    NEW_ASSERT,
    base_repo,
    check,
    ci_scripts,
    launch_policy,
    one_blocking_rejection,
    pull_request,
    write_repo,
)
from twin import line_of as twin_line_of
from twin.cli import MILES_POLICY, prtriage
from twin.expected import LORA_COLOCATE_SUITES
from twin.variants import ARGUMENTS, INCIDENT_ASSERT

from app.analysis.core.model import Outcome
from app.analysis.core.policy import Harness, Limits, Policy
from app.sandbox.runner import SandboxSpec, run_harness


def boundary_policy(**harness: Any) -> dict[str, Any]:
    """A policy naming no validator, as the harness receives it."""
    raw = {"validation": {}, "matrix": {"sources": []},
           "harness": {"stub_modules": ["torch", "ray"], "limits": {"suite_seconds": 20}, **harness}}
    return Policy.model_validate(raw).model_dump(mode="json", by_alias=True)


def launch(suite_id: str, entry: str, argv: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {"id": suite_id, "script": f"tests/{suite_id}.sh", "argv": argv.split(), "env": env or {},
            "entry": entry}


def test_an_argparse_launch_is_accepted_at_its_process_group(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"train.py": ARGPARSE_TRAIN})
    found = results(run_sandboxed(repo, job([
        launch("plain", "train.py", "--tp 2 --world 8"),
        launch("indivisible", "train.py", "--tp 3 --world 8"),
        launch("negative-lr", "train.py", "--lr -1"),
        launch("unknown-flag", "train.py", "--no-such 1"),
    ], boundary_policy())))
    stop = line_of(repo, "train.py", "dist.init_process_group(")
    assert found["plain"].outcome == Outcome(
        "accepted", None, "reached the training boundary torch.distributed.init_process_group (a process "
        "group needs the other ranks CI starts)", "train.py", stop)
    assert found["indivisible"].outcome == Outcome(
        "rejected", "AssertionError", "world size must divide by tp", "train.py",
        line_of(repo, "train.py", "assert args.world % args.tp"))
    assert found["negative-lr"].outcome == Outcome(
        "rejected", "ValueError", "lr must be positive", "train.py",
        line_of(repo, "train.py", "raise ValueError"))
    assert found["unknown-flag"].outcome.outcome == "rejected"
    assert found["unknown-flag"].outcome.message == "unrecognized arguments: --no-such 1"
    assert found["plain"].known_flags == ("--tp", "--world")


PYDANTIC_TRAIN = '''\
import sys

import ray
import yaml
from pydantic import BaseModel


class PolicyConfig(BaseModel):
    model_name: str
    tensor_parallel_size: int = 1
    micro_batch_size: int


class MasterConfig(BaseModel):
    policy: PolicyConfig
    num_gpus: int


def load(argv):
    with open(argv[1]) as handle:
        config = yaml.safe_load(handle)
    for override in argv[2:]:  # a.b=v, as the repository's own override parser does
        key, _, value = override.partition("=")
        *parents, last = key.split(".")
        node = config
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = yaml.safe_load(value)
    return MasterConfig(**config)


def setup(config):
    assert config.num_gpus % config.policy.tensor_parallel_size == 0, "num_gpus must divide by tp"
    ray.init(num_gpus=config.num_gpus)
    cluster = Worker.remote(config)
    return ray.get(cluster.step.remote())


@ray.remote
class Worker:
    def __init__(self, config):
        self.config = config

    def step(self):
        return 0


if __name__ == "__main__":
    setup(load(sys.argv))
'''

GRPO_YAML = '''\
policy:
  model_name: Qwen/Qwen3-0.6B
  tensor_parallel_size: 2
  micro_batch_size: 4
num_gpus: 8
'''


def test_a_pydantic_config_checked_in_setup_stops_at_ray_init(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"examples/run_grpo.py": PYDANTIC_TRAIN,
                                 "examples/configs/grpo.yaml": GRPO_YAML})
    run = "examples/run_grpo.py"
    found = results(run_sandboxed(repo, job([
        launch("grpo", run, "examples/configs/grpo.yaml"),
        launch("tp3", run, "examples/configs/grpo.yaml policy.tensor_parallel_size=3"),
        launch("typo", run, "examples/configs/grpo.yaml policy.micro_batch_size=four"),
    ], boundary_policy(real_packages=["yaml", "pydantic"]))))
    assert found["grpo"].outcome.outcome == "accepted"
    assert found["grpo"].outcome.message.startswith("reached the training boundary ray.init ")
    assert (found["grpo"].outcome.path, found["grpo"].outcome.line) == (run, line_of(repo, run, "ray.init("))
    assert found["tp3"].outcome == Outcome("rejected", "AssertionError", "num_gpus must divide by tp", run,
                                           line_of(repo, run, "assert config.num_gpus"))
    typo = found["typo"].outcome
    assert (typo.outcome, typo.exception, typo.path, typo.line) == (
        "rejected", "ValidationError", run, line_of(repo, run, "return MasterConfig(**config)"))
    assert "micro_batch_size" in (typo.message or "")


ACTOR_FIRST = '''\
import ray


@ray.remote(num_gpus=1)
class Rollout:
    pass


def main():
    handle = Rollout.options(name="rollout").remote()
    ray.get(handle)


main()
'''


def test_creating_a_ray_actor_is_a_boundary_even_before_ray_init(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"launch.py": ACTOR_FIRST})
    found = results(run_sandboxed(repo, job([launch("actor", "launch.py", "")], boundary_policy())))
    outcome = found["actor"].outcome
    assert outcome.outcome == "accepted", outcome
    assert outcome.message is not None and outcome.message.startswith("reached the training boundary ray.")
    assert outcome.line == line_of(repo, "launch.py", "Rollout.options(")


def test_a_ray_absent_here_and_stubbed_on_demand_stops_at_its_actor_too(tmp_path: Path) -> None:
    """NeMo RL's environments are `@ray.remote(...)` classes created with `.options(...).remote()`. With ray
    stubbed because it is missing (not listed in `stub_modules`), the stub was made after the boundaries'
    import hook had looked for it: `ray.remote` stayed the stub's, the class came back undecorated, and
    `.options` failed as an AttributeError, a rejection."""
    repo = write_repo(tmp_path, {"launch.py": ACTOR_FIRST})
    raw = {"validation": {}, "matrix": {"sources": []},
           "harness": {"stub_missing_modules": True, "limits": {"suite_seconds": 20}}}
    policy = Policy.model_validate(raw).model_dump(mode="json", by_alias=True)
    found = results(run_sandboxed(repo, job([launch("actor", "launch.py", "")], policy)))
    outcome = found["actor"].outcome
    assert outcome.outcome == "accepted", outcome
    assert outcome.message is not None and outcome.message.startswith("reached the training boundary ray.")
    assert outcome.line == line_of(repo, "launch.py", "Rollout.options(")


HYDRA_MAIN = '''\
import hydra
import torch
from omegaconf import DictConfig


def check(config):
    if config.actor.micro_batch_size > config.data.batch_size:
        raise ValueError("micro batch larger than the batch")


@hydra.main(config_path="config", config_name="ppo", version_base=None)
def main(config: DictConfig) -> None:
    check(config)
    torch.cuda.set_device(0)


if __name__ == "__main__":
    main()
'''

PPO_YAML = '''\
data:
  batch_size: 16
actor:
  micro_batch_size: 4
hydra:
  output_subdir: null
  run:
    dir: /tmp/hydra
'''


def test_a_hydra_application_launched_as_a_module_stops_at_its_device(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"trainer/__init__.py": "", "trainer/main_ppo.py": HYDRA_MAIN,
                                 "trainer/config/ppo.yaml": PPO_YAML})
    main = "trainer/main_ppo.py"
    policy = boundary_policy(real_packages=["hydra", "omegaconf", "yaml"])
    found = results(run_sandboxed(repo, job([
        launch("ppo", "trainer.main_ppo", "actor.micro_batch_size=8"),
        launch("too-big", "trainer.main_ppo", "actor.micro_batch_size=32"),
        launch("removed-key", "trainer.main_ppo", "critic.ppo_epochs=2"),
    ], policy)))
    assert found["ppo"].outcome == Outcome(
        "accepted", None, "reached the training boundary torch.cuda.set_device (device work needs the GPUs "
        "CI has)", main, line_of(repo, main, "torch.cuda.set_device(0)"))
    assert found["too-big"].outcome == Outcome("rejected", "ValueError", "micro batch larger than the batch",
                                               main, line_of(repo, main, "raise ValueError"))
    # the key the suite overrides is gone: Hydra's own composition rejects it, at the launch's `main()`
    removed = found["removed-key"].outcome
    assert (removed.outcome, removed.exception, removed.line) == (
        "rejected", "ConfigCompositionException", line_of(repo, main, "    main()"))
    assert (removed.message or "").startswith("Could not override 'critic.ppo_epochs'.")


SERVER_FIRST = '''\
import argparse
import socket
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--serve", action="store_true")
args = parser.parse_args()
subprocess.run(["true"], check=True)  # a tool, not a server: it runs
if args.serve:
    subprocess.Popen([sys.executable, "-m", "sglang.launch_server", "--port", str(args.port)])
socket.create_connection(("10.0.0.1", args.port))
'''


def test_a_launched_server_or_a_connection_is_a_boundary(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"serve.py": SERVER_FIRST})
    found = results(run_sandboxed(repo, job([
        launch("server", "serve.py", "--port 30000 --serve"),
        launch("client", "serve.py", "--port 30000"),
        launch("no-port", "serve.py", ""),
    ], boundary_policy())))
    server, client = found["server"].outcome, found["client"].outcome
    assert (server.outcome, server.line) == ("accepted", line_of(repo, "serve.py", "subprocess.Popen("))
    assert server.message == ("reached the training boundary subprocess.Popen (it launches a server or "
                              "training processes)")
    connect = line_of(repo, "serve.py", "socket.create_connection")
    assert (client.outcome, client.line) == ("accepted", connect)
    assert client.message is not None and "socket.connect" in client.message
    assert found["no-port"].outcome.outcome == "rejected"


# Real (not stubbed) packages stop at the same calls: patched right after their import.
ACCELERATE = '''\
class Accelerator:
    def __init__(self, mixed_precision="no"):
        self.mixed_precision = mixed_precision
'''
DATASETS = "def load_dataset(name, split=None):\n    return [name, split]\n"
FINETUNE = '''\
import os
import sys

from accelerate import Accelerator
from datasets import load_dataset

precision = os.environ.get("MIXED_PRECISION", "bf16")
assert precision in ("no", "bf16"), f"unsupported precision {precision}"
if "--data-first" in sys.argv:
    load_dataset("gsm8k", split="train")
accelerator = Accelerator(mixed_precision=precision)
'''


def test_installed_packages_stop_at_the_same_calls_as_stubs(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"accelerate/__init__.py": ACCELERATE, "datasets/__init__.py": DATASETS,
                                 "finetune.py": FINETUNE})
    found = results(run_sandboxed(repo, job([
        launch("accelerate", "finetune.py", ""),
        launch("data", "finetune.py", "--data-first"),
        launch("fp8", "finetune.py", "", env={"MIXED_PRECISION": "fp8"}),
    ], boundary_policy())))
    assert found["accelerate"].outcome.message == ("reached the training boundary accelerate.Accelerator (an "
                                                   "Accelerator joins the process group CI starts)")
    assert found["accelerate"].outcome.line == line_of(repo, "finetune.py", "accelerator = Accelerator(")
    assert found["data"].outcome.message is not None
    assert found["data"].outcome.message.startswith("reached the training boundary datasets.load_dataset ")
    assert found["fp8"].outcome == Outcome("rejected", "AssertionError", "unsupported precision fp8",
                                           "finetune.py", line_of(repo, "finetune.py", "assert precision"))


# RLinf-shaped: an optional fast path whose stub made the feature look installed, so the launch took the
# branch that needs it and failed where CI (which lacks it) goes on.
OPTIONAL = '''\
import importlib.util
import sys

try:
    import fusco
    HAS_FUSCO = True
except ImportError:
    HAS_FUSCO = False

HAS_FLASH = importlib.util.find_spec("flash_attn") is not None
import megatron  # a plain import: CI has it, the sandbox stubs it

if "--fused" in sys.argv:
    assert HAS_FUSCO, "--fused needs fusco"
assert not HAS_FLASH or "--no-flash" not in sys.argv, "flash-attn is installed: drop --no-flash"
print(megatron.core)
'''


def test_optional_imports_of_absent_packages_take_the_not_installed_branch(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"launch.py": OPTIONAL})
    suites = [launch("plain", "launch.py", "--no-flash"), launch("fused", "launch.py", "--fused")]
    absent = results(run_sandboxed(repo, job(suites, boundary_policy())))
    assert absent["plain"].outcome.outcome == "accepted", absent["plain"].outcome
    assert absent["fused"].outcome == Outcome("rejected", "AssertionError", "--fused needs fusco",
                                              "launch.py", line_of(repo, "launch.py", "assert HAS_FUSCO"))
    # the policy says CI has fusco: its optional import is stubbed, the --fused launch goes on
    has_fusco = results(run_sandboxed(repo, job(suites, boundary_policy(ci_has=["fusco"]))))
    assert has_fusco["fused"].outcome.outcome == "accepted", has_fusco["fused"].outcome
    # the built-in policies' setting: every optional import stubbed, flash-attn looks installed
    stubbed = results(run_sandboxed(repo, job(suites, boundary_policy(optional_imports="stubbed"))))
    assert stubbed["plain"].outcome == Outcome(
        "rejected", "AssertionError", "flash-attn is installed: drop --no-flash", "launch.py",
        line_of(repo, "launch.py", "assert not HAS_FLASH"))


def test_a_pull_request_adding_an_assert_blocks_the_suites_it_rejects(tmp_path: Path) -> None:
    repo = base_repo(tmp_path, {"train.py": ARGPARSE_TRAIN, **ci_scripts()})
    pull_request(repo, "train.py", NEW_ASSERT)
    report, finding = one_blocking_rejection(check(tmp_path, repo, launch_policy()))
    assert (finding["path"], finding["line"], finding["in_diff"]) == (
        "train.py", line_of(repo, "train.py", "assert args.tp < 4"), True)
    assert "tp 4 is not supported yet" in finding["message"]
    accepted = {s["id"]: s["head"] for s in report["suites"]}["tests/test_tp2.py"]
    assert accepted["outcome"] == "accepted"
    assert accepted["message"].startswith("reached the training boundary torch.distributed.")


REAL_TORCH = '''\
import sys

import torch
import torch.distributed as dist



@torch.jit.script  # TorchScript cannot compile **options: it would raise here, at import
def scaled(x, **options):
    return x


@torch.compile(mode="max-autotune")
def fused(x):
    return x * 2


assert fused(scaled(3)) == 6  # compilers applied at import leave the functions as written
model = torch.nn.Linear(2, 2)
x = torch.zeros(2)
assert x.to(torch.float16).dtype == torch.float16  # no device named: the call goes through
assert model.to(torch.float64).weight.dtype == torch.float64
step = sys.argv[1]
if step == "zeros":
    torch.zeros(2, device="cuda")
elif step == "module":
    model.to("cuda")
elif step == "tensor":
    x.cuda()
elif step == "group":
    dist.init_process_group("nccl")
assert step != "broken", "a broken config"
'''


def test_real_cpu_torch_stops_at_device_work_and_process_groups(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"train.py": REAL_TORCH})
    harness = {"real_packages": ["torch"], "stub_modules": [],
               "limits": {"suite_seconds": 120, "memory_mb": 8192}}
    spec = job([launch(step, "train.py", step) for step in ("zeros", "module", "tensor", "group", "broken")],
               boundary_policy(**harness))
    limits = Limits.model_validate(spec["policy"]["harness"]["limits"])
    run = run_harness(SandboxSpec(program="validate.py", repo_dir=repo, job=spec, limits=limits,
                                  interpreter=environment_of(Harness(requirements=["torch==2.13.0"]))))
    assert run.sandboxed and run.messages[-1] == {"type": "done"}, (run.ended, run.stderr_tail)
    found = {suite: result.outcome for suite, result in results(run.messages).items()}
    stops = {suite: (outcome.message or "").split(" (")[0] for suite, outcome in found.items()}
    assert stops == {"zeros": "reached the training boundary torch.cuda._lazy_init",
                     "module": "reached the training boundary torch.nn.Module.to",
                     "tensor": "reached the training boundary torch.Tensor.cuda",
                     "group": "reached the training boundary torch.distributed.init_process_group",
                     "broken": "a broken config"}
    assert found["zeros"].line == line_of(repo, "train.py", 'torch.zeros(2, device="cuda")')
    assert found["broken"].outcome == "rejected"


def test_the_incident_is_caught_by_running_the_miles_launches_to_their_boundary(
        miles_repo: Path, prtriage_cache: Path, tmp_path: Path) -> None:
    # The twin's policy without its validator: train.py runs as CI starts it, parse_args and all, until
    # its placement group; the incident's assert rejects the same five suites at the same line.
    policy = yaml.safe_load(MILES_POLICY.read_text())
    policy["validation"]["mode"] = "boundary"
    written = tmp_path / "boundary.yml"
    written.write_text(yaml.safe_dump(policy))
    run = prtriage("check", "--repo", str(miles_repo), "--base", "main", "--head", "incident", "--policy",
                   str(written), "--format", "json", cache_dir=prtriage_cache)
    assert run.returncode == 1, run.describe()
    report = run.json()
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert (finding["kind"], sorted(finding["suites"])) == ("new_rejection", sorted(LORA_COLOCATE_SUITES))
    assert (finding["path"], finding["line"]) == (
        ARGUMENTS, twin_line_of(miles_repo, "incident", ARGUMENTS, INCIDENT_ASSERT))
    assert report["health"]["base"]["accepted_share"] == 1.0
    stops = {suite["base"]["message"] for suite in report["suites"]}
    assert stops == {"reached the training boundary ray.util.placement_group (a Ray cluster or actor needs "
                     "the nodes CI starts)"}


# RLinf-shaped: Ray is not installed, so the launch's plain `import ray` is stubbed (the policy does not name
# it); its Cluster connects (`ray.init(address="auto")`, then a fresh one), then polls the nodes until
# enough are alive. A stub's `ray.nodes()` is empty: the poll never ends unless the first Ray call stops it.
RAY_SCHEDULER = '''\
import time

import ray


class Cluster:
    def __init__(self, num_nodes):
        assert num_nodes >= 0, "num_nodes must be greater than or equal to 0."
        if ray.is_initialized():
            raise RuntimeError("Ray was initialized before the Cluster")
        try:
            ray.init(address="auto", namespace="rl")
        except ConnectionError:
            ray.init(namespace="rl")
        while len([node for node in ray.nodes() if node["Alive"]]) < num_nodes:
            time.sleep(1)


def wait_for_resources(gpus):
    while ray.cluster_resources().get("GPU", 0) < gpus:
        time.sleep(1)
'''
RAY_LAUNCH = '''\
import sys

from scheduler import Cluster, wait_for_resources

nodes = int(sys.argv[1])
if "--resources-first" in sys.argv:
    wait_for_resources(8)
Cluster(num_nodes=nodes)
'''


def test_an_absent_ray_stops_at_its_first_call_without_polling_forever(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"scheduler.py": RAY_SCHEDULER, "launch.py": RAY_LAUNCH})
    policy = boundary_policy()
    policy["harness"]["stub_modules"] = []  # ray is absent here: stubbed because the launch imports it
    found = results(run_sandboxed(repo, job([
        launch("two-nodes", "launch.py", "2"),
        launch("negative", "launch.py", "-1"),
        launch("resources", "launch.py", "2 --resources-first"),
    ], policy)))
    accepted = found["two-nodes"].outcome
    assert accepted.outcome == "accepted", accepted
    assert accepted.message == ("reached the training boundary ray.init (a Ray cluster or actor needs the "
                                "nodes CI starts)")
    assert (accepted.path, accepted.line) == ("scheduler.py", line_of(repo, "scheduler.py",
                                                                      'ray.init(address="auto"'))
    assert found["negative"].outcome == Outcome(
        "rejected", "AssertionError", "num_nodes must be greater than or equal to 0.", "scheduler.py",
        line_of(repo, "scheduler.py", "assert num_nodes >= 0"))
    resources = found["resources"].outcome
    assert resources.message is not None and "ray.cluster_resources" in resources.message, resources
    assert resources.line == line_of(repo, "scheduler.py", "while ray.cluster_resources()")


LOGS_IN_CHECKOUT = '''\
import glob
import json
import os
import sys

import ray


def next_experiment_dir(base):
    taken = glob.glob(os.path.join(base, "exp_*"))
    return os.path.join(base, f"exp_{len(taken) + 1:03d}")


if __name__ == "__main__":
    steps = int(sys.argv[1])
    assert steps > 0, "steps must be positive"
    log_dir = next_experiment_dir("logs/run")
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, "config.json"), "w") as handle:
        json.dump({"steps": steps}, handle)
    with open(os.path.join(log_dir, "config.json")) as handle:
        assert json.load(handle) == {"steps": steps}, "the config written is read back"
    assert os.path.isdir(log_dir) and os.listdir(log_dir) == ["config.json"]
    ray.init()
'''


def test_a_launch_writing_its_logs_into_the_checkout_reaches_its_boundary(tmp_path: Path) -> None:
    """NeMo RL's entries make `logs/exp_NNN` under the checkout (`get_next_experiment_dir`) before Ray
    starts: CI's checkout is writable, the sandbox's is not, so each write there lands in the overlay."""
    repo = write_repo(tmp_path, {"examples/run_sft.py": LOGS_IN_CHECKOUT})
    run = "examples/run_sft.py"
    found = results(run_sandboxed(repo, job([launch("sft", run, "2"), launch("zero", run, "0"),
                                             launch("again", run, "3")], boundary_policy())))
    assert found["sft"].outcome.outcome == "accepted", found["sft"].outcome
    assert found["sft"].outcome.message.startswith("reached the training boundary ray.init ")
    assert found["again"].outcome.outcome == "accepted", found["again"].outcome
    assert found["zero"].outcome == Outcome("rejected", "AssertionError", "steps must be positive", run,
                                            line_of(repo, run, "assert steps > 0"))
    assert not (repo / "logs").exists()  # the tree itself is never written


# RLinf-shaped: the launch logs to `<output_dir>/<experiment>/log/main.log` with CI's `output_dir: ../results`
# (relative to the checkout, which CI may write beside); the sandbox's tree and `/` are read-only.
RELATIVE_OUTPUT = '''\
import os
import sys

import torch.distributed as dist

output_dir, experiment = sys.argv[1], sys.argv[2]
log_path = os.path.join(output_dir, experiment, "log", "main.log")
os.makedirs(os.path.dirname(log_path), exist_ok=True)
with open(log_path, "w", encoding="utf-8") as log:
    log.write("started\\n")
with open(log_path, encoding="utf-8") as log:
    assert log.read() == "started\\n", "the log reads back what was written"
assert sorted(os.listdir(os.path.join(output_dir, experiment))) == ["log"]
os.makedirs("outputs/checkpoints", exist_ok=True)
assert os.path.isdir("outputs/checkpoints")
assert experiment != "bad", "experiment name refused"
dist.init_process_group(backend="nccl")
'''


def test_outputs_relative_to_the_read_only_tree_land_in_a_scratch_overlay(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"train.py": RELATIVE_OUTPUT})
    found = results(run_sandboxed(repo, job([
        launch("results", "train.py", "../results grpo"),
        launch("bad", "train.py", "../results bad"),
    ], boundary_policy())))
    accepted = found["results"].outcome
    assert accepted.outcome == "accepted", accepted
    assert accepted.line == line_of(repo, "train.py", "dist.init_process_group(")
    refused = line_of(repo, "train.py", 'assert experiment != "bad"')
    assert found["bad"].outcome == Outcome("rejected", "AssertionError", "experiment name refused",
                                           "train.py", refused)
    assert not (repo / "outputs").exists() and not (tmp_path / "results").exists()


VLLM_DIAGNOSTIC = '''\
import argparse

import torch
from vllm import LLM, SamplingParams

parser = argparse.ArgumentParser()
parser.add_argument("--tensor-parallel-size", type=int, default=1)
parser.add_argument("--max-tokens", type=int, default=16)
args = parser.parse_args()
assert args.max_tokens > 0, "max tokens must be positive"
llm = LLM(model="m", tensor_parallel_size=args.tensor_parallel_size)
outputs = llm.generate(["x"], SamplingParams(max_tokens=args.max_tokens))
error = torch.exp(torch.tensor(outputs[0].logprob)).mean().item()
assert error < 1.05, f"lp error exceeds threshold 1.05: {error}"
'''


def test_a_vllm_engine_is_a_boundary(tmp_path: Path) -> None:
    """NeMo RL's model diagnostics (`tools/model_diagnostics/*.py`, launched by its functional tests) build a
    vLLM `LLM` and check what it generates: with vLLM and torch stubbed, the check ran on stub values and
    failed ("lp error exceeds threshold 1.05: <stub torch.exp.mean.item()>"), a rejection CI never sees."""
    repo = write_repo(tmp_path, {"tools/diagnose.py": VLLM_DIAGNOSTIC})
    script = "tools/diagnose.py"
    found = results(run_sandboxed(repo, job([
        launch("tp2", script, "--tensor-parallel-size 2 --max-tokens 8"),
        launch("none", script, "--max-tokens 0"),
    ], boundary_policy(stub_modules=["torch", "ray", "vllm"]))))
    assert found["tp2"].outcome.outcome == "accepted", found["tp2"].outcome
    assert found["tp2"].outcome.message.startswith("reached the training boundary vllm.LLM ")
    assert found["tp2"].outcome.line == line_of(repo, script, "llm = LLM(")
    assert found["none"].outcome == Outcome("rejected", "AssertionError", "max tokens must be positive",
                                            script, line_of(repo, script, "assert args.max_tokens > 0"))
