"""The engine's own steps on real trees: comparing them, choosing lines to trace, reading harness results."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.analysis.core.model import Matrix, Outcome, Suite, SuiteResult
from app.analysis.core.policy import Policy, parse_policy
from app.analysis.verdict.diff import diff_trees
from app.analysis.verdict.report import CheckReport
from app.engine.check_steps import AnalysisError, compare_trees, require_loadable, run_check
from app.engine.suite_validation import collect_results, statement_starts, trace_lines

POLICY = parse_policy(yaml.safe_dump({
    "validation": {"paths": ["pkg/arguments.py", "train.py"], "entry": "pkg.arguments:parse_args"},
    "matrix": {"sources": [{"kind": "static", "suites": [{"id": "s", "argv": []}]}]}}), "test-policy.yml")

BASE_ARGS = '''"""Arguments."""
LIMIT = 4


def validate(args):
    assert args.lr > 0
    return args
'''
HEAD_ARGS = '''"""Arguments."""
LIMIT = 5


def validate(args):
    # the weights backuper cannot work with colocate
    assert not (args.colocate and args.backuper), (
        "colocate needs --disable-weights-backuper"
    )

    assert args.lr > 0
    return args
'''


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def test_compare_trees_reads_only_differing_files(tmp_path: Path) -> None:
    same = "x = 1\n"
    base = write_tree(tmp_path / "base", {"pkg/arguments.py": BASE_ARGS, "same.py": same, "gone.py": "a\n",
                                          "img.bin": b"\x00\x01", ".git/HEAD": "ref: x\n"})
    head = write_tree(tmp_path / "head", {"pkg/arguments.py": HEAD_ARGS, "same.py": same, "new.py": "b\n",
                                          "img.bin": b"\x00\x02", ".git/HEAD": "ref: y\n"})
    (head / "unreadable-but-same.py").write_text("z\n")
    (base / "unreadable-but-same.py").write_text("z\n")
    diff, head_sources = compare_trees(base, head)
    assert diff.changed_paths == ["gone.py", "img.bin", "new.py", "pkg/arguments.py"]
    assert diff.files["gone.py"].status == "removed" and diff.files["new.py"].status == "added"
    assert diff.changed_lines("img.bin") == frozenset()
    assert diff.changed_lines("pkg/arguments.py") == {2, 6, 7, 8, 9, 10}
    assert set(head_sources) == {"new.py", "pkg/arguments.py"}


def test_compare_trees_compares_links_without_following_them(tmp_path: Path) -> None:
    base = write_tree(tmp_path / "base", {"a.py": "a\n", "b.py": "b\n"})
    head = write_tree(tmp_path / "head", {"a.py": "a\n", "b.py": "b\n"})
    (base / "link.py").symlink_to("a.py")
    (head / "link.py").symlink_to("b.py")
    (base / "outside").symlink_to("/etc")
    (head / "outside").symlink_to("/etc")
    diff, _ = compare_trees(base, head)
    assert diff.changed_paths == ["link.py"]


def test_trace_covers_changed_statements_inside_functions(tmp_path: Path) -> None:
    diff = diff_trees({"pkg/arguments.py": BASE_ARGS, "README.md": "a\n"},
                      {"pkg/arguments.py": HEAD_ARGS, "README.md": "b\n"})
    trace = trace_lines(diff, POLICY, {"pkg/arguments.py": HEAD_ARGS, "README.md": "b\n"})
    # the module constant (line 2), the comment (6) and the blank line (10) cannot be hit by a suite;
    # the assert's continuation lines count as its first line
    assert trace == {"pkg/arguments.py": [7]}


def test_trace_keeps_every_changed_line_of_source_that_does_not_parse() -> None:
    broken = "def validate(args):\n    assert (\n"
    diff = diff_trees({"train.py": "x = 1\n"}, {"train.py": broken})
    assert trace_lines(diff, POLICY, {"train.py": broken}) == {"train.py": [1, 2]}


def test_statement_starts_skips_docstrings_and_module_code() -> None:
    source = 'X = 1\n\ndef f(a):\n    """Doc."""\n    if a:\n        return (a +\n                1)\n'
    assert statement_starts(source, "x.py") == {5: 5, 6: 6, 7: 6}


SUITES = [Suite(id=f"s{i}", script="tests/test_x.py", argv=()) for i in range(3)]


def test_unreported_suites_are_errors_with_the_reason() -> None:
    messages = [{"type": "progress", "done": 1, "total": 3, "what": "s0"},
                {"type": "suite", **SuiteResult("s0", Outcome("accepted")).to_json()},
                {"type": "suite", "suite_id": "s1"}]  # malformed: no outcome
    results = collect_results(SUITES, messages, "killed by signal 9 (SIGKILL)")
    assert list(results) == ["s0", "s1", "s2"]
    assert results["s0"].outcome == Outcome("accepted")
    for missing in ("s1", "s2"):
        assert results[missing].outcome == Outcome("error", message="killed by signal 9 (SIGKILL)")


def test_every_suite_erroring_at_base_means_nothing_can_be_judged() -> None:
    matrix = Matrix(suites=tuple(SUITES), scripts=1, captured=1)
    broken = {s.id: SuiteResult(s.id, Outcome("error", message="ModuleNotFoundError: pkg")) for s in SUITES}
    with pytest.raises(AnalysisError, match="at either revision: ModuleNotFoundError: pkg"):
        require_loadable(matrix, broken, broken)
    one_ran = {**broken, "s1": SuiteResult("s1", Outcome("accepted"))}
    with pytest.raises(AnalysisError, match="at the base revision"):
        require_loadable(matrix, broken, one_ran)
    require_loadable(matrix, one_ran, broken)  # the head's errors are findings, not a failure to analyse


# --- run_check on real trees, in the real sandbox ------------------------------------------------------

TRAIN = "from arguments import parse_args\n\nif __name__ == '__main__':\n    parse_args()\n"
CI_SCRIPT = "import subprocess\n\nsubprocess.run(['python3', 'train.py', '--colocate', '--lora'])\n"
# --data under the sandbox's own /tmp: noise no policy key lifts (a CI host's /data/ is, by a refine round)
NOISY_ARGUMENTS = '''import argparse


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--colocate", action="store_true")
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--data", default="/tmp/set.jsonl")
    args = parser.parse_args()
    validate(args)
    return args


def validate(args):
    with open(args.data) as handle:  # absent in the sandbox: both revisions fail here first
        args.rows = len(handle.readlines())
    assert args.lora or not args.colocate, "colocate needs lora"
'''
PLAIN_ARGUMENTS = NOISY_ARGUMENTS.replace(
    "    with open(args.data) as handle:  # absent in the sandbox: both revisions fail here first\n"
    "        args.rows = len(handle.readlines())\n", "")


def run_policy(suite_seconds: float = 20) -> Policy:
    return parse_policy(yaml.safe_dump({
        "validation": {"paths": ["arguments.py"], "entry": "arguments:parse_args",
                       "functions": ["arguments:validate"]},
        "matrix": {"sources": [{"kind": "record_launches", "scripts": ["tests/test_*.py"],
                                "entry": r"(^|/)train\.py$"}]},
        "harness": {"limits": {"suite_seconds": suite_seconds, "total_seconds": 120}}}), "run-policy.yml")


def two_trees(tmp_path: Path, base_arguments: str, head_arguments: str) -> tuple[Path, Path]:
    trees = []
    for name, arguments in (("base", base_arguments), ("head", head_arguments)):
        tree = write_tree(tmp_path / name, {"arguments.py": arguments, "train.py": TRAIN,
                                            "tests/test_lora.py": CI_SCRIPT})
        tree.chmod(0o755)
        trees.append(tree)
    return trees[0], trees[1]


def check(base: Path, head: Path, tmp_path: Path, policy: Policy | None = None) -> CheckReport:
    return run_check(base, head, policy or run_policy(), base_sha=None, head_sha=None,
                     cache_dir=tmp_path / "cache", allow_unsandboxed=False)


def test_record_mode_finds_a_new_assert_behind_harness_noise(tmp_path: Path) -> None:
    head_arguments = NOISY_ARGUMENTS + \
        '    assert not (args.colocate and args.lora), "LoRA cannot run colocated"\n'
    report = check(*two_trees(tmp_path, NOISY_ARGUMENTS, head_arguments), tmp_path)
    assert report.sandboxed and report.validation_changed
    assert report.outcome("base", "tests/test_lora.py").exception == "FileNotFoundError"
    assert report.outcome("head", "tests/test_lora.py").exception == "FileNotFoundError"
    [finding] = report.findings
    assert (finding.kind, finding.severity, finding.path, finding.line, finding.in_diff) == (
        "new_rejection", "blocking", "arguments.py", 18, True)
    assert finding.message.startswith("AssertionError: LoRA cannot run colocated (found in record mode")
    assert report.timing.base_s > 0 and report.timing.head_s > 0 and report.timing.total_s > 0


def test_a_changed_branch_no_suite_takes_is_not_exercised(tmp_path: Path) -> None:
    head_arguments = PLAIN_ARGUMENTS + '    if args.lora and not args.colocate:\n        # rare\n' \
        '        assert args.data, (\n            "lora needs data"\n        )\n'
    report = check(*two_trees(tmp_path, PLAIN_ARGUMENTS, head_arguments), tmp_path)
    assert [(f.kind, f.line, f.message) for f in report.findings] == [
        ("not_exercised", 18, "line 18 of arguments.py changed; no CI suite reaches it")]


def test_a_head_that_hangs_is_a_new_error(tmp_path: Path) -> None:
    hanging = PLAIN_ARGUMENTS + "    while True:\n        pass\n"
    report = check(*two_trees(tmp_path, PLAIN_ARGUMENTS, hanging), tmp_path, run_policy(suite_seconds=1))
    assert report.outcome("base", "tests/test_lora.py").outcome == "accepted"
    assert report.outcome("head", "tests/test_lora.py").outcome == "error"
    assert [(f.kind, f.severity) for f in report.findings] == [("new_error", "blocking")]


def test_code_that_loads_at_neither_revision_cannot_be_analysed(tmp_path: Path) -> None:
    broken = "import argparse\n\ndef parse_args(:\n    pass\n"
    with pytest.raises(AnalysisError, match="could not run at either revision"):
        check(*two_trees(tmp_path, broken, broken + "# changed\n"), tmp_path)


def test_the_fast_path_runs_nothing(tmp_path: Path) -> None:
    base, head = two_trees(tmp_path, NOISY_ARGUMENTS, NOISY_ARGUMENTS)
    (head / "README.md").write_text("docs\n")
    report = run_check(base, head, run_policy(), base_sha="a" * 40, head_sha="b" * 40,
                       cache_dir=tmp_path / "cache", allow_unsandboxed=False)
    assert not report.validation_changed
    assert report.changed_paths == ("README.md",)
    assert report.matrix.suites == () and report.findings == ()
    assert not (tmp_path / "cache").exists()


def test_the_base_validated_once_serves_the_next_check_of_the_same_job(tmp_path: Path) -> None:
    base, head = two_trees(tmp_path, PLAIN_ARGUMENTS, PLAIN_ARGUMENTS + "    # first push\n")
    first = check(base, head, tmp_path)
    assert not first.base_cached and first.timing.base_s > 0
    assert list((tmp_path / "cache" / "validation").glob("*.json"))
    second_head = write_tree(tmp_path / "head2", {"arguments.py": PLAIN_ARGUMENTS + "    # second push\n",
                                                  "train.py": TRAIN, "tests/test_lora.py": CI_SCRIPT})
    second_head.chmod(0o755)
    second = check(base, second_head, tmp_path)
    assert second.base_cached
    assert dict(second.base) == dict(first.base)
    assert second.outcome("base", "tests/test_lora.py").outcome == "accepted"


def test_another_job_on_the_same_base_validates_it_again(tmp_path: Path) -> None:
    """A pull request whose CI scripts differ (its own suites) or a changed policy never reads another's
    base results: they are a different job."""
    base, head = two_trees(tmp_path, PLAIN_ARGUMENTS, PLAIN_ARGUMENTS + "    # changed\n")
    assert not check(base, head, tmp_path).base_cached
    (head / "tests" / "test_lora.py").write_text(CI_SCRIPT.replace("'--lora'", "'--lora', '--colocate'"))
    own_suites = check(base, head, tmp_path)
    assert not own_suites.base_cached
    assert own_suites.matrix.suites[0].argv == ("--colocate", "--lora", "--colocate")
    assert not check(base, head, tmp_path, run_policy(suite_seconds=19)).base_cached
    assert check(base, head, tmp_path).base_cached  # the same job as the second check


def test_a_base_with_an_error_is_not_kept(tmp_path: Path) -> None:
    hanging = PLAIN_ARGUMENTS + "    while True:\n        pass\n"
    base, head = two_trees(tmp_path, hanging, PLAIN_ARGUMENTS)
    for _ in range(2):  # the time limit is not carried into the next check: it runs (and fails) again
        with pytest.raises(AnalysisError, match=r"could not run at the base revision.*timed out"):
            check(base, head, tmp_path, run_policy(suite_seconds=1))
        assert not list((tmp_path / "cache" / "validation").glob("*.json"))
