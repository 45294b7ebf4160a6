"""Capture in the real sandbox: a miles-shaped repository's CI scripts run as CI runs them, launches recorded.

The repository built here reproduces each mechanism of radixark/miles's CI (docs: REALWORLD-miles.md): scripts
registering through tests/ci/ci_register.py, a dataclass of script args, prepare() with downloads, execute()
reaching execute_train -> exec_command -> bash, `source <model>.sh && ray job submit ... -- python3 train.py
${MODEL_ARGS[@]} ...`, fixture files, servers polled and started, typer CLIs, scripts that fail or hang.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from analysis_envs import environment_of

from app.analysis.core.model import Matrix, Suite
from app.analysis.core.policy import Policy, load_policy
from app.analysis.sources.matrix import ScriptReport, build_matrix
from app.analysis.sources.record_launches import list_scripts
from app.analysis.sources.record_launches_keys import RecordLaunches
from app.engine.matrix_capture import HostTree, capture_matrix
from app.sandbox.runner import SandboxRun, SandboxSpec, run_harness

POLICIES = Path(__file__).resolve().parents[1] / "policies"
SUITE_SECONDS = 8.0
QWEN_MODEL_ARGS = ["--swiglu", "--num-layers", "28", "--hidden-size", "2048", "--ffn-hidden-size", "8192",
                   "--kv-channels", "128", "--rotary-base", "1000000"]
JOB_ENV = {"PYTHONPATH": "/root/Megatron-LM", "MILES_EXPERIMENTAL_ROLLOUT_REFACTOR": "1"}

MILES_LIBRARY = {
    "tests/__init__.py": "",
    "tests/ci/__init__.py": "",
    "tests/ci/ci_register.py": """
        def register_cuda_ci(est_time: int, suite: str, labels=None, disabled=None) -> None:
            return None
    """,
    "miles/__init__.py": "",
    "miles/utils/__init__.py": "",
    "miles/utils/misc.py": """
        import subprocess

        def exec_command(cmd: str, capture_output: bool = False):
            print(f"EXEC: {cmd}", flush=True)
            result = subprocess.run(cmd, shell=True, check=True, capture_output=capture_output, text=True)
            return result.stdout if capture_output else None
    """,
    "miles/utils/external_utils/__init__.py": "",
    "miles/utils/external_utils/command_utils.py": """
        import json
        import os

        from miles.utils.misc import exec_command

        HERE = os.path.abspath(__file__)
        REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

        def execute_train(train_args: str, num_gpus_per_node: int, megatron_model_type: str,
                          train_script: str = "train.py", extra_env_vars: dict | None = None) -> None:
            exec_command("pkill -9 sglang; sleep 3; ray stop --force; pkill -9 ray; nvidia-smi; sleep 3")
            exec_command(f"export PYTHONBUFFERED=16 && ray start --head --node-ip-address 127.0.0.1 "
                         f"--num-gpus {num_gpus_per_node} --disable-usage-stats")
            runtime_env = {"env_vars": {"PYTHONPATH": "/root/Megatron-LM",
                                        "MILES_EXPERIMENTAL_ROLLOUT_REFACTOR": "1", **(extra_env_vars or {})}}
            exec_command(
                f'source "{REPO_DIR}/scripts/models/{megatron_model_type}.sh" && '
                f"ray job submit --address=http://127.0.0.1:8265 "
                f"--runtime-env-json='{json.dumps(runtime_env)}' "
                f"-- python3 {REPO_DIR}/{train_script} ${{MODEL_ARGS[@]}} {train_args}")
    """,
    "scripts/run_qwen.py": """
        from miles.utils.external_utils import command_utils as U

        def _train(args, train_args: str) -> None:
            U.execute_train(train_args=train_args, num_gpus_per_node=args.num_gpus,
                            megatron_model_type="qwen", train_script=args.train_script)
    """,
    "scripts/models/common.sh": """
        NLAYERS=28
    """,
    "scripts/models/qwen.sh": """
        source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"
        HIDDEN=2048
        MODEL_ARGS=(
           --swiglu
           --num-layers ${NLAYERS}
           --hidden-size ${HIDDEN}
           --ffn-hidden-size $((HIDDEN * 4))
           --kv-channels $((HIDDEN / 16))
           --rotary-base "${ROPE_BASE:-1000000}"
        )
    """,
    "train.py": """
        raise SystemExit("capture must never run the entry itself")
    """,
}

SCRIPT_ARGS = """
    @dataclass
    class ScriptArgs:
        model_name: str = "Qwen3-0.6B"
        mode: str = "lora"
        num_gpus: int = 4
        train_script: str = "train.py"
        extra_args: str = ""

    def prepare(args: ScriptArgs) -> None:
        U.exec_command("mkdir -p /root/models /root/datasets")
        local = f"/root/models/{args.model_name}"
        U.exec_command(f"huggingface-cli download Qwen/{args.model_name} --local-dir {local}")
        U.exec_command(f"python3 tools/convert_hf_to_torch_dist.py --hf-checkpoint {local}")

    def train_args(args: ScriptArgs) -> str:
        lora = "--lora-rank 16 --colocate --disable-weights-backuper " if args.mode == "lora" else ""
        return (f"--hf-checkpoint /root/models/{args.model_name} {lora}--rollout-batch-size 8 "
                f"--prompt-data /root/datasets/dapo.jsonl {args.extra_args}").strip()
"""

E2E_SCRIPTS = {
    "tests/e2e/short/test_qwen_lora.py": """
        from dataclasses import dataclass

        from miles.utils.external_utils import command_utils as U
        from scripts.run_qwen import _train
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=600, suite="stage-a-short", labels=["lora", "colocate"])
        SCRIPT_ARGS

        def execute(args: ScriptArgs) -> None:
            _train(args, train_args(args))

        if __name__ == "__main__":
            args = ScriptArgs(extra_args="--sglang-mem-fraction-static 0.7 --eval-prompt 'what is 1+1?'")
            prepare(args)
            execute(args)
    """,
    "tests/e2e/short/test_qwen_modes.py": """
        from dataclasses import dataclass

        from miles.utils.external_utils import command_utils as U
        from scripts.run_qwen import _train
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=900, suite="stage-b-modes")
        SCRIPT_ARGS

        if __name__ == "__main__":
            for mode in ["lora", "full"]:
                args = ScriptArgs(mode=mode, num_gpus=8, train_script="train_async.py")
                prepare(args)
                _train(args, train_args(args))
    """,
    "tests/e2e/short/test_disabled.py": """
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=300, suite="stage-a-short", disabled="flaky on H100, see #812")
        raise RuntimeError("a disabled script must stop at its registration")
    """,
    "tests/e2e/lora/test_from_config.py": """
        import json
        import os
        from dataclasses import dataclass

        from miles.utils.external_utils import command_utils as U
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=600, suite="stage-c-config")
        MODEL = "/root/models/Qwen3-0.6B"

        if __name__ == "__main__":
            assert os.path.exists(MODEL + "/config.json") and os.path.isdir("/root/models")
            with open(MODEL + "/config.json") as handle:
                config = json.load(handle)
            with open(MODEL + "_miles/latest_checkpointed_iteration.txt") as handle:
                step = int(handle.read())
            U.execute_train(train_args=f"--load {MODEL}_miles --ckpt-step {step} "
                                       f"--num-layers-check {config['num_hidden_layers']} "
                                       f"--model-type {config['model_type']}",
                            num_gpus_per_node=2, megatron_model_type="qwen",
                            extra_env_vars={"MILES_TEST_MODE": "config"})
    """,
    "tests/e2e/server/test_http_poll.py": """
        import http.client
        import socket
        import time
        import urllib.request

        from miles.utils.external_utils import command_utils as U
        from miles.utils.misc import exec_command
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=1200, suite="stage-d-server")

        def wait_for_server(url: str) -> None:
            started = time.time()
            while True:
                try:
                    with urllib.request.urlopen(url + "/health", timeout=5) as response:
                        if response.status == 200 and response.read() == b"{}":
                            return
                except Exception:
                    pass
                if time.time() - started > 600:
                    raise TimeoutError("server never came up")
                time.sleep(5)

        if __name__ == "__main__":
            exec_command("python3 -m sglang.launch_server --port 30000 > /tmp/server.log 2>&1 &")
            wait_for_server("http://127.0.0.1:30000")
            with socket.create_connection(("127.0.0.1", 30000), timeout=2) as sock:
                sock.sendall(b"ping")
                assert sock.recv(16) == b""
            connection = http.client.HTTPConnection("127.0.0.1", 30000, timeout=2)
            connection.request("GET", "/get_model_info")
            assert connection.getresponse().status == 200
            for _ in range(120):  # let the server warm up: ten virtual minutes
                time.sleep(5)
            U.execute_train(train_args="--rollout-external --sglang-router-port 30000",
                            num_gpus_per_node=4, megatron_model_type="qwen")
    """,
    "tests/e2e/server/test_popen_alive.py": """
        import subprocess
        import time

        import torch  # not installed in the sandbox: stubbed

        from miles.utils.external_utils import command_utils as U
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=1200, suite="stage-d-server")

        if __name__ == "__main__":
            server = subprocess.Popen(["python3", "-m", "sglang_router.launch_router", "--port", "30001"],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(30):
                assert server.poll() is None, "router died"
                time.sleep(2)
            gpus = torch.cuda.device_count() or 8  # a stub is falsy: CI's real count stands in
            U.execute_train(train_args=f"--router-port 30001 --world-size-hint {gpus}",
                            num_gpus_per_node=4, megatron_model_type="qwen")
            server.terminate()
            assert server.wait() == -15
    """,
    "tests/e2e/short/test_typer_cli.py": """
        import typer

        from miles.utils.external_utils import command_utils as U
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=600, suite="stage-e-cli")
        app = typer.Typer()

        @app.command()
        def main(mode: str = "lora", num_gpus: int = 2, use_kl: bool = False) -> None:
            kl = "--use-kl-loss" if use_kl else "--no-kl"
            U.execute_train(train_args=f"--cli-mode {mode} {kl}", num_gpus_per_node=num_gpus,
                            megatron_model_type="qwen")

        if __name__ == "__main__":
            app()
    """,
    "tests/e2e/short/test_nothing.py": """
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=60, suite="stage-a-short")

        if __name__ == "__main__":
            print("all checks happen elsewhere")
    """,
    "tests/e2e/short/test_partial.py": """
        from miles.utils.external_utils import command_utils as U
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=600, suite="stage-a-short")
        CONFIGS = {"small": "--rollout-batch-size 4"}

        if __name__ == "__main__":
            for name in ["small", "large"]:
                U.execute_train(train_args=CONFIGS[name], num_gpus_per_node=1, megatron_model_type="qwen")
    """,
    "tests/e2e/short/test_hangs.py": """
        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=60, suite="stage-a-short")
        total = 0
        while True: total += 1  # one line: the line the report names
    """,
    "tests/e2e/short/test_waits_forever.py": """
        import time
        import urllib.request

        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=60, suite="stage-a-short")

        if __name__ == "__main__":
            while True:
                try:
                    urllib.request.urlopen("http://127.0.0.1:1/never-ready").read()
                    raise ConnectionError("not ready")
                except Exception:
                    time.sleep(30)
    """,
    "tests/e2e/short/test_launch_styles.py": """
        import asyncio
        import os
        import subprocess
        import sys

        from tests.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=60, suite="stage-f-styles")
        HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

        async def launch_async() -> None:
            process = await asyncio.create_subprocess_exec("torchrun", "--nproc-per-node", "2", "train.py",
                                                           "--style", "asyncio")
            assert await process.wait() == 0

        if __name__ == "__main__":
            subprocess.check_call([sys.executable, f"{HERE}/train.py", "--style", "sys-executable"])
            assert subprocess.check_output("echo ready | tr a-z A-Z", shell=True, text=True) == "READY\\n"
            assert os.system("cd /root/miles && /usr/bin/python3 train.py --style 'absolute path'") == 0
            with os.popen("CUDA_VISIBLE_DEVICES=0,1 python3 train.py --style popen | tee /tmp/o") as pipe:
                pipe.read()
            asyncio.run(launch_async())
            os.execvp("python3", ["python3", "train.py", "--style", "exec"])
            raise AssertionError("exec never returns")
    """,
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def miles_policy(**limits: Any) -> Policy:
    twin_policy = POLICIES.parent / "tests" / "twin" / "policy.yml"
    raw = load_policy(twin_policy).model_dump(mode="json", by_alias=True)
    raw["harness"]["limits"].update({"suite_seconds": SUITE_SECONDS, **limits})
    # torch is absent on a miles CI host's capture path: stubbed even where CPU torch is installed (its real
    # import takes seconds, and the scripts' time limits are the twin's)
    raw["harness"]["stub_modules"] = ["torch", *raw["harness"].get("stub_modules", [])]
    return Policy.model_validate(raw)


def build_miles_repo(root: Path) -> Path:
    shared = textwrap.indent(textwrap.dedent(SCRIPT_ARGS), " " * 8)
    scripts = {path: text.replace("        SCRIPT_ARGS\n", shared) for path, text in E2E_SCRIPTS.items()}
    write_tree(root, {**MILES_LIBRARY, **scripts})
    return root


def run_capture_harness(repo: Path, policy: Policy, scripts: list[str]) -> SandboxRun:
    job = {"policy": policy.model_dump(mode="json", by_alias=True), "workers": 2, "source": 0,
           "scripts": scripts}
    spec = SandboxSpec(program="capture.py", repo_dir=repo, job=job, limits=policy.harness.limits,
                       interpreter=environment_of(policy.harness))
    return run_harness(spec)


Captured = tuple[dict[str, dict[str, Any]], Matrix, SandboxRun]


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Captured:
    """One sandboxed capture of every e2e script: the messages by script, the matrix built from them."""
    repo = build_miles_repo(tmp_path_factory.mktemp("capture") / "miles")
    policy = miles_policy()
    source = policy.matrix.sources[0]
    assert isinstance(source, RecordLaunches)
    scripts = list_scripts(source, HostTree(repo))
    run = run_capture_harness(repo, policy, scripts)
    messages = {m["script"]: m for m in run.messages if m.get("type") == "script"}
    matrix = build_matrix(policy, {0: [ScriptReport.from_message(m) for m in messages.values()]}, "/repo")
    return messages, matrix, run


def suite(matrix: Matrix, suite_id: str) -> Suite:
    return next(s for s in matrix.suites if s.id == suite_id)


def test_every_script_is_reported_once_then_done(captured: Captured) -> None:
    messages, _, run = captured
    assert run.sandboxed and run.ended is None, run.stderr_tail
    assert sorted(messages) == sorted(E2E_SCRIPTS)
    assert run.messages[-1] == {"type": "done"}
    for message in messages.values():
        assert set(message) == {"type", "script", "status", "launches", "reason", "registration", "repo",
                                "ended"}
    progress = [m for m in run.messages if m["type"] == "progress"]
    assert progress[-1]["done"] == progress[-1]["total"] == len(E2E_SCRIPTS)


def test_the_full_ci_chain_yields_the_train_argv_and_job_env(captured: tuple[dict[str, dict[str, Any]],
                                                                             Matrix, SandboxRun]) -> None:
    messages, matrix, _ = captured
    script = "tests/e2e/short/test_qwen_lora.py"
    assert suite(matrix, script) == Suite(
        id=script, script=script, entry="train.py", env=JOB_ENV,
        argv=(*QWEN_MODEL_ARGS, "--hf-checkpoint", "/root/models/Qwen3-0.6B", "--lora-rank", "16",
              "--colocate", "--disable-weights-backuper", "--rollout-batch-size", "8", "--prompt-data",
              "/root/datasets/dapo.jsonl", "--sglang-mem-fraction-static", "0.7", "--eval-prompt",
              "what is 1+1?"))
    message = messages[script]
    assert message["status"] == "captured" and message["reason"] is None
    assert message["registration"] == {"est_time": 600, "suite": "stage-a-short",
                                       "labels": ["lora", "colocate"]}
    launched = [launch["argv"][:3] for launch in message["launches"]]
    # prepare()'s conversion, then the cleanup's `ray stop`, `ray start`, and the job itself
    assert launched == [["python3", "tools/convert_hf_to_torch_dist.py", "--hf-checkpoint"],
                        ["ray", "stop", "--force"], ["ray", "start", "--head"], ["ray", "job", "submit"]]
    assert [launch["env"] for launch in message["launches"]] == [{}, {}, {"PYTHONBUFFERED": "16"}, {}]
    assert message["launches"][3]["cwd"] == "/repo"


def test_a_loop_yields_one_suite_per_variant(captured: Captured) -> None:
    _, matrix, _ = captured
    script = "tests/e2e/short/test_qwen_modes.py"
    lora, full = suite(matrix, script), suite(matrix, script + "#2")
    common = ("--hf-checkpoint", "/root/models/Qwen3-0.6B")
    assert lora.argv == (*QWEN_MODEL_ARGS, *common, "--lora-rank", "16", "--colocate",
                         "--disable-weights-backuper", "--rollout-batch-size", "8", "--prompt-data",
                         "/root/datasets/dapo.jsonl")
    assert full.argv == (*QWEN_MODEL_ARGS, *common, "--rollout-batch-size", "8", "--prompt-data",
                         "/root/datasets/dapo.jsonl")
    assert lora.entry == full.entry == "train_async.py"
    assert not any(s.id == script + "#3" for s in matrix.suites)


def test_a_disabled_script_stops_at_its_registration(captured: Captured) -> None:
    messages, matrix, _ = captured
    message = messages["tests/e2e/short/test_disabled.py"]
    assert (message["status"], message["launches"]) == ("disabled", [])
    assert message["reason"] == "flaky on H100, see #812"
    assert message["registration"]["disabled"] == "flaky on H100, see #812"
    assert matrix.disabled == ("tests/e2e/short/test_disabled.py",)


def test_fixture_files_feed_the_arguments(captured: Captured) -> None:
    _, matrix, _ = captured
    found = suite(matrix, "tests/e2e/lora/test_from_config.py")
    assert found.argv == (*QWEN_MODEL_ARGS, "--load", "/root/models/Qwen3-0.6B_miles", "--ckpt-step", "0",
                          "--num-layers-check", "28", "--model-type", "qwen2")
    assert found.env == {**JOB_ENV, "MILES_TEST_MODE": "config"}


def test_servers_polled_or_started_look_ready(captured: Captured) -> None:
    messages, matrix, _ = captured
    assert suite(matrix, "tests/e2e/server/test_http_poll.py").argv == (
        *QWEN_MODEL_ARGS, "--rollout-external", "--sglang-router-port", "30000")
    assert messages["tests/e2e/server/test_http_poll.py"]["launches"][0]["argv"] == [
        "python3", "-m", "sglang.launch_server", "--port", "30000"]
    popen = messages["tests/e2e/server/test_popen_alive.py"]
    assert popen["status"] == "captured" and popen["reason"] is None, popen["reason"]
    assert popen["launches"][0]["argv"] == ["python3", "-m", "sglang_router.launch_router", "--port", "30001"]
    assert suite(matrix, "tests/e2e/server/test_popen_alive.py").argv[-4:-1] == (
        "--router-port", "30001", "--world-size-hint")


def test_typer_cli_runs_with_its_defaults(captured: Captured) -> None:
    _, matrix, _ = captured
    assert suite(matrix, "tests/e2e/short/test_typer_cli.py").argv == (*QWEN_MODEL_ARGS, "--cli-mode", "lora",
                                                                         "--no-kl")


def test_failures_are_reported_with_their_reason(captured: Captured) -> None:
    messages, matrix, _ = captured
    failed = {f.script: f.reason for f in matrix.failed}
    assert "tests/e2e/short/test_nothing.py" not in failed  # it ran to its end: a script of another kind
    assert {f.script: f.reason for f in matrix.no_entry} == {
        "tests/e2e/short/test_nothing.py": "ran to its end and launched nothing"}
    assert failed["tests/e2e/short/test_hangs.py"] == (
        f"timed out after {SUITE_SECONDS * 0.8:g}s (at tests/e2e/short/test_hangs.py:5)")
    assert failed["tests/e2e/short/test_waits_forever.py"] == (
        "waits forever: still waiting after 6.0 virtual hours of sleep "
        "(at tests/e2e/short/test_waits_forever.py:14)")
    assert messages["tests/e2e/short/test_hangs.py"]["status"] == "failed"


def test_launches_before_a_failure_are_kept(captured: Captured) -> None:
    messages, matrix, _ = captured
    script = "tests/e2e/short/test_partial.py"
    assert messages[script]["status"] == "captured"
    reason = "after 3 launch(es): KeyError: 'large' (at tests/e2e/short/test_partial.py:9)"
    assert messages[script]["reason"] == reason
    assert suite(matrix, script).argv == (*QWEN_MODEL_ARGS, "--rollout-batch-size", "4")
    assert [f.reason for f in matrix.partial if f.script == script] == ["partial capture: " + reason]


def test_every_way_of_starting_a_process_is_recorded(captured: Captured) -> None:
    messages, matrix, _ = captured
    message = messages["tests/e2e/short/test_launch_styles.py"]
    assert message["status"] == "captured" and message["reason"] is None, message["reason"]
    words = [launch["argv"] for launch in message["launches"]]
    assert [argv[1:] for argv in words] == [
        ["/repo/train.py", "--style", "sys-executable"],
        ["train.py", "--style", "absolute path"],
        ["train.py", "--style", "popen"],
        ["--nproc-per-node", "2", "train.py", "--style", "asyncio"],
        ["train.py", "--style", "exec"],
    ]
    # the interpreter running the harness is the analysis environment's, shown at the same path
    launchers = [argv[0] for argv in words]
    python = environment_of(miles_policy().harness).python
    assert launchers == [python, "/usr/bin/python3", "python3", "torchrun", "python3"]
    assert message["launches"][1]["cwd"] == "/root/miles"
    assert message["launches"][2]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    styles = [s.argv[-1] for s in matrix.suites if s.script == "tests/e2e/short/test_launch_styles.py"]
    assert styles == ["sys-executable", "absolute path", "popen", "asyncio", "exec"]


def test_capture_without_sandbox_sees_the_tree_at_its_own_path(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # No bubblewrap (for real: the runner looks for this path) and explicitly allowed: same suites, with
    # launch paths under the tree's real location made repo-relative all the same.
    monkeypatch.setenv("PRTRIAGE_BWRAP", str(tmp_path / "no-bwrap"))
    repo = tmp_path / "miles"
    write_tree(repo, {**MILES_LIBRARY, "tests/e2e/short/test_typer_cli.py": E2E_SCRIPTS[
        "tests/e2e/short/test_typer_cli.py"]})
    matrix, cached = capture_matrix(repo, miles_policy(), cache_dir=None, allow_unsandboxed=True)
    assert not cached
    assert [(s.id, s.entry, s.argv[-3:]) for s in matrix.suites] == [
        ("tests/e2e/short/test_typer_cli.py", "train.py", ("--cli-mode", "lora", "--no-kl"))]


def test_a_script_does_not_see_what_another_script_wrote_under_a_ci_host_prefix(tmp_path: Path) -> None:
    # Real miles scripts write under /root/ (`os.makedirs(dump_dir); open(path, "w")`). Each script's capture
    # must start from the CI host's files as the policy describes them, whatever ran before it: a matrix
    # that depends on script order changes with `workers`, and its cache (keyed by what the script read)
    # cannot know.
    repo = tmp_path / "miles"
    write_tree(repo, {
        "tests/e2e/a/test_writes_state.py": """
            import os
            os.makedirs("/root/state", exist_ok=True)
            with open("/root/state/marker.txt", "w") as f:
                f.write("left-by-another-script")
        """,
        "tests/e2e/b/test_reads_state.py": """
            import subprocess
            with open("/root/state/marker.txt") as f:
                marker = f.read() or "empty"
            subprocess.run(["python3", "train.py", "--marker", marker], check=True)
        """,
    })
    policy = miles_policy()
    job = {"policy": policy.model_dump(mode="json", by_alias=True), "workers": 1, "source": 0,
           "scripts": ["tests/e2e/a/test_writes_state.py", "tests/e2e/b/test_reads_state.py"]}
    run = run_harness(SandboxSpec(program="capture.py", repo_dir=repo, job=job, limits=policy.harness.limits,
                                  interpreter=environment_of(policy.harness)))
    messages = [ScriptReport.from_message(m) for m in run.messages if m.get("type") == "script"]
    matrix = build_matrix(policy, {0: messages}, "/repo")
    assert [s.argv for s in matrix.suites] == [("--marker", "empty")]
