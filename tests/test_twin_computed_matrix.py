"""A job matrix another job computes, on a twin written after NVIDIA-NeMo/RL (main, 7ea279abf).

Its `cicd-functional-tests` job has `matrix: {script: ${{ fromJSON(needs.pre-flight.outputs.
h100_functional_test_scripts) }}}`; the pre-flight job's `evaluate` step (its env from `startsWith(github.ref,
...)`, the dispatch inputs and an earlier step's outputs) runs `bash .github/scripts/plan-tests.sh`, a `find`
over `tests/functional/L1_Functional*.sh` joined by `jq`, keeps the rows without `gb200` in their name with
another `jq`, and writes the list to $GITHUB_OUTPUT. Each row runs `bash tests/functional/${{ inputs.script
}}.sh` in the shared composite action. Reading the workflow alone gave the rows only as the step's glob
(`matrix_scripts`), which takes the GB200 script the h100 job never runs. Here the producing step runs in the
real bubblewrap sandbox and the rows are its output; when it cannot give them (it asks `gh api` for them,
which does nothing here), the glob's scripts are the rows and the health says why. Its unit job reads the
same pre-flight job: two sources, one run of it.
"""

from __future__ import annotations

from pathlib import Path

from needs import tool, working_sandbox
from test_twin_ci_shapes import write_tree

from app.analysis.core.policy import Policy
from app.analysis.starter.starter import detect
from app.engine.matrix_capture import capture_matrix

WORKFLOW = """
    name: "CICD NeMo RL"
    on:
      push:
        branches: [main]
      workflow_dispatch:
        inputs:
          test_script_pattern: {required: false, default: ""}
    jobs:
      pre-flight:
        runs-on: ubuntu-latest
        outputs:
          test_level: ${{ steps.evaluate.outputs.test_level }}
          unit_test_scripts: ${{ steps.evaluate.outputs.unit_test_scripts }}
          h100_functional_test_scripts: ${{ steps.evaluate.outputs.h100_functional_test_scripts }}
          gb200_functional_test_scripts: ${{ steps.evaluate.outputs.gb200_functional_test_scripts }}
        steps:
          - name: Get PR info
            id: get-pr-info
            if: startsWith(github.ref, 'refs/heads/pull-request/')
            uses: nv-gha-runners/get-pr-info@main
          - name: Checkout
            uses: actions/checkout@v6
          - name: Determine base and head references
            id: base-head-ref
            run: |
              head_sha="${{ github.sha }}"
              echo "head_sha=$head_sha" >> "$GITHUB_OUTPUT"
          - name: Evaluate conditions
            id: evaluate
            env:
              IS_PULLREQUEST: ${{ startsWith(github.ref, 'refs/heads/pull-request/') }}
              LABEL: ${{ steps.base-head-ref.outputs.ci_label }}
              TEST_SCRIPT_PATTERN: ${{ inputs.test_script_pattern }}
            run: |
              if [[ "$LABEL" == "CI:L1" || "$IS_PULLREQUEST" == "false" ]]; then
                TEST_LEVEL="L1"
              else
                TEST_LEVEL="none"
              fi
              if [[ "${{ github.event_name }}" == "workflow_dispatch" ]]; then
                TEST_LEVEL="L2"
              fi
              # the runner's variables, as the context gives them (else `set -e` ends the step: no rows)
              [[ "$GITHUB_REF_NAME" == main && "$GITHUB_EVENT_NAME" == "${{ github.event_name }}" ]]
              test_plan=$(bash .github/scripts/plan-tests.sh "$TEST_SCRIPT_PATTERN")
              h100_functional_test_scripts=$(jq -c \\
                '[.functional[] | select((ascii_downcase | contains("gb200")) | not)]' <<< "$test_plan")
              gb200_functional_test_scripts=$(jq -c '.functional' <<< "$test_plan")
              {
                echo "test_level=$TEST_LEVEL"
                echo "unit_test_scripts=$(jq -c '.unit' <<< "$test_plan")"
                echo "h100_functional_test_scripts=$h100_functional_test_scripts"
                echo "gb200_functional_test_scripts=$gb200_functional_test_scripts"
              } | tee -a "$GITHUB_OUTPUT"
      cicd-unit-tests:
        strategy:
          matrix:
            script: ${{ fromJSON(needs.pre-flight.outputs.unit_test_scripts) }}
        needs: [pre-flight]
        runs-on: h100
        steps:
          - name: main
            uses: ./.github/actions/test-template
            with:
              script: ${{ matrix.script }}
              is_unit_test: "true"
      cicd-functional-tests:
        strategy:
          fail-fast: false
          matrix:
            script: ${{ fromJSON(needs.pre-flight.outputs.h100_functional_test_scripts) }}
        needs: [pre-flight]
        runs-on: h100
        steps:
          - uses: actions/checkout@v6
          - name: main
            uses: ./.github/actions/test-template
            with:
              script: ${{ matrix.script }}
"""
PLAN_TESTS = """
    #!/usr/bin/env bash
    set -euo pipefail
    script_pattern=$(printf '%s' "$1" | tr '[:upper:]' '[:lower:]')
    unit_scripts='[]'
    functional_scripts='[]'
    while IFS= read -r script_path; do
        script=$(basename "$script_path" .sh)
        unit_scripts=$(jq -cn --argjson scripts "$unit_scripts" --arg script "$script" '$scripts + [$script]')
    done < <(find tests/unit -maxdepth 1 -type f -name 'L0_Unit*.sh' | sort)
    while IFS= read -r script_path; do
        script=$(basename "$script_path" .sh)
        script_lower=$(printf '%s' "$script" | tr '[:upper:]' '[:lower:]')
        if [[ -n "$script_pattern" && "$script_lower" != *"$script_pattern"* ]]; then
            continue
        fi
        functional_scripts=$(jq -cn --argjson scripts "$functional_scripts" --arg script "$script" \\
            '$scripts + [$script]')
    done < <(find tests/functional -maxdepth 1 -type f -name 'L1_Functional*.sh' | sort)
    jq -cn --argjson unit "$unit_scripts" --argjson functional "$functional_scripts" \
        '{unit: $unit, functional: $functional}'
"""
ACTION = """
    name: "Test Template"
    inputs:
      script: {required: true}
      is_unit_test: {default: "false"}
    runs:
      using: composite
      steps:
        - name: Run tests
          shell: bash
          run: |
            docker run --rm image:${{ github.run_id }} bash -c '
              bash tests/${{ inputs.is_unit_test == 'true' && 'unit' || 'functional' }}/${{
              inputs.script }}.sh'
"""
FILES = {
    ".github/workflows/cicd-main.yml": WORKFLOW,
    ".github/scripts/plan-tests.sh": PLAN_TESTS,
    ".github/actions/test-template/action.yml": ACTION,
    "tests/functional/L1_Functional_Tests_GRPO.sh": "bash ./tests/functional/grpo.sh\n",
    "tests/functional/L1_Functional_Tests_SFT.sh": "bash ./tests/functional/sft.sh\n",
    "tests/functional/L1_Functional_Tests_GB200_MXFP8.sh": "bash ./tests/functional/grpo_mxfp8.sh\n",
    "tests/functional/grpo.sh": "python examples/run_grpo.py grpo.max_num_steps=2\n",
    "tests/functional/sft.sh": "python examples/run_sft.py sft.max_num_steps=3\n",
    "tests/functional/grpo_mxfp8.sh": "python examples/run_grpo.py policy.precision=mxfp8\n",
    "tests/unit/L0_Unit_Tests_Data.sh": "python examples/run_sft.py data.shuffle=false\n",
    "examples/run_grpo.py": "raise SystemExit('capture never runs a launched script')\n",
    "examples/run_sft.py": "raise SystemExit('capture never runs a launched script')\n",
}
FUNCTIONAL = "tests/functional/L1_Functional_Tests_"


def policy(**keys: object) -> Policy:
    return Policy.model_validate({
        "version": 1,
        "validation": {"mode": "boundary"},
        "matrix": {"sources": [{
            "kind": "computed_matrix", "workflow": ".github/workflows/cicd-main.yml",
            "jobs": ["cicd-functional-tests"], "scripts": [f"{FUNCTIONAL}*.sh"],
            "command": ["bash", "{script}"],
            "entry": r"(^|/)examples/run_\w+\.py$", "launchers": ["python", "python3"],
            "env_from": ["exported"], **keys}]},
        "harness": {"limits": {"suite_seconds": 30}},
    })


def test_nemo_rl_rows_are_what_the_pre_flight_step_writes_to_github_output(tmp_path: Path) -> None:
    working_sandbox()
    tool("jq")
    repo = write_tree(tmp_path / "repo", FILES)
    matrix, _ = capture_matrix(repo, policy(), cache_dir=None)
    # the h100 job's rows: not the GB200 script, which the step's glob matches and its jq leaves out
    assert [suite.id for suite in matrix.suites] == [f"{FUNCTIONAL}GRPO.sh", f"{FUNCTIONAL}SFT.sh"]
    assert [list(s.argv) for s in matrix.suites] == [["grpo.max_num_steps=2"], ["sft.max_num_steps=3"]]
    assert (matrix.scripts, matrix.captured, matrix.failed) == (2, 2, ())
    # a dispatch's `github` context: the step's own filter is still the h100 one, the rows the same
    dispatched = policy(github={"event_name": "workflow_dispatch", "ref": "refs/heads/main"})
    matrix, _ = capture_matrix(repo, dispatched, cache_dir=None)
    assert len(matrix.suites) == 2 and matrix.failed == ()


def test_two_sources_reading_one_producing_job_share_its_one_run(tmp_path: Path) -> None:
    working_sandbox()
    tool("jq")
    repo = write_tree(tmp_path / "repo", FILES)
    functional = policy().matrix.sources[0].model_dump(mode="json")
    unit = {**functional, "jobs": ["cicd-unit-tests"], "scripts": ["tests/unit/L0_Unit_Tests_*.sh"]}
    both = Policy.model_validate({**policy().model_dump(mode="json", by_alias=True),
                                  "matrix": {"sources": [unit, functional]}})
    progress: list[str] = []
    matrix, _ = capture_matrix(repo, both, cache_dir=None, on_progress=lambda done, total, what: (
        progress.append(what) if done else None))
    assert [suite.id for suite in matrix.suites] == [
        "tests/unit/L0_Unit_Tests_Data.sh", f"{FUNCTIONAL}GRPO.sh", f"{FUNCTIONAL}SFT.sh"]
    assert matrix.failed == ()
    assert [what for what in progress if what.endswith(":pre-flight")] == [
        "0:.github/workflows/cicd-main.yml:pre-flight"]  # one run of the job both sources read


def test_a_producing_step_that_needs_the_network_leaves_the_globs_rows_and_says_so(tmp_path: Path) -> None:
    working_sandbox()
    asks_github = WORKFLOW.replace(
        'test_plan=$(bash .github/scripts/plan-tests.sh "$TEST_SCRIPT_PATTERN")',
        "test_plan=$(gh api repos/NVIDIA-NeMo/RL/contents/tests/functional "
        "| jq -c '{functional: [.[].name]}')")
    repo = write_tree(tmp_path / "repo", {**FILES, ".github/workflows/cicd-main.yml": asks_github})
    matrix, _ = capture_matrix(repo, policy(), cache_dir=None)
    assert len(matrix.suites) == 3  # the glob's three scripts, the GB200 one too
    [note] = matrix.failed
    assert note.script == ".github/workflows/cicd-main.yml:cicd-functional-tests"
    assert note.reason.startswith("matrix from pre-flight not computed: step evaluate wrote no "
                                  "h100_functional_test_scripts to $GITHUB_OUTPUT"), note.reason


def test_init_writes_the_computed_matrix_for_this_shape(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    starter = detect(repo)
    unit, source = starter.policy["matrix"]["sources"]
    assert (unit["kind"], unit["jobs"], unit["scripts"]) == (
        "computed_matrix", ["cicd-unit-tests"], ["tests/unit/L0_Unit_Tests_Data.sh"])
    assert (source["kind"], source["workflow"], source["jobs"]) == (
        "computed_matrix", ".github/workflows/cicd-main.yml", ["cicd-functional-tests"])
    assert source["scripts"] == [f"{FUNCTIONAL}*.sh"] and source["command"] == ["bash", "{script}"]
    assert "pre-flight's output h100_functional_test_scripts (its step evaluate)" in (
        starter.why["matrix.sources[1]"])
