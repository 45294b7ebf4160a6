"""Training launched from inside pytest test functions, selected by CI's own `-m`/paths.

Written after PrimeIntellect-ai/prime-rl: its GPU workflow runs `uv run pytest -vvs ${{ matrix.pytest_args }}`
over `tests/integration/test_*.py`, whose module fixtures start the training as `subprocess.Popen(["uv",
"run", "sft", "@", "configs/ci/integration/...toml", "--deployment.num-train-gpus", "2", ...])`. No CI
script names those command lines and no source kind reached them (record_launches ran each test module as a
script: it defines functions and launches nothing). The twin: a workflow step `pytest -m e2e tests/`
whose e2e test functions run `python train.py --tp N --world 8` by subprocess. Everything runs in the real
bubblewrap sandbox, pytest for real inside it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from analysis_envs import environment_of
from harness_twin import line_of
from launch_twin import write_repo
from needs import working_sandbox
from twin.cli import prtriage

from app.analysis.core.policy import Harness, Policy, parse_policy
from app.analysis.sources.pytest_launches import bounded_id
from app.analysis.starter.starter import detect, render
from app.engine.matrix_capture import capture_matrix
from app.sandbox.interpreter import Interpreter

TRAIN = '''\
import argparse

import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--world", type=int, default=8)
    args = parser.parse_args()
    assert args.world % args.tp == 0, "world size must divide by tp"
    dist.init_process_group(backend="nccl")
    while True:  # training: never reached in the sandbox
        pass


if __name__ == "__main__":
    main()
'''
E2E_TESTS = '''\
import subprocess
import sys

import pytest


@pytest.mark.e2e
@pytest.mark.parametrize("tp", [2, 4])
def test_train(tp, tmp_path):
    subprocess.run([sys.executable, "train.py", "--tp", str(tp), "--world", "8"], check=True)
    assert (tmp_path / "checkpoint").exists()  # the training's output: absent in the sandbox


def test_not_selected_by_ci():
    subprocess.run(["python", "train.py", "--tp", "3"], check=True)
'''
WORKFLOW = '''\
name: e2e
on: [pull_request]
jobs:
  e2e:
    runs-on: [self-hosted, gpu]
    env:
      NCCL_DEBUG: INFO
    steps:
      - uses: actions/checkout@v4
      - run: pip install -e .
      - name: e2e tests
        run: pytest -n 4 --timeout=600 -m e2e tests/  # xdist and pytest-timeout: absent in the sandbox
'''
FILES = {
    "train.py": TRAIN,
    "tests/test_e2e.py": E2E_TESTS,
    "pytest.ini": "[pytest]\nmarkers =\n    e2e: launches the training\n",
    ".github/workflows/e2e.yml": WORKFLOW,
}
POLICY = r'''# no validator named: each launch runs until training would start
version: 1
matrix:
  sources:
    - kind: pytest_launches
      workflows: [".github/workflows/*.yml"]
      entry: '(^|/)train\.py$'
      env_from: [exported]
harness:
  requirements: [pytest==9.2.0]  # CI's test runner: the analysis environment has no package it is not told of
  stub_modules: [torch]
  limits: {suite_seconds: 30}
'''
PYTEST = "pytest==9.2.0"
NEW_ASSERT = '    assert args.tp < 4, "tp 4 is not supported yet"\n'


def with_pytest() -> Interpreter:
    return environment_of(Harness(requirements=[PYTEST]))


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def policy(requirements: tuple[str, ...] = (PYTEST,), stub: tuple[str, ...] = ("torch",),
           **source: object) -> Policy:
    return Policy.model_validate({"version": 1, "matrix": {"sources": [{
        "kind": "pytest_launches", "workflows": [".github/workflows/*.yml"], "entry": r"(^|/)train\.py$",
        "env_from": ["exported"], **source}]},
        "harness": {"requirements": list(requirements), "stub_modules": list(stub),
                    "limits": {"suite_seconds": 60}}})


def test_capture_runs_ci_pytest_selection_and_records_each_test_functions_launch(tmp_path: Path) -> None:
    working_sandbox()
    repo = write_repo(tmp_path, FILES)
    matrix, _ = capture_matrix(repo, policy(), cache_dir=None, interpreter=with_pytest())
    suites = {suite.id: suite for suite in matrix.suites}
    # CI's -m e2e: the two e2e tests, not the unselected one (its --tp 3 would be a suite of its own)
    assert sorted(suites) == ["tests/test_e2e.py::test_train[2]", "tests/test_e2e.py::test_train[4]"]
    assert (matrix.scripts, matrix.captured, matrix.failed, matrix.no_entry) == (1, 1, (), ())
    four = suites["tests/test_e2e.py::test_train[4]"]
    assert (four.entry, list(four.argv)) == ("train.py", ["--tp", "4", "--world", "8"])
    assert four.env == {"NCCL_DEBUG": "INFO"}  # the job's env reached the test's launch


def test_invocations_name_the_pytest_command_line_without_a_workflow(tmp_path: Path) -> None:
    working_sandbox()
    repo = write_repo(tmp_path, FILES)
    matrix, _ = capture_matrix(repo, policy(workflows=[], invocations=[["tests/", "-k", "not test_train"]]),
                               cache_dir=None, interpreter=with_pytest())
    [suite] = matrix.suites
    assert (suite.id, suite.entry, list(suite.argv)) == (
        "tests/test_e2e.py::test_not_selected_by_ci", "train.py", ["--tp", "3"])


def test_a_selection_that_collects_nothing_says_so(tmp_path: Path) -> None:
    working_sandbox()
    repo = write_repo(tmp_path, FILES)
    matrix, _ = capture_matrix(repo, policy(workflows=[], invocations=[["-m", "nightly", "tests/"]]),
                               cache_dir=None, interpreter=with_pytest())
    assert matrix.suites == ()
    [failure] = matrix.failed
    assert failure.reason.startswith("CI's selection collected no test"), failure.reason


def test_without_pytest_in_the_analysis_environment_the_reason_says_so(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app" / "sandbox" / "harness"))
    try:
        import pytestrun  # the harness module as the sandbox imports it
    finally:
        sys.path.pop(0)
    monkeypatch.setitem(sys.modules, "pytest", None)  # `import pytest` raises ImportError
    state, reason, launches = pytestrun.run_step("pytest tests/", None, str(tmp_path), lambda: 10.0,
                                                 lambda found: None)
    assert (state, launches) == ("failed", [])
    assert reason is not None and reason.startswith("pytest is not installed in the analysis environment")
    assert "harness.requirements" in reason


def test_a_head_adding_an_assert_that_rejects_a_pytest_launch_is_blocked(tmp_path: Path) -> None:
    working_sandbox()
    repo = write_repo(tmp_path, FILES)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "pr")
    train = repo / "train.py"
    marker = '    assert args.world % args.tp == 0, "world size must divide by tp"\n'
    train.write_text(train.read_text().replace(marker, marker + NEW_ASSERT))
    git(repo, "commit", "-qam", "refuse tp 4")
    policy_file = tmp_path / "policy.yml"
    policy_file.write_text(POLICY)
    run = prtriage("check", "--repo", str(repo), "--base", "main", "--head", "pr", "--policy",
                   str(policy_file), "--format", "json", cache_dir=tmp_path / "cache")
    assert run.returncode == 1, run.describe()
    report = run.json()
    assert report["health"]["base"]["accepted"] == 2
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert (finding["kind"], finding["suites"]) == ("new_rejection", ["tests/test_e2e.py::test_train[4]"])
    assert (finding["path"], finding["line"]) == ("train.py", line_of(repo, "train.py", "assert args.tp < 4"))
    assert "tp 4 is not supported yet" in finding["message"]


# prime-rl's shape: the package under src/ (its configs in a uv workspace member's src/), the tests start the
# project's console script through `uv run`, the workflow passes the test file from a matrix row.
CHECKS = '''\
def check(tp, world):
    assert world % tp == 0, "world size must divide by tp"
'''
SRC_TRAIN = '''\
import argparse

import torch.distributed as dist

from toy.checks import check


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--world", type=int, default=8)
    args = parser.parse_args()
    check(args.tp, args.world)
    dist.init_process_group(backend="nccl")


if __name__ == "__main__":
    main()
'''
CONSOLE_TESTS = '''\
import subprocess

import pytest


@pytest.fixture(scope="module")
def launched():
    return [subprocess.Popen(["uv", "run", "toy-train", "--tp", str(tp), "--world", "8"]).wait()
            for tp in (2, 4)]


def test_no_error(launched):
    assert launched == [0, 0]
'''
CONSOLE_WORKFLOW = '''\
name: gpu
on: [pull_request]
jobs:
  integration:
    strategy:
      matrix:
        include:
          - pytest_args: tests/integration/test_toy.py
    steps:
      - run: uv sync
      - run: uv run pytest -vvs ${{ matrix.pytest_args }}
'''
CONSOLE_FILES = {
    "pyproject.toml": '[project]\nname = "toy"\n[project.scripts]\ntoy-train = "toy.train:main"\n'
                      '[tool.uv.sources]\ntoy-configs = { path = "packages/toy-configs", editable = true }\n',
    "src/toy/train.py": SRC_TRAIN,
    "packages/toy-configs/src/toy/checks.py": CHECKS,
    "tests/integration/test_toy.py": CONSOLE_TESTS,
    ".github/workflows/gpu.yml": CONSOLE_WORKFLOW,
}
CONSOLE_POLICY = POLICY.replace(r"'(^|/)train\.py$'", r"'(^|/)src/toy/\w+\.py$'")


def test_a_console_script_of_a_src_layout_launched_by_a_fixture_is_validated_as_its_module(
        tmp_path: Path) -> None:
    working_sandbox()
    repo = write_repo(tmp_path, CONSOLE_FILES)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "pr")
    checks = repo / "packages/toy-configs/src/toy/checks.py"
    checks.write_text(checks.read_text() + '    assert tp < 4, "tp 4 is not supported yet"\n')
    git(repo, "commit", "-qam", "refuse tp 4")
    policy_file = tmp_path / "policy.yml"
    policy_file.write_text(CONSOLE_POLICY)
    run = prtriage("check", "--repo", str(repo), "--base", "main", "--head", "pr", "--policy",
                   str(policy_file), "--format", "json", cache_dir=tmp_path / "cache")
    assert run.returncode == 1, run.describe()
    report = run.json()
    suites = {s["id"]: s for s in report["suites"]}
    assert sorted(suites) == ["tests/integration/test_toy.py::test_no_error",
                              "tests/integration/test_toy.py::test_no_error#2"]
    assert suites["tests/integration/test_toy.py::test_no_error"]["argv"] == ["--tp", "2", "--world", "8"]
    assert report["health"]["base"]["accepted"] == 2  # toy.checks imported for real, from the member's src/
    [finding] = [f for f in report["findings"] if f["severity"] == "blocking"]
    assert finding["suites"] == ["tests/integration/test_toy.py::test_no_error#2"]
    assert finding["path"] == "packages/toy-configs/src/toy/checks.py"


def test_init_detects_pytest_launches_pins_pytest_as_ci_and_leaves_pytest_args_to_it(tmp_path: Path) -> None:
    root = write_repo(tmp_path, {**CONSOLE_FILES,
                                 "uv.lock": '[[package]]\nname = "pytest"\nversion = "9.0.3"\n',
                                 "requirements-dev.txt": "pytest-integration==0.2.3  # its options\n"})
    starter = detect(root)
    # the row's `pytest_args` names a test file pytest runs: no workflow_rows source runs it as a script
    [source] = starter.policy["matrix"]["sources"]
    assert (source["kind"], source["workflows"]) == ("pytest_launches", [".github/workflows/gpu.yml"])
    # pytest as CI's lock has it, and the plugins whose options CI's conftest or addopts may pass
    assert {"pytest==9.0.3", "pytest-integration==0.2.3"} <= set(starter.policy["harness"]["requirements"])
    assert "tests/integration/test_toy.py" in starter.why["matrix.sources[0]"]
    assert parse_policy(render(starter), "starter").matrix.sources[0].kind == "pytest_launches"


def test_init_alone_writes_a_policy_whose_check_blocks_the_rejecting_head(tmp_path: Path) -> None:
    working_sandbox()
    repo = write_repo(tmp_path, FILES)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    written = tmp_path / "init.yml"
    init = prtriage("init", "--repo", str(repo), "--output", str(written), cache_dir=tmp_path / "cache")
    assert written.is_file(), init.describe()
    assert "kind: pytest_launches" in written.read_text()
    git(repo, "checkout", "-qb", "pr")
    train = repo / "train.py"
    marker = '    assert args.world % args.tp == 0, "world size must divide by tp"\n'
    train.write_text(train.read_text().replace(marker, marker + NEW_ASSERT))
    git(repo, "commit", "-qam", "refuse tp 4")
    run = prtriage("check", "--repo", str(repo), "--base", "main", "--head", "pr", "--policy", str(written),
                   "--format", "json", cache_dir=tmp_path / "cache")
    assert run.returncode == 1, run.describe()
    [finding] = [f for f in run.json()["findings"] if f["severity"] == "blocking"]
    assert finding["suites"] == ["tests/test_e2e.py::test_train[4]"]


def test_a_test_module_that_does_not_import_here_costs_only_its_own_tests(tmp_path: Path) -> None:
    """prime-rl's unit tests: 17 of its modules fail at import on stubbed packages; pytest's default stop at
    collection errors had cost every other test's launches."""
    working_sandbox()
    broken = {"tests/test_broken.py": "import pytest\n\nLIMITS = {}\nLIMITS['x'] += 1\n"}
    repo = write_repo(tmp_path, {**FILES, **broken})
    matrix, _ = capture_matrix(repo, policy(), cache_dir=None, interpreter=with_pytest())
    assert len(matrix.suites) == 2
    [partial] = matrix.partial
    assert "1 test module(s) did not import here" in partial.reason
    assert "tests/test_broken.py: KeyError: 'x'" in partial.reason, partial.reason


IN_PROCESS = '''\
import runpy
import sys

import pytest


@pytest.mark.e2e
def test_recipe(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py", "--tp", "8", "--world", "8"])
    runpy.run_path("train.py", run_name="__main__")
'''


def test_an_entry_a_test_runs_in_its_own_process_is_recorded_as_its_launch(tmp_path: Path) -> None:
    """pytorch/torchtune's recipe tests: `sys.argv` set, then `runpy.run_path(<the CLI>,
    run_name="__main__")` in the test's own process; no subprocess to intercept."""
    working_sandbox()
    repo = write_repo(tmp_path, {**FILES, "tests/test_inprocess.py": IN_PROCESS})
    matrix, _ = capture_matrix(repo, policy(), cache_dir=None, interpreter=with_pytest())
    suites = {suite.id: suite for suite in matrix.suites}
    recipe = suites["tests/test_inprocess.py::test_recipe"]
    assert (recipe.entry, list(recipe.argv)) == ("train.py", ["--tp", "8", "--world", "8"])
    assert len(suites) == 3 and matrix.partial == ()  # the two subprocess launches of test_e2e too


GPU_GATED = '''\
import subprocess
import sys

import pytest
import torch

GPUS = torch.cuda.device_count()  # read at import, as pytorch/torchtune's @gpu_test(gpu_count=2) reads it


@pytest.mark.e2e
@pytest.mark.skipif(GPUS < 2, reason="needs 2 GPUs")
def test_distributed():
    subprocess.run(["torchrun", "--nproc_per_node", str(GPUS), "train.py", "--tp", "2"], check=True)
'''


def test_tests_ci_gates_on_gpus_run_up_to_their_launch_with_cis_gpu_count(tmp_path: Path) -> None:
    """CPU torch answers 0 GPUs: pytorch/torchtune's recipe tests were skipped, none captured."""
    working_sandbox()
    repo = write_repo(tmp_path, {**FILES, "tests/test_gpu.py": GPU_GATED})
    real_torch = {"requirements": (PYTEST, "torch==2.13.0"), "stub": ()}
    cpu_torch = environment_of(Harness(requirements=list(real_torch["requirements"])))
    gated = "tests/test_gpu.py::test_distributed"
    without, _ = capture_matrix(repo, policy(**real_torch), cache_dir=None, interpreter=cpu_torch)
    assert gated not in {suite.id for suite in without.suites}
    matrix, _ = capture_matrix(repo, policy(**real_torch, gpus=8), cache_dir=None, interpreter=cpu_torch)
    suite = {suite.id: suite for suite in matrix.suites}[gated]
    assert list(suite.argv) == ["--tp", "2"]


def test_a_node_id_too_long_for_a_suite_id_keeps_its_start_and_a_digest() -> None:
    """pytorch/torchtune parametrizes with whole command lines: a 250-character node id came back from
    validation clipped to 200 and was 'reported but never asked for'."""
    long_ids = [f"tests/test_cli.py::test_cp[tune cp recipe /home/{n}{'x' * 240}]" for n in (1, 2)]
    ids = [bounded_id(test) for test in long_ids]
    assert all(len(suite_id) <= 180 for suite_id in ids) and ids[0] != ids[1]
    assert ids[0].startswith("tests/test_cli.py::test_cp[tune cp recipe /home/1")
    assert bounded_id("tests/test_e2e.py::test_train[4]") == "tests/test_e2e.py::test_train[4]"


# inclusionAI/AReaL's shape (main 4aef98d8d, `.github/workflows/test-areal.yml`): the pytest job's matrix is
# `variant: ${{ fromJson(needs.determine-variants.outputs.matrix) }}`, which a step of another job writes to
# $GITHUB_OUTPUT (`["sglang","vllm"]` unless a dispatch input names one), and each row excludes the other
# backend's tests (`EXCLUDE_BACKEND: ${{ matrix.variant == 'sglang' && 'vllm' || 'sglang' }}`, `pytest -m "not
# ${EXCLUDE_BACKEND}"`). Reading the workflow gave no row: its steps were left out, said nowhere (0 scripts).
BACKEND_TESTS = '''\
import subprocess
import sys

import pytest


@pytest.mark.sglang
def test_sglang():
    subprocess.run([sys.executable, "train.py", "--tp", "2"], check=True)


@pytest.mark.vllm
def test_vllm():
    subprocess.run([sys.executable, "train.py", "--tp", "4"], check=True)
'''
VARIANT_WORKFLOW = '''\
name: areal
on:
  workflow_call:
    inputs:
      variant: {type: string, default: both}
jobs:
  determine-variants:
    runs-on: ubuntu-latest
    outputs:
      matrix: ${{ steps.set-matrix.outputs.matrix }}
    steps:
      - name: Set variant matrix
        id: set-matrix
        run: |
          VARIANT="${{ inputs.variant || 'both' }}"
          if [ "$VARIANT" = "both" ]; then
            echo 'matrix=["sglang","vllm"]' >> "$GITHUB_OUTPUT"
          else
            echo "matrix=[\\"$VARIANT\\"]" >> "$GITHUB_OUTPUT"
          fi
  unit-tests:
    needs: [determine-variants]
    strategy:
      matrix:
        variant: ${{ fromJson(needs.determine-variants.outputs.matrix) }}
    runs-on: [self-hosted, gpu]
    env:
      EXCLUDE_BACKEND: ${{ matrix.variant == 'sglang' && 'vllm' || 'sglang' }}
    steps:
      - uses: actions/checkout@v6
      - name: Run unit tests
        run: |
          export PATH="/opt/.venv/bin:$PATH"
          pytest -m "not ${EXCLUDE_BACKEND}" tests/
'''


def test_a_pytest_job_whose_matrix_another_job_computes_runs_each_row_the_producer_gives(
        tmp_path: Path) -> None:
    working_sandbox()
    files = {"train.py": TRAIN, "tests/test_backends.py": BACKEND_TESTS,
             "pytest.ini": "[pytest]\nmarkers =\n    sglang: sglang\n    vllm: vllm\n",
             ".github/workflows/test-areal.yml": VARIANT_WORKFLOW}
    repo = write_repo(tmp_path, files)
    cache = tmp_path / "cache"
    matrix, cached = capture_matrix(repo, policy(), cache_dir=cache, interpreter=with_pytest())
    again, cached_again = capture_matrix(repo, policy(), cache_dir=cache, interpreter=with_pytest())
    # a source whose only rows another job computes is cached as any other: no sandbox runs the second time
    assert (cached, cached_again, again.suites) == (False, True, matrix.suites)
    # row sglang excludes vllm's test, row vllm sglang's: each backend's launch once
    assert sorted((suite.id, tuple(suite.argv)) for suite in matrix.suites) == [
        ("tests/test_backends.py::test_sglang", ("--tp", "2")),
        ("tests/test_backends.py::test_vllm", ("--tp", "4"))]
    assert (matrix.scripts, matrix.captured, matrix.failed) == (2, 2, ())
    # a producer that gives nothing here: the job's steps are left out, and the health says why
    silent = VARIANT_WORKFLOW.replace("""echo 'matrix=["sglang","vllm"]' >> "$GITHUB_OUTPUT\"""", "true")
    repo = write_repo(tmp_path / "silent", {**files, ".github/workflows/test-areal.yml": silent})
    matrix, _ = capture_matrix(repo, policy(), cache_dir=None, interpreter=with_pytest())
    assert matrix.suites == ()
    [failure] = matrix.failed
    assert failure.script == ".github/workflows/test-areal.yml:unit-tests"
    assert failure.reason == ("matrix from determine-variants's output matrix not computed (step set-matrix "
                              "wrote no matrix to $GITHUB_OUTPUT): its steps are left out")
