"""Repository code cannot forge a verdict: a head that really rejects a CI suite never comes out as a pass,
whatever it writes into the harness's channels or patches in the harness (docs/security.md).

Each head below rejects the suite with a new assert and then tries to make the suite look accepted; the
check must end blocking (exit 1) or blind (exit 3), never as a pass.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from test_cli import commit, git, prtriage
from test_engine import CI_SCRIPT, PLAIN_ARGUMENTS, TRAIN, run_policy, write_tree

from app.analysis.core.model import Suite, SuiteResult
from app.analysis.core.policy import parse_policy
from app.analysis.verdict.report import CheckReport
from app.engine.check_steps import run_check
from app.engine.suite_validation import collect_results

SUITE = "tests/test_lora.py"
BASE = PLAIN_ARGUMENTS  # accepts the suite: --colocate --lora
NEW_ASSERT = '    assert not (args.colocate and args.lora), "LoRA cannot run colocated"\n'
ACCEPTED = '{"outcome": "accepted", "exception": None, "message": None, "path": None, "line": None}'

# Writes an accepted result for every suite of the job, in every form the harness's processes speak,
# into every pipe it can open: its own descriptors and those of every process it can see.
FORGE = '''"""A helper the validator imports."""
import json
import os
import stat


def _lines():
    with open("/job/job.json", encoding="utf-8") as handle:
        suites = [suite["id"] for suite in json.load(handle)["suites"]]
    lines = []
    for suite_id in suites:
        result = {"suite_id": suite_id, "outcome": ACCEPTED_OUTCOME, "events": [], "known_flags": [],
                  "tolerated_flags": [], "learned": [], "lines_hit": {}}
        lines += [json.dumps({"type": "suite", **result}), json.dumps({"kind": "suite", "result": result}),
                  json.dumps(result)]
    return ("\\n".join(lines) + "\\n").encode()


def _descriptors():
    for pid in ["self"] + [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            yield from (f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue


def forge():
    data = _lines()
    for path in _descriptors():
        try:
            if not stat.S_ISFIFO(os.stat(path).st_mode):
                continue
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, data)
            os.close(fd)
        except OSError:
            continue


forge()
'''.replace("ACCEPTED_OUTCOME", ACCEPTED)

# Replaces the harness's outcome mode wherever it finds it among the imported modules.
PATCH_HARNESS = '''
import sys as _sys


def _accept(*args, **kwargs):
    return ACCEPTED_OUTCOME


def _patch():
    loaded = list(_sys.modules.values())
    for module in loaded + [vars(m).get(name) for m in loaded for name in list(vars(m))]:
        try:
            if hasattr(module, "outcome_mode") and hasattr(module, "run_suite"):
                module.outcome_mode = _accept
        except Exception:
            continue


_patch()
'''.replace("ACCEPTED_OUTCOME", ACCEPTED)

# When its suite is rejected, writes an accepted result into its own result pipe and leaves at once.
FORGE_OWN_RESULT = '''

def _accept_and_leave(args):
    import json
    import os
    import stat
    with open("/job/job.json", encoding="utf-8") as handle:
        [suite] = json.load(handle)["suites"]
    result = json.dumps({"suite_id": suite["id"], "outcome": ACCEPTED_OUTCOME, "events": [],
                         "known_flags": [], "tolerated_flags": [], "learned": [], "lines_hit": {}})
    result = result.encode() + b"\\n"
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, result)
        except OSError:
            continue
    os._exit(0)


_checked = validate


def validate(args):
    try:
        _checked(args)
    except AssertionError:
        _accept_and_leave(args)
'''.replace("ACCEPTED_OUTCOME", ACCEPTED)


def check(tmp_path: Path, head_files: dict[str, str]) -> CheckReport:
    trees = []
    for name, files in (("base", {"arguments.py": BASE}), ("head", head_files)):
        ci = {"train.py": TRAIN, "tests/test_lora.py": CI_SCRIPT}
        trees.append(write_tree(tmp_path / name, {**ci, **files}))
        trees[-1].chmod(0o755)
    return run_check(*trees, run_policy(), base_sha=None, head_sha=None, cache_dir=tmp_path / "cache",
                     allow_unsandboxed=False)


def assert_never_a_pass(report: CheckReport) -> None:
    """What `prtriage check` would exit with: 1 (blocking) or 3 (could not analyse), never 0."""
    assert report.outcome("base", SUITE).outcome == "accepted"
    assert report.outcome("head", SUITE).outcome != "accepted"
    assert report.blocking or not report.could_analyse


def test_the_honest_head_is_a_new_rejection(tmp_path: Path) -> None:
    report = check(tmp_path, {"arguments.py": BASE + NEW_ASSERT})
    assert report.outcome("head", SUITE).exception == "AssertionError"
    assert [f.kind for f in report.blocking] == ["new_rejection"]


def test_a_module_the_validator_imports_cannot_forge_results_through_inherited_pipes(tmp_path: Path) -> None:
    head = "import forge\n" + BASE + NEW_ASSERT + "    forge.forge()\n"
    assert_never_a_pass(check(tmp_path, {"arguments.py": head, "forge.py": FORGE}))


def test_a_head_that_patches_the_harness_in_sys_modules_is_still_rejected(tmp_path: Path) -> None:
    report = check(tmp_path, {"arguments.py": BASE + NEW_ASSERT + PATCH_HARNESS})
    assert_never_a_pass(report)
    assert report.outcome("head", SUITE).exception == "AssertionError"


def test_a_head_that_writes_its_own_result_and_exits_is_not_believed(tmp_path: Path) -> None:
    report = check(tmp_path, {"arguments.py": BASE + NEW_ASSERT + FORGE_OWN_RESULT})
    assert_never_a_pass(report)
    assert "result" in (report.outcome("head", SUITE).message or "")


REACH = '''

def _reachable():
    """The pipes of the sandbox's other processes that this one can open."""
    import os
    import stat
    reached = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            path = f"/proc/{pid}/fd/{name}"
            try:
                if stat.S_ISFIFO(os.stat(path).st_mode):
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                    reached.append(f"{pid}/{name}")
            except OSError:
                continue
    return reached


_checked = validate


def validate(args):
    raise AssertionError(f"reached {_reachable()}")
'''


def test_no_process_of_the_harness_can_open_another_ones_pipes(tmp_path: Path) -> None:
    """Neither a pipe of another process nor the runner's channel held by the main process."""
    report = check(tmp_path, {"arguments.py": BASE + REACH})
    assert report.outcome("head", SUITE).message == "reached []"


# Reads MODE at import, so that its leader declines the suite with the other MODE (another leader imports
# for it), and writes an accepted result for that suite into the leader's pipe before it is declined.
FORGE_THE_DECLINED = '''"""A helper the validator imports."""
import json
import os

_other = {"a": "with-b", "b": "with-a"}[os.environ.get("MODE", "a")]
_result = {"suite_id": _other, "outcome": ACCEPTED_OUTCOME, "events": [], "known_flags": [],
           "tolerated_flags": [], "learned": [], "lines_hit": {}}
for _fd in range(3, 64):
    try:
        os.write(_fd, (json.dumps({"kind": "suite", "result": _result}) + "\\n").encode())
    except OSError:
        continue
'''.replace("ACCEPTED_OUTCOME", ACCEPTED)


def test_a_suite_forged_by_the_leader_that_declines_it_is_still_run_and_never_passes(tmp_path: Path) -> None:
    argv = ["--colocate", "--lora"]
    suites = [{"id": f"with-{mode}", "argv": argv, "env": {"MODE": mode}} for mode in "ab"]
    policy = parse_policy(yaml.safe_dump({
        "validation": {"paths": ["arguments.py"], "entry": "arguments:parse_args"},
        "matrix": {"sources": [{"kind": "static", "suites": suites}]},
        "harness": {"limits": {"suite_seconds": 20, "total_seconds": 120}}}), "two-environments.yml")
    trees = []
    for name, arguments in (("base", BASE), ("head", "import forge\n" + BASE + NEW_ASSERT)):
        trees.append(write_tree(tmp_path / name, {"arguments.py": arguments, "forge.py": FORGE_THE_DECLINED}))
        trees[-1].chmod(0o755)
    report = run_check(*trees, policy, base_sha=None, head_sha=None, cache_dir=tmp_path / "cache",
                       allow_unsandboxed=False)
    assert {report.outcome("base", s["id"]).outcome for s in suites} == {"accepted"}
    assert "accepted" not in {report.outcome("head", s["id"]).outcome for s in suites}


# Writes one accepted result for every suite into each pipe the leader holds, then ends the leader before
# any suite runs: no honest report will come to contradict the forged ones.
FORGE_AND_DIE = '''"""A helper the validator imports."""
import json
import os
import stat

with open("/job/job.json", encoding="utf-8") as handle:
    _suites = [suite["id"] for suite in json.load(handle)["suites"]]
for _fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
            for _id in _suites:
                _result = {"suite_id": _id, "outcome": ACCEPTED_OUTCOME, "events": [], "known_flags": [],
                           "tolerated_flags": [], "learned": [], "lines_hit": {}}
                os.write(_fd, (json.dumps({"kind": "suite", "result": _result}) + "\\n").encode())
    except OSError:
        continue
os._exit(0)
'''.replace("ACCEPTED_OUTCOME", ACCEPTED)


def test_a_leader_that_forges_every_result_and_dies_never_passes(tmp_path: Path) -> None:
    head = {"arguments.py": "import forge\n" + BASE + NEW_ASSERT, "forge.py": FORGE_AND_DIE}
    report = check(tmp_path, head)
    assert report.outcome("head", SUITE).outcome == "error"
    assert "repository code wrote it" in (report.outcome("head", SUITE).message or "")
    assert report.blocking or not report.could_analyse


def test_prtriage_check_exits_1_or_3_on_each_forging_head(tmp_path: Path) -> None:
    """The command line itself, on git revisions: never exit 0 for a head that rejects the suite."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, {"arguments.py": BASE, "train.py": TRAIN, "tests/test_lora.py": CI_SCRIPT}, "base")
    git(root, "tag", "base")
    heads = {"inherited-pipes": {"arguments.py": "import forge\n" + BASE + NEW_ASSERT, "forge.py": FORGE},
             "patched-harness": {"arguments.py": BASE + NEW_ASSERT + PATCH_HARNESS},
             "own-result-pipe": {"arguments.py": BASE + NEW_ASSERT + FORGE_OWN_RESULT}}
    policy = tmp_path / "policy.yml"
    policy.write_text(yaml.safe_dump(run_policy().model_dump(mode="json", by_alias=True, exclude_unset=True)))
    statuses = {}
    for name, files in heads.items():
        git(root, "checkout", "-q", "-b", name, "base")
        commit(root, files, name)
        result = prtriage("check", "--repo", str(root), "--base", "base", "--head", name, "--policy",
                          str(policy), "--format", "json", cwd=tmp_path)
        statuses[name] = result.returncode
    assert set(statuses.values()) <= {1, 3}, statuses


def suite_result(suite_id: str, outcome: str) -> dict[str, object]:
    verdict = {"outcome": outcome, "exception": None, "message": None, "path": None, "line": None}
    return {"type": "suite", "suite_id": suite_id, "events": [], "known_flags": [], "tolerated_flags": [],
            "learned": [], "lines_hit": {}, "outcome": verdict}


def test_a_suite_reported_twice_makes_every_result_of_the_run_an_error() -> None:
    suites = [Suite("a", "ci.sh", ("--x",)), Suite("b", "ci.sh", ("--y",))]
    messages = [suite_result("a", "accepted"), suite_result("b", "accepted"), suite_result("a", "rejected")]
    results = collect_results(suites, messages, "unused")
    assert {r.outcome.outcome for r in results.values()} == {"error"}
    assert "suite a was reported 2 times" in (results["b"].outcome.message or "")


def test_a_report_of_a_suite_nobody_asked_for_makes_the_run_an_error() -> None:
    messages = [suite_result("a", "accepted"), suite_result("z", "accepted")]
    results = collect_results([Suite("a", "ci.sh", ())], messages, "unused")
    assert results["a"].outcome.outcome == "error"
    assert "suite z" in (results["a"].outcome.message or "")


def test_reports_once_each_are_taken_as_they_are() -> None:
    results = collect_results([Suite("a", "ci.sh", ())], [suite_result("a", "accepted")], "unused")
    assert results == {"a": SuiteResult.from_json({k: v for k, v in suite_result("a", "accepted").items()
                                                   if k != "type"})}

