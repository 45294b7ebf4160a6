"""One refine round on the policy a check uses (starter/policy_refine.py), and the check run again with it
(engine/refined_check.py): which keys, which YAML, and what stands when the refined run cannot run.
The sandboxed whole is tests/test_twin_refined_check.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from app.analysis.core.model import Matrix, Outcome, Suite, SuiteResult
from app.analysis.core.policy import Policy, load_policy, parse_policy
from app.analysis.starter.policy_refine import refine_policy
from app.analysis.verdict.health import Health, assess
from app.analysis.verdict.refinement import Refinement
from app.analysis.verdict.render import render
from app.analysis.verdict.report import CheckReport
from app.engine.check_errors import AnalysisError, Unloadable
from app.engine.refined_check import with_refinement

POLICY = parse_policy(yaml.safe_dump({
    "validation": {"paths": ["kite/arguments.py"], "entry": "kite.arguments:parse_args",
                   "attribute_defaults": {"fp16": False}},
    "matrix": {"sources": [{"kind": "record_launches", "scripts": ["tests/test_*.py"],
                            "entry": r"(^|/)train\.py$"}]},
    "harness": {"existing_path_prefixes": ["/data/"],
                "fixtures": [{"path": "/data/*/config.json", "content": {"layers": 2}}]}}), "policy.yml")
SUITE = Suite("tests/test_a.py", "tests/test_a.py", ("--load", "/root/ckpt", "--data", "/data/set"))
MISSING = Outcome("error", "AttributeError", "'Namespace' object has no attribute 'engine_dp_size'",
                  "kite/arguments.py", 9)


def blind(outcome: Outcome = MISSING) -> tuple[Matrix, Health]:
    matrix = Matrix((SUITE,), scripts=1, captured=1)
    return matrix, assess(matrix, {SUITE.id: SuiteResult(SUITE.id, outcome)}, {}, {})


def test_a_round_on_the_policy_adds_keys_and_says_them_as_yaml(tmp_path: Path) -> None:
    matrix, health = blind()
    found = refine_policy(POLICY, matrix.suites, health, tmp_path)
    assert found is not None
    refined, refinement = found
    assert refinement.keys == ("validation.attribute_defaults.engine_dp_size",
                               "harness.existing_path_prefixes")
    # the YAML holds what changed alone: not fp16, not the fixtures; a list whole, as it replaces
    assert yaml.safe_load(refinement.yaml) == {"validation": {"attribute_defaults": {"engine_dp_size": 1}},
                                               "harness": {"existing_path_prefixes": ["/data/", "/root/"]}}
    assert refined.validation.attribute_defaults == {"fp16": False, "engine_dp_size": 1}
    assert refined.harness.fixtures == POLICY.harness.fixtures
    assert POLICY.harness.existing_path_prefixes == ["/data/"]  # the policy given is left as it was
    assert refinement.before == health.reason and refinement.applied
    assert dict(refinement.why)["validation.attribute_defaults"].startswith("options the validator reads")


def test_a_round_that_adds_nothing_is_no_refinement(tmp_path: Path) -> None:
    policy = POLICY.model_copy(update={"harness": POLICY.harness.model_copy(
        update={"existing_path_prefixes": ["/data/", "/root/"]})})
    rejected = Outcome("rejected", "AssertionError", "lr must be positive", "kite/arguments.py", 4)
    matrix, health = blind(rejected)
    assert refine_policy(policy, matrix.suites, health, tmp_path) is None


@pytest.mark.parametrize("path", sorted((Path(__file__).parent.parent / "policies").rglob("*.yml")), ids=str)
def test_every_built_in_policy_survives_the_round_trip_through_a_starter(path: Path, tmp_path: Path) -> None:
    policy = load_policy(path)
    _, health = blind(Outcome("rejected", "AssertionError", "no cue here", "x.py", 1))
    found = refine_policy(policy, (), health, tmp_path)
    assert found is None  # nothing asked: the same policy, nothing to say
    assert Policy.model_validate(policy.model_dump(mode="json", by_alias=True)) == policy


def report_of(health: Health | None, matrix: Matrix) -> CheckReport:
    return CheckReport(None, None, validation_changed=True, matrix=matrix, health=health)


def test_a_base_that_loads_nowhere_is_refined_and_checked_again(tmp_path: Path) -> None:
    matrix, health = blind()
    healthy = report_of(None, matrix)
    seen: list[Policy] = []

    def check(policy: Policy) -> CheckReport:
        seen.append(policy)
        if len(seen) == 1:
            raise Unloadable("the validation code could not run at either revision", matrix, health)
        return healthy

    report = with_refinement(check, POLICY, tmp_path)
    assert report.refinement is not None and report.refinement.applied
    assert report.timing.total_s > healthy.timing.total_s == 0  # both runs counted
    assert seen[0] is POLICY and seen[1].validation.attribute_defaults["engine_dp_size"] == 1


def test_a_base_that_loads_nowhere_and_no_round_helps_is_the_error_it_was(tmp_path: Path) -> None:
    matrix, health = blind(Outcome("error", "ImportError", "cannot import name 'x'", "kite/arguments.py", 1))
    policy = POLICY.model_copy(update={"harness": POLICY.harness.model_copy(
        update={"existing_path_prefixes": ["/data/", "/root/"]})})

    def check(policy: Policy) -> CheckReport:
        raise Unloadable("the validation code could not run at either revision: ImportError", matrix, health)

    with pytest.raises(AnalysisError, match="could not run at either revision: ImportError") as raised:
        with_refinement(check, policy, tmp_path)
    assert type(raised.value) is AnalysisError  # what a caller re-raises by its type takes a message alone


def test_a_refined_run_that_cannot_run_leaves_the_first_answer_saying_it_was_tried(tmp_path: Path) -> None:
    matrix, health = blind()
    first = report_of(health, matrix)

    def check(policy: Policy) -> CheckReport:
        if policy is POLICY:
            return first
        raise AnalysisError("requirement torch==9.9 could not be installed")

    report = with_refinement(check, POLICY, tmp_path)
    assert report.health is health and report.refinement is not None
    assert report.refinement.why_not == "it could not run: requirement torch==9.9 could not be installed"
    assert not report.refinement.applied
    assert report.refinement.summary().startswith("a refinement was tried, not taken (it could not run: ")


def test_a_refined_run_still_blind_leaves_the_first_answer_and_its_errors(tmp_path: Path) -> None:
    matrix, health = blind()
    first = report_of(health, matrix)
    moved = Outcome("error", "JSONDecodeError", "Expecting value: line 1 column 1 (char 0)", "kite/a.py", 9)
    still = report_of(blind(moved)[1], matrix)
    report = with_refinement(lambda policy: first if policy is POLICY else still, POLICY, tmp_path)
    assert report.health is health and report.refinement is not None and not report.refinement.applied
    assert report.refinement.why_not == f"it could not analyse either: {still.health.reason}"  # type: ignore[union-attr]


def test_the_change_renders_as_yaml_in_a_fence_no_backtick_of_it_closes(tmp_path: Path) -> None:
    matrix, health = blind()
    refinement = Refinement(keys=("validation.attribute_defaults.x",),
                            changes=("validation.attribute_defaults.x = 1",), why=(),
                            yaml="validation:\n  attribute_defaults:\n    x: '```` @team'\n",
                            before="the base revision rejects 1 of 1 CI suites")
    report = replace(report_of(health, matrix), refinement=refinement)
    markdown = render(report, "markdown")
    assert "#### Refined for this run" in markdown
    assert "`````yaml\nvalidation:\n  attribute_defaults:\n    x: '```` @team'\n`````" in markdown
    assert "refined for this run: validation.attribute_defaults.x = 1" in render(report, "text")
    assert render(report, "json").count('"refinement": {') == 1
