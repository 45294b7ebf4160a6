"""analysis.sources (recorded, matrix): launches -> suites, script reports -> Matrix, and the capture
cache's matching rules."""

from __future__ import annotations

import json
from typing import Any

from app.analysis.core.model import CaptureFailure, Matrix, Suite
from app.analysis.core.policy import Policy, parse_policy
from app.analysis.sources.matrix import build_matrix
from app.analysis.sources.record_launches_keys import RecordLaunches
from app.analysis.sources.recorded import runtime_env_vars, suites_from_launches
from app.analysis.sources.source_kind import ScriptReport

SCRIPT = "tests/e2e/test_qwen.py"
RUNTIME_ENV = json.dumps({"env_vars": {"PYTHONPATH": "/root/Megatron-LM", "MILES_EXPERIMENTAL_X": "1"}})


def record_source(**overrides: Any) -> RecordLaunches:
    return RecordLaunches.model_validate({"kind": "record_launches", "scripts": ["tests/**/test_*.py"],
                                          "entry": r"(^|/)train(_async)?\.py$", **overrides})


def launch(*argv: str, env: dict[str, str] | None = None, cwd: str = "/repo") -> dict[str, Any]:
    return {"argv": list(argv), "env": env or {}, "cwd": cwd}


def test_ray_job_submit_gives_the_argv_after_the_entry_and_the_runtime_env() -> None:
    launches = [launch("ray", "stop", "--force"),
                launch("ray", "job", "submit", "--address=http://127.0.0.1:8265",
                       f"--runtime-env-json={RUNTIME_ENV}", "--", "python3", "/repo/train.py", "--lr", "1e-4",
                       env={"HOME": "/tmp"})]
    assert suites_from_launches(SCRIPT, launches, record_source(), "/repo") == [
        Suite(id=SCRIPT, script=SCRIPT, argv=("--lr", "1e-4"), entry="train.py",
              env={"PYTHONPATH": "/root/Megatron-LM", "MILES_EXPERIMENTAL_X": "1"})]


def test_runtime_env_as_a_separate_word_and_only_before_the_entry() -> None:
    launches = [launch("ray", "job", "submit", "--runtime-env-json", RUNTIME_ENV, "--", "python3", "train.py",
                       "--runtime-env-json", '{"env_vars": {"AFTER": "entry"}}')]
    [found] = suites_from_launches(SCRIPT, launches, record_source(), "/repo")
    assert found.env == {"PYTHONPATH": "/root/Megatron-LM", "MILES_EXPERIMENTAL_X": "1"}
    assert found.argv == ("--runtime-env-json", '{"env_vars": {"AFTER": "entry"}}')


def test_runtime_env_that_is_not_json_gives_no_env() -> None:
    assert runtime_env_vars(["--runtime-env-json={not json", "--"]) == {}
    assert runtime_env_vars(["--runtime-env-json", '{"env_vars": {"N": 3}}']) == {"N": "3"}


def test_exported_env_is_kept_by_env_keep() -> None:
    exported = {"NCCL_DEBUG": "INFO", "HOME": "/tmp", "MILES_X": "1"}
    launches = [launch("torchrun", "--nproc-per-node", "8", "train.py", "--bf16", env=exported)]
    keep = record_source(env_from=["exported"], env_keep=["NCCL_DEBUG", "MILES_X"])
    kept = suites_from_launches(SCRIPT, launches, keep, "/repo")[0].env
    assert kept == {"NCCL_DEBUG": "INFO", "MILES_X": "1"}
    everything = record_source(env_from=["exported"])
    assert suites_from_launches(SCRIPT, launches, everything, "/repo")[0].env == exported
    assert suites_from_launches(SCRIPT, launches, record_source(), "/repo")[0].env == {}


def test_variants_of_one_script_get_numbered_ids_in_launch_order() -> None:
    launches = [launch("python3", "train.py", "--mode", mode) for mode in ("lora", "full", "dpo")]
    launches.insert(1, launch("python3", "tools/convert.py", "--out", "/root/x"))
    suites = suites_from_launches(SCRIPT, launches, record_source(), "/repo")
    assert [(s.id, s.argv) for s in suites] == [
        (SCRIPT, ("--mode", "lora")), (f"{SCRIPT}#2", ("--mode", "full")), (f"{SCRIPT}#3", ("--mode", "dpo"))]


def test_entry_paths_become_repo_relative_only_inside_the_repository() -> None:
    launches = [launch("python3", "/repo/train_async.py"), launch("python3", "train.py", cwd="/repo/sub"),
                launch("python3", "train.py", cwd="/root/miles"), launch("python3", "/elsewhere/train.py")]
    entries = [s.entry for s in suites_from_launches(SCRIPT, launches, record_source(), "/repo")]
    assert entries == ["train_async.py", "sub/train.py", "train.py", "/elsewhere/train.py"]


def test_the_first_matching_word_is_the_entry() -> None:
    launches = [launch("python3", "scripts/train.py", "--then", "train.py")]
    [found] = suites_from_launches(SCRIPT, launches, record_source(), "/repo")
    assert (found.entry, found.argv) == ("scripts/train.py", ("--then", "train.py"))


def policy_with(*sources: dict[str, Any]) -> Policy:
    return parse_policy(json.dumps({"validation": {"paths": ["train.py"], "entry": "arguments:parse_args"},
                                    "matrix": {"sources": list(sources)}}), "test")


RECORD = {"kind": "record_launches", "scripts": ["tests/**/test_*.py"], "entry": r"(^|/)train\.py$"}


def test_build_matrix_sorts_scripts_by_kind() -> None:
    reports = [
        ScriptReport("tests/b.py", "captured", (launch("python3", "train.py", "--b"),), ended=True),
        ScriptReport("tests/a.py", "captured", (launch("python3", "train.py", "--a1"),
                                                launch("python3", "train.py", "--a2")), ended=True),
        ScriptReport("tests/off.py", "disabled", reason="flaky"),
        ScriptReport("tests/none.py", "failed", reason="KeyError: 'x'"),
        ScriptReport("tests/ray_only.py", "captured", (launch("ray", "stop"),), ended=True),
        ScriptReport("tests/pytest.py", "captured", (launch("python3", "-m", "pytest", "-x"),), ended=True),
        ScriptReport("tests/quiet.py", "failed", reason="no launch recorded", ended=True),
        ScriptReport("tests/died.py", "captured", (launch("ray", "stop"),),
                     reason="after 1 launch(es): OSError"),
        ScriptReport("tests/part.py", "captured", (launch("python3", "train.py", "--p"),),
                     reason="after 1 launch(es): KeyError: 'x'"),
    ]
    matrix = build_matrix(policy_with(RECORD), {0: reports}, "/repo")
    assert [s.id for s in matrix.suites] == ["tests/a.py", "tests/a.py#2", "tests/b.py", "tests/part.py"]
    assert (matrix.scripts, matrix.captured, matrix.disabled) == (8, 3, ("tests/off.py",))
    assert matrix.failed == (
        CaptureFailure("tests/died.py", "after 1 launch(es): OSError"),
        CaptureFailure("tests/none.py", "KeyError: 'x'"),
    )
    entry = r"(^|/)train\.py$"
    assert matrix.no_entry == (
        CaptureFailure("tests/pytest.py",
                       f"ran to its end; launched python3 -m pytest, not the entry ({entry})"),
        CaptureFailure("tests/quiet.py", "ran to its end and launched nothing"),
        CaptureFailure("tests/ray_only.py", f"ran to its end; launched ray stop, not the entry ({entry})"),
    )
    partial = "partial capture: after 1 launch(es): KeyError: 'x'"
    assert matrix.partial == (CaptureFailure("tests/part.py", partial),)
    assert Matrix.from_json(matrix.to_json()) == matrix


def test_static_suites_join_recorded_ones_with_unique_ids() -> None:
    static = {"kind": "static", "suites": [{"id": "tests/a.py", "argv": ["--static"], "env": {"X": "1"}},
                                           {"id": "smoke", "argv": []}]}
    reports = [ScriptReport("tests/a.py", "captured", (launch("python3", "train.py", "--a"),))]
    matrix = build_matrix(policy_with(RECORD, static), {0: reports}, "/repo")
    assert [(s.id, s.argv, s.env) for s in matrix.suites] == [
        ("tests/a.py", ("--a",), {}), ("tests/a.py#2", ("--static",), {"X": "1"}), ("smoke", (), {})]
    assert matrix.suites[1].script == "policy:matrix.sources[1]"
    assert (matrix.scripts, matrix.captured) == (1, 1)


def test_script_reports_come_from_harness_messages() -> None:
    message = {"type": "script", "script": "tests/a.py", "status": "failed", "launches": [], "reason": "boom",
               "registration": None, "repo": "/repo", "ended": False}
    assert ScriptReport.from_message(message) == ScriptReport("tests/a.py", "failed", (), "boom")
