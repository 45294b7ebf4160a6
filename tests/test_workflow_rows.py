"""The workflow_rows matrix source: rows of a GitHub workflow's `strategy.matrix` as CI suites.

The workflow here is written after THUDM/slime's `.github/workflows/pr-test.yml`: label-gated GPU jobs whose
rows name `test_file`, `test_args` and flags that the job's `env:` turns into `SLIME_TEST_*` variables with
`${{ matrix.info.x || 'default' }}`; a CPU job of pytest files; a job whose matrix is computed; a job
repeating another's rows. The last test captures it in the real sandbox, through the recording bash.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from app.analysis.core.policy import Policy, builtin_policy, load_policy
from app.analysis.sources.workflow_rows import (
    MAX_WORKFLOW_BYTES,
    WorkflowError,
    evaluate,
    expand_matrix,
    list_rows,
    render,
    rows_from_workflow,
    script_path,
)
from app.analysis.sources.workflow_rows_keys import WorkflowRows
from app.engine.matrix_capture import HostTree, capture_matrix

POLICIES = Path(__file__).resolve().parents[1] / "policies"

WORKFLOW = """
name: PR Test
on:
  pull_request:
    types: [opened, synchronize, labeled]
env:
  CI_WIDE: "yes"
jobs:
  e2e-test-megatron:
    if: >-
      (github.event_name == 'workflow_dispatch') || (github.event.pull_request &&
      contains(github.event.pull_request.labels.*.name, 'run-ci-megatron'))
    runs-on: self-hosted
    strategy:
      fail-fast: false
      matrix:
        info:
          [
            {"num_gpus": 8, "test_file": "test_qwen_short.py"},
            {"enable_eval": "0", "num_gpus": 8, "test_file": "test_qwen_moe.py", "use_deepep": "1"},
            {"num_gpus": 8, "test_args": "--save-optimizer gpu --async-save", "test_file": "test_ckpt.py"},
            {"num_gpus": 8, "test_args": "--save-optimizer cpu", "test_file": "tests/test_ckpt.py"}
          ]
    env:
      GITHUB_COMMIT_NAME: ${{ github.sha }}_${{ github.event.pull_request.number || 'non-pr' }}
      WANDB_API_KEY: ${{ secrets.WANDB_API_KEY }}
      SLIME_TEST_USE_DEEPEP: ${{ matrix.info.use_deepep || '0' }}
      SLIME_TEST_ENABLE_EVAL: ${{ matrix.info.enable_eval || '1' }}
    steps:
      - run: python "tests/${{ matrix.info.test_file }}" ${{ matrix.info.test_args || '' }}
  e2e-test-image:
    if: contains(github.event.pull_request.labels.*.name, 'run-ci-image')
    strategy:
      matrix:
        info: [{"num_gpus": 8, "test_file": "test_qwen_short.py"}]
    env:
      SLIME_TEST_USE_DEEPEP: ${{ matrix.info.use_deepep || '0' }}
      SLIME_TEST_ENABLE_EVAL: ${{ matrix.info.enable_eval || '1' }}
  cpu-unittest:
    if: github.event_name == 'pull_request'
    strategy:
      matrix:
        info: [{"num_gpus": 0, "test_file": "test_unit.py"}]
  e2e-test-changed:
    strategy:
      matrix: ${{ fromJson(needs.detect.outputs.matrix) }}
  switched-off:
    if: false
    strategy:
      matrix:
        info: [{"test_file": "test_qwen_short.py", "use_deepep": "1"}]
  lint:
    runs-on: ubuntu-latest
    steps: [{run: pre-commit run --all-files}]
"""


def rows_source(**overrides: Any) -> WorkflowRows:
    return WorkflowRows.model_validate({"kind": "workflow_rows", "workflows": [".github/workflows/*.yml"],
                                        "script": "info.test_file", "script_dir": "tests",
                                        "args": "info.test_args", "entry": r"(^|/)train(_async)?\.py$",
                                        **overrides})


def test_each_row_is_its_script_its_words_and_its_job_env() -> None:
    listing = rows_from_workflow(WORKFLOW, "pr-test.yml", rows_source(exclude_jobs=["cpu-unittest"]))
    megatron = [(r.script, r.args, r.env["SLIME_TEST_USE_DEEPEP"], r.env["SLIME_TEST_ENABLE_EVAL"])
                for r in listing.rows if r.job == "pr-test.yml:e2e-test-megatron"]
    assert megatron == [
        ("tests/test_qwen_short.py", (), "0", "1"),
        ("tests/test_qwen_moe.py", (), "1", "0"),
        ("tests/test_ckpt.py", ("--save-optimizer", "gpu", "--async-save"), "0", "1"),
        ("tests/test_ckpt.py", ("--save-optimizer", "cpu"), "0", "1"),
    ]
    assert all(r.env["CI_WIDE"] == "yes" for r in listing.rows)


def test_what_needs_more_than_the_default_form_is_left_out_never_guessed() -> None:
    listing = rows_from_workflow(WORKFLOW, "pr-test.yml", rows_source())
    assert all("GITHUB_COMMIT_NAME" not in r.env and "WANDB_API_KEY" not in r.env for r in listing.rows)
    assert any("GITHUB_COMMIT_NAME, WANDB_API_KEY not evaluated" in note for note in listing.notes)


def test_label_gated_jobs_count_a_computed_matrix_is_left_out_and_if_false_is_disabled() -> None:
    listing = rows_from_workflow(WORKFLOW, "pr-test.yml", rows_source())
    assert {r.job for r in listing.rows} == {"pr-test.yml:e2e-test-megatron", "pr-test.yml:e2e-test-image",
                                              "pr-test.yml:cpu-unittest"}
    assert listing.disabled == ["pr-test.yml:switched-off"]
    computed = "pr-test.yml:e2e-test-changed: matrix is not a list of rows"
    assert any(note.startswith(computed) for note in listing.notes)


def test_jobs_and_exclude_jobs_select() -> None:
    only = rows_from_workflow(WORKFLOW, "w.yml", rows_source(jobs=["e2e-test-image"]))
    assert [r.script for r in only.rows] == ["tests/test_qwen_short.py"]
    minus = rows_from_workflow(WORKFLOW, "w.yml",
                               rows_source(exclude_jobs=["e2e-test-megatron", "cpu-unittest"]))
    assert [r.job for r in minus.rows] == ["w.yml:e2e-test-image"]


def test_the_runner_env_lies_beneath_the_job_env() -> None:
    runner = {"http_proxy": "", "CI_WIDE": "runner", "GITHUB_COMMIT_NAME": "abc_1"}
    listing = rows_from_workflow(WORKFLOW, "w.yml", rows_source(env=runner))
    assert {(r.env["http_proxy"], r.env["CI_WIDE"]) for r in listing.rows} == {("", "yes")}
    # what the evaluator leaves out, the runner's value stands for (the policy says what a PR gives)
    megatron = [r for r in listing.rows if r.job == "w.yml:e2e-test-megatron"]
    assert {r.env["GITHUB_COMMIT_NAME"] for r in megatron} == {"abc_1"}
    assert any(note.startswith("w.yml:e2e-test-megatron: env WANDB_API_KEY not") for note in listing.notes)


def test_default_form_evaluation() -> None:
    row = {"info": {"use_deepep": "1", "zero": 0, "empty": "", "flag": True}}
    assert evaluate(" matrix.info.use_deepep || '0' ", row) == "1"
    assert evaluate("matrix.info.absent || '0'", row) == "0"
    assert evaluate("matrix.info.zero || matrix.info.empty || 'it''s'", row) == "it's"
    assert evaluate("matrix.info.absent", row) is None
    assert evaluate("'a || b'", row) == "a || b"
    assert render("${{ matrix.info.flag }}-${{ matrix.info.zero || 7 }}", row) == "true-7"
    assert render(8, row) == "8"
    # GitHub's operators over the row (inclusionAI/AReaL's `EXCLUDE_BACKEND: ${{ matrix.variant == 'sglang'
    # && 'vllm' || 'sglang' }}` was left unset, and its `pytest -m "not ${EXCLUDE_BACKEND}"` ran no test)
    assert render("${{ matrix.info.use_deepep == '1' && 'deepep' || 'plain' }}", row) == "deepep"
    assert render("${{ matrix.info.zero == 0 || 'x' }}-${{ !matrix.info.flag }}", row) == "true-false"
    assert render("${{ fromJson('[1]') || 'x' }}", row) == "[1]"
    for unknown in ("github.sha", "secrets.TOKEN || 'x'", "matrix.info.absent || github.ref",
                    "hashFiles('x') || 'x'"):
        assert render("${{ " + unknown + " }}", row) is None, unknown


def test_matrix_expansion_follows_github() -> None:
    matrix = {"os": ["a", "b"], "py": [1, 2], "exclude": [{"os": "b", "py": 2}],
              "include": [{"py": 1, "extra": "x"}, {"os": "c", "py": 9}]}
    assert expand_matrix(matrix) == [{"os": "a", "py": 1, "extra": "x"}, {"os": "a", "py": 2},
                                     {"os": "b", "py": 1, "extra": "x"}, {"os": "c", "py": 9}]
    assert expand_matrix({"include": [{"test_file": "x.py"}]}) == [{"test_file": "x.py"}]
    assert expand_matrix("${{ fromJson(x) }}") is None
    assert expand_matrix({"a": list(range(20)), "b": list(range(20))}) is None  # 400 rows: over the bound


def test_script_dir_is_put_before_a_path_only_once() -> None:
    assert script_path("test_x.py", "tests") == "tests/test_x.py"
    assert script_path("tests/test_x.py", "tests/") == "tests/test_x.py"
    assert script_path("utils/test_x.py", "") == "utils/test_x.py"


def test_untrusted_workflow_text_is_bounded_and_must_be_a_mapping_of_jobs() -> None:
    with pytest.raises(WorkflowError, match="larger than"):
        rows_from_workflow("#" * (MAX_WORKFLOW_BYTES + 1), "big.yml", rows_source())
    with pytest.raises(WorkflowError, match="no `jobs`"):
        rows_from_workflow("- a\n- b\n", "list.yml", rows_source())
    with pytest.raises(WorkflowError, match="not valid YAML"):
        rows_from_workflow("jobs: [\n", "broken.yml", rows_source())
    with pytest.raises(WorkflowError, match="not valid YAML"):  # safe_load: no Python objects
        rows_from_workflow("jobs: !!python/object/apply:os.system ['true']\n", "evil.yml", rows_source())
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(WorkflowError, match="once its aliases are expanded"):  # 10**9 values, 1 KB of text
        rows_from_workflow("\n".join([*laughs, "jobs: {x: *a8}"]), "laughs.yml", rows_source())
    with pytest.raises(WorkflowError, match="once its aliases are expanded"):
        rows_from_workflow("jobs: &loop {x: *loop}\n", "cycle.yml", rows_source())


def test_the_builtin_slime_policy_loads_and_is_picked_by_repository_name() -> None:
    path = builtin_policy("THUDM", "slime")
    assert path.resolve() == (POLICIES / "THUDM" / "slime.yml").resolve()  # bundled: a link to policies/
    policy = load_policy(path)
    [source] = policy.matrix.sources
    assert isinstance(source, WorkflowRows)
    assert source.workflows == [".github/workflows/pr-test.yml"]
    assert policy.validation.entry == "slime.utils.arguments:parse_args"


SLIME_SHAPED = {
    ".github/workflows/pr-test.yml": WORKFLOW,
    "slime/__init__.py": "",
    "slime/utils/__init__.py": "",
    "slime/utils/command_utils.py": """
        import json
        import os
        import subprocess

        def execute_train(train_args: str) -> None:
            env = json.dumps({"env_vars": {"PYTHONPATH": "/root/Megatron-LM/"}})
            subprocess.run("ray stop --force", shell=True, check=True)
            subprocess.run(f"ray job submit --runtime-env-json='{env}' -- python3 train.py {train_args}",
                           shell=True, check=True)
    """,
    "tests/test_qwen_short.py": """
        import os
        from slime.utils import command_utils as U

        if __name__ == "__main__":
            deepep = "--moe-enable-deepep " if os.environ["SLIME_TEST_USE_DEEPEP"] == "1" else ""
            evaluate = "--eval-interval 20 " if os.environ.get("SLIME_TEST_ENABLE_EVAL", "1") == "1" else ""
            U.execute_train(f"--num-layers 2 {deepep}{evaluate}--ci-test")
    """,
    "tests/test_qwen_moe.py": """
        import os
        from slime.utils import command_utils as U

        if __name__ == "__main__":
            deepep = "--moe-enable-deepep " if os.environ["SLIME_TEST_USE_DEEPEP"] == "1" else ""
            evaluate = "--eval-interval 20 " if os.environ["SLIME_TEST_ENABLE_EVAL"] == "1" else ""
            U.execute_train(f"--num-experts 8 {deepep}{evaluate}--ci-test")
    """,
    "tests/test_ckpt.py": """
        import argparse
        from slime.utils import command_utils as U

        parser = argparse.ArgumentParser()
        parser.add_argument("--save-optimizer", default="cpu")
        parser.add_argument("--async-save", action="store_true")

        if __name__ == "__main__":
            args = parser.parse_args()
            U.execute_train(f"--save /root/ckpt --optimizer-placement {args.save_optimizer}"
                            + (" --async-save" if args.async_save else ""))
            U.execute_train(f"--load /root/ckpt --optimizer-placement {args.save_optimizer}")
    """,
    "tests/test_unit.py": """
        def test_nothing_to_launch():
            assert True
    """,
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def slime_shaped_policy() -> Policy:
    return Policy.model_validate({
        "validation": {"paths": ["slime/**"], "entry": "slime.utils.arguments:parse_args"},
        "matrix": {"sources": [{"kind": "workflow_rows", "workflows": [".github/workflows/pr-test.yml"],
                                "script": "info.test_file", "script_dir": "tests", "args": "info.test_args",
                                "command": ["python", "{script}"], "entry": r"(^|/)train(_async)?\.py$",
                                "launchers": ["python", "python3", "ray"]}]},
        "harness": {"limits": {"suite_seconds": 20}},
    })


def test_rows_repeated_by_another_job_are_one_item_with_unique_ids(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", SLIME_SHAPED)
    source = slime_shaped_policy().matrix.sources[0]
    assert isinstance(source, WorkflowRows)
    items, disabled = list_rows(source, HostTree(repo))
    assert [item["id"] for item in items] == [
        "tests/test_qwen_short.py", "tests/test_qwen_moe.py",
        "tests/test_ckpt.py --save-optimizer gpu --async-save", "tests/test_ckpt.py --save-optimizer cpu",
        "tests/test_unit.py"]
    assert disabled == [".github/workflows/pr-test.yml:switched-off"]


def test_rows_are_captured_in_the_sandbox_with_their_args_and_env(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", SLIME_SHAPED)
    matrix, cached = capture_matrix(repo, slime_shaped_policy(), cache_dir=tmp_path / "cache")
    argv = {suite.id: " ".join(suite.argv) for suite in matrix.suites}
    assert argv == {
        "tests/test_qwen_short.py": "--num-layers 2 --eval-interval 20 --ci-test",
        "tests/test_qwen_moe.py": "--num-experts 8 --moe-enable-deepep --ci-test",
        "tests/test_ckpt.py --save-optimizer gpu --async-save":
            "--save /root/ckpt --optimizer-placement gpu --async-save",
        "tests/test_ckpt.py --save-optimizer gpu --async-save#2":
            "--load /root/ckpt --optimizer-placement gpu",
        "tests/test_ckpt.py --save-optimizer cpu": "--save /root/ckpt --optimizer-placement cpu",
        "tests/test_ckpt.py --save-optimizer cpu#2": "--load /root/ckpt --optimizer-placement cpu",
    }
    assert not cached
    assert {suite.env["PYTHONPATH"] for suite in matrix.suites} == {"/root/Megatron-LM/"}
    assert [f.script for f in matrix.no_entry] == ["tests/test_unit.py"]
    assert matrix.disabled == (".github/workflows/pr-test.yml:switched-off",)
    assert (matrix.scripts, matrix.captured, matrix.failed) == (5, 4, ())
    again, cached = capture_matrix(repo, slime_shaped_policy(), cache_dir=tmp_path / "cache")
    assert cached and again == matrix


# slime's pr-test.yml before rows had `test_args` (d89acc81d, Jan 2026): the words ride in `test_file`, and
# the unquoted `python tests/${{ matrix.info.test_file }}` has bash split them.
WORDS_IN_SCRIPT_FIELD = """
jobs:
  e2e-test-ckpt:
    strategy:
      matrix:
        info: [{"num_gpus": 8, "test_file": "test_ckpt.py"},
               {"num_gpus": 8, "test_file": "test_ckpt.py --async-save"},
               {"num_gpus": 8, "test_file": "test_ckpt.py  --save-optimizer gpu",
                "test_args": "--async-save"}]
    steps:
      - run: >-
          python tests/ci/gpu_lock_exec.py --count ${{ matrix.info.num_gpus }} --
          python tests/${{ matrix.info.test_file }}
"""


def test_words_after_the_script_in_its_field_are_its_first_arguments() -> None:
    listing = rows_from_workflow(WORDS_IN_SCRIPT_FIELD, "pr-test.yml", rows_source())
    assert [(r.script, r.args) for r in listing.rows] == [
        ("tests/test_ckpt.py", ()),
        ("tests/test_ckpt.py", ("--async-save",)),
        ("tests/test_ckpt.py", ("--save-optimizer", "gpu", "--async-save")),
    ]
    blank = rows_from_workflow(WORDS_IN_SCRIPT_FIELD.replace('"test_ckpt.py"', '" "'), "pr-test.yml",
                               rows_source())
    assert len(blank.rows) == 2
    assert blank.notes == ["pr-test.yml:e2e-test-ckpt: a row without `info.test_file`: left out"]


def test_a_script_field_with_words_is_captured_in_the_sandbox_as_ci_runs_it(tmp_path: Path) -> None:
    # Before, the whole field was taken for a file name: "No such file or directory: '<file> --async-save'"
    repo = write_tree(tmp_path / "repo",
                      {**SLIME_SHAPED, ".github/workflows/pr-test.yml": WORDS_IN_SCRIPT_FIELD})
    matrix, _ = capture_matrix(repo, slime_shaped_policy(), cache_dir=tmp_path / "cache")
    argv = {suite.id: " ".join(suite.argv) for suite in matrix.suites}
    assert argv == {
        "tests/test_ckpt.py": "--save /root/ckpt --optimizer-placement cpu",
        "tests/test_ckpt.py#2": "--load /root/ckpt --optimizer-placement cpu",
        "tests/test_ckpt.py --async-save": "--save /root/ckpt --optimizer-placement cpu --async-save",
        "tests/test_ckpt.py --async-save#2": "--load /root/ckpt --optimizer-placement cpu",
        "tests/test_ckpt.py --save-optimizer gpu --async-save":
            "--save /root/ckpt --optimizer-placement gpu --async-save",
        "tests/test_ckpt.py --save-optimizer gpu --async-save#2":
            "--load /root/ckpt --optimizer-placement gpu",
    }
    assert (matrix.scripts, matrix.captured, matrix.failed) == (3, 3, ())
