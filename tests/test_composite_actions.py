"""Local composite actions expanded in place, and the expression evaluator their inputs go through."""

from __future__ import annotations

import pytest

from app.analysis.sources import expressions
from app.analysis.sources.composite_actions import job_steps, substitute
from app.analysis.sources.workflow_rows import expand_matrix

ACTION = """
inputs:
  script: {required: true}
  is_unit_test: {default: "false"}
  image-tag: {default: ""}
runs:
  using: composite
  steps:
    - run: bash tests/${{ inputs.is_unit_test == 'true' && 'unit' || 'functional' }}/${{ inputs.script }}.sh
      env: {TAG: "${{ inputs.image-tag || github.run_id }}"}
    - uses: ./.github/actions/inner
      with: {what: "${{ inputs.script }}"}
"""
INNER = """
runs:
  using: composite
  steps:
    - run: echo ${{ inputs.what }}
"""


def test_expressions_follow_github_rules_and_never_guess() -> None:
    names = {"inputs.a": "True", "matrix.n": 2}
    assert expressions.evaluate("inputs.a == 'true' && 'x' || 'y'", names) == "x"  # case-insensitive
    assert expressions.evaluate("!(matrix.n == '2') || 'fallback'", names) == "fallback"  # as numbers
    assert expressions.evaluate("matrix.n != 2 && 'x'", names) is False
    assert expressions.evaluate("'it''s'", {}) == "it's"
    for unknown in ("github.run_id", "hashFiles('x')", "always()", "startsWith('a')", "inputs.a ==",
                    "'a' 'b'", "labels.*.name"):
        assert expressions.evaluate(unknown, names) is expressions.UNKNOWN, unknown


def test_expressions_call_the_pure_functions_and_read_an_empty_context_as_null() -> None:
    names = {"github.ref": "refs/heads/main", "inputs.a": "True"}
    assert expressions.evaluate("startsWith(github.ref, 'REFS/heads/')", names) is True
    assert expressions.evaluate("endsWith(github.ref, 'main') && contains('L1 L2', 'l2')", names) is True
    assert expressions.evaluate("contains(fromJSON('[\"a\", 2]'), 2)", names) is True
    assert expressions.evaluate("contains(inputs.a, 'x')", names) is False
    # A push has no inputs and the producing job's earlier `uses:` steps set no outputs: null, as on GitHub.
    assert expressions.evaluate("inputs.level || 'all'", names, ("inputs", "steps")) == "all"
    assert expressions.evaluate("steps.x.outputs.y == 'true'", names, ("inputs", "steps")) is False
    assert expressions.evaluate("steps.x.outputs.y", names) is expressions.UNKNOWN


def test_an_action_step_stands_for_the_action_steps_with_its_inputs() -> None:
    files = {".github/actions/test-template/action.yml": ACTION, ".github/actions/inner/action.yml": INNER}
    steps = [{"uses": "actions/checkout@v6"},
             {"uses": "./.github/actions/test-template", "env": {"HF_HOME": "/hf"},
              "with": {"script": "${{ matrix.script }}"}}]
    notes: list[str] = []
    found = job_steps(steps, files.__getitem__, notes, "w:job")
    assert [s.number for s in found] == ["1", "2.1", "2.2.1"]
    assert found[1].step["run"] == "bash tests/functional/${{ matrix.script }}.sh"  # left for the row
    # an input inlined where a name stays unknown: the row's evaluation leaves the variable out
    assert found[1].step["env"] == {"HF_HOME": "/hf", "TAG": "${{ '' || github.run_id }}"}
    assert found[2].step["run"] == "echo ${{ matrix.script }}"
    assert notes == []


def test_an_unreadable_or_escaping_action_is_noted_and_runs_nothing() -> None:
    def read(path: str) -> str:
        raise FileNotFoundError(path)

    notes: list[str] = []
    steps = [{"uses": "./.github/actions/missing"}, {"uses": "./../outside"}]
    assert job_steps(steps, read, notes, "w:job") == []
    assert len(notes) == 2 and "outside the repository" in notes[1]
    assert substitute({"k": ["${{ inputs.x }}"]}, {"x": "1"}) == {"k": ["1"]}


@pytest.mark.parametrize("matrix, rows", [
    ({"include": [{"script": "a"}, {"script": "b"}]}, [{"script": "a"}, {"script": "b"}]),
    ({"os": ["x"], "include": [{"os": "x", "gpu": 1}, {"os": "y"}, {"os": "z"}]},
     [{"os": "x", "gpu": 1}, {"os": "y"}, {"os": "z"}]),
])
def test_a_matrix_of_includes_alone_is_one_row_each(matrix: dict[str, object],
                                                     rows: list[dict[str, object]]) -> None:
    assert expand_matrix(matrix) == rows


def test_a_workflow_error_names_the_action() -> None:
    notes: list[str] = []
    found = job_steps([{"uses": "./a"}], {"a/action.yml": "runs: [1"}.__getitem__, notes, "w:job")
    assert found == [] and "a/action.yml: not valid YAML" in notes[0]
