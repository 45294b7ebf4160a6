"""The recording bash in the real sandbox: nested scripts, wrappers, path launches, exec, exported env, argv.

A second kind of CI: a driver called with arguments (`python3 ci/run_x.py --num-gpus 2`) whose shell scripts
start a `pretrain.py` entry with torchrun/deepspeed; the job environment is what bash exported.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from analysis_envs import twin_environment
from probes import run_probe_program

from app.analysis.core.policy import Policy, parse_policy
from app.analysis.sources.matrix import ScriptReport, build_matrix
from app.sandbox.runner import SandboxRun, SandboxSpec, run_harness

HARNESS = Path(__file__).resolve().parents[1] / "app" / "sandbox" / "harness"

POLICY = {
    "validation": {"paths": ["pretrain.py"], "entry": "arguments:parse_args"},
    "matrix": {"sources": [{
        "kind": "record_launches", "scripts": ["ci/run_*.py"],
        "command": ["python3", "{script}", "--num-gpus", "2"],
        "entry": r"(^|/)pretrain\.py$", "launchers": ["python", "python3", "torchrun", "deepspeed"],
        "env_from": ["exported"], "env_keep": ["NCCL_DEBUG", "MILES_X", "STAGE_NOTE"]}]},
    "harness": {"limits": {"suite_seconds": 10}},
}

FILES = {
    "ci/run_shell_styles.py": """
        import subprocess
        import sys

        gpus = sys.argv[sys.argv.index("--num-gpus") + 1]
        subprocess.run(["bash", "ci/launch.sh", gpus], check=True)
    """,
    "ci/env.sh": """
        export NCCL_DEBUG=INFO
        STAGE_NOTE="not exported"
    """,
    "ci/launch.sh": """
        #!/usr/bin/env bash
        set -euo pipefail
        source "$(dirname "$0")/env.sh"
        export PATH=/opt/cuda/bin:$PATH
        GPUS=$1
        PY=${PYTHON:-/usr/bin/python3}
        [[ v12.4 =~ ^v([0-9]+) ]]
        $PY pretrain.py --stage var --cuda-major "${BASH_REMATCH[1]}"
        nohup torchrun --nproc-per-node "$GPUS" pretrain.py --stage nohup
        timeout -s INT 600 python3 pretrain.py --stage timeout
        env MILES_X=1 python3 pretrain.py --stage env
        sh -c 'python3 pretrain.py --stage "sh -c"'
        ./ci/tool.py --stage shebang
        bash ./ci/inner.sh
        "$(which python3)" pretrain.py --stage which
        exec deepspeed --num_gpus "$GPUS" pretrain.py --stage exec
        python3 pretrain.py --stage never
    """,
    "ci/inner.sh": """
        ARGS=(--stage inner --layers $(( 4 * 6 )))
        python3 pretrain.py "${ARGS[@]}"
    """,
    "ci/tool.py": """
        #!/usr/bin/env python3
        raise SystemExit("capture must never run a launched script")
    """,
    "ci/run_lost_launch.py": """
        import subprocess

        subprocess.run("python3 pretrain.py --stage lost > /root/logs/run.log 2>&1; echo done", shell=True)
        subprocess.run("python3 pretrain.py --stage kept", shell=True, check=True)
    """,
    "ci/run_typer_args.py": """
        import os

        import typer

        app = typer.Typer()

        @app.command()
        def main(num_gpus: int = 8, stage: str = "typer") -> None:
            os.environ["MILES_X"] = "from-python"
            os.system(f"torchrun --nproc-per-node {num_gpus} pretrain.py --stage {stage}")

        if __name__ == "__main__":
            app()
    """,
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def shell_policy() -> Policy:
    return parse_policy(json.dumps(POLICY), "test")


ShellRun = tuple[dict[str, dict[str, Any]], SandboxRun]


@pytest.fixture(scope="module")
def shell_run(tmp_path_factory: pytest.TempPathFactory) -> ShellRun:
    repo = tmp_path_factory.mktemp("shell") / "repo"
    write_tree(repo, FILES)
    (repo / "ci" / "tool.py").chmod(0o755)
    (repo / "ci" / "launch.sh").chmod(0o755)
    policy = shell_policy()
    job = {"policy": policy.model_dump(mode="json", by_alias=True), "workers": 2, "source": 0,
           "scripts": ["ci/run_lost_launch.py", "ci/run_shell_styles.py", "ci/run_typer_args.py"]}
    run = run_harness(SandboxSpec(program="capture.py", repo_dir=repo, job=job, limits=policy.harness.limits,
                                  interpreter=twin_environment()))  # the typer script imports it for real
    return {m["script"]: m for m in run.messages if m.get("type") == "script"}, run


def test_nested_shell_scripts_record_every_launch_as_bash_expanded_it(shell_run: ShellRun) -> None:
    messages, run = shell_run
    message = messages["ci/run_shell_styles.py"]
    assert message["status"] == "captured" and message["reason"] is None, (message["reason"], run.stderr_tail)
    assert [launch["argv"] for launch in message["launches"]] == [
        ["/usr/bin/python3", "pretrain.py", "--stage", "var", "--cuda-major", "12"],
        ["torchrun", "--nproc-per-node", "2", "pretrain.py", "--stage", "nohup"],
        ["python3", "pretrain.py", "--stage", "timeout"],
        ["python3", "pretrain.py", "--stage", "env"],
        ["python3", "pretrain.py", "--stage", "sh -c"],
        ["./ci/tool.py", "--stage", "shebang"],
        ["python3", "pretrain.py", "--stage", "inner", "--layers", "24"],
        ["/usr/bin/python3", "pretrain.py", "--stage", "which"],
        ["deepspeed", "--num_gpus", "2", "pretrain.py", "--stage", "exec"],
    ]
    assert [launch["env"].get("NCCL_DEBUG") for launch in message["launches"]] == ["INFO"] * 9
    assert [launch["env"].get("MILES_X") for launch in message["launches"]].count("1") == 1
    assert all("STAGE_NOTE" not in launch["env"] for launch in message["launches"])


def test_recorded_environment_is_what_the_ci_chain_exported(shell_run: ShellRun) -> None:
    messages, _ = shell_run
    # PATH as the script made it (the recorder's own tool directory replaced by the caller's PATH); nothing
    # of the recorder, nothing the sandbox itself has set (HOME, LANG) unless the chain changed it
    assert messages["ci/run_shell_styles.py"]["launches"][0]["env"] == {"NCCL_DEBUG": "INFO",
                                                                      "PATH": "/opt/cuda/bin:/usr/bin:/bin"}
    assert messages["ci/run_typer_args.py"]["launches"][0]["env"] == {"MILES_X": "from-python"}


def test_the_command_template_feeds_the_scripts_argv(shell_run: ShellRun) -> None:
    messages, _ = shell_run
    message = messages["ci/run_typer_args.py"]
    assert [launch["argv"] for launch in message["launches"]] == [
        ["torchrun", "--nproc-per-node", "2", "pretrain.py", "--stage", "typer"]]
    assert message["launches"][0]["env"]["MILES_X"] == "from-python"


def test_exported_environment_becomes_the_suite_env(shell_run: ShellRun) -> None:
    messages, _ = shell_run
    reports = [ScriptReport.from_message(m) for m in messages.values()]
    matrix = build_matrix(shell_policy(), {0: reports}, "/repo")
    by_id = {s.id: s for s in matrix.suites}
    assert by_id["ci/run_shell_styles.py#4"].env == {"NCCL_DEBUG": "INFO", "MILES_X": "1"}
    assert by_id["ci/run_shell_styles.py#4"].argv == ("--stage", "env")
    assert by_id["ci/run_typer_args.py"].env == {"MILES_X": "from-python"}
    # ./ci/tool.py starts no pretrain.py: recorded, but no suite of it
    assert len([s for s in matrix.suites if s.script == "ci/run_shell_styles.py"]) == 8


def test_a_launch_lost_to_the_sandbox_is_reported(shell_run: ShellRun) -> None:
    # CI's log directory does not exist here: bash skips the command it cannot redirect, and says so
    messages, _ = shell_run
    message = messages["ci/run_lost_launch.py"]
    kept = [["python3", "pretrain.py", "--stage", "kept"]]
    assert [launch["argv"] for launch in message["launches"]] == kept
    assert message["reason"] == "bash: line 1: /root/logs/run.log: No such file or directory"
    matrix = build_matrix(shell_policy(), {0: [ScriptReport.from_message(message)]}, "/repo")
    assert [f.reason for f in matrix.partial] == ["partial capture: " + message["reason"]]


def test_a_slow_shell_is_waited_for_in_real_time_not_on_the_virtual_clock(tmp_path: Path) -> None:
    # Found on THUDM/slime: tests/test_qwen3_0.6B_parallel_check.py runs a dozen shell strings; on a loaded
    # machine Popen.wait(timeout=...) polled with the virtual time.sleep, spun, and ended the script as
    # "waits forever" after a varying number of launches. Here one virtual second is the whole bound, and
    # the loop takes seconds of real time (the recording bash's DEBUG trap runs before each command: ten
    # times this loop ran past the 30 s real-time limit on a 2-core machine).
    program = textwrap.dedent(f"""
        import json, sys, tempfile
        sys.path.insert(0, {str(HARNESS)!r})
        import intercept_shell, vclock
        tools = intercept_shell.prepare_tools(["python3"])
        settings = intercept_shell.ShellSettings(tools, tempfile.mkdtemp(), ["python3"], 30.0)
        vclock.install(bound_seconds=1.0)
        out = intercept_shell.run_shell(
            settings, "i=0; while (( i < 30000 )); do ((i++)); done; echo $i", None, None)
        print(json.dumps({{"out": out.decode().strip(), "slept": vclock.slept(),
                           "problems": settings.problems}}))
    """)
    assert run_probe_program(tmp_path, program) == {"out": "30000", "slept": 0.0, "problems": []}
