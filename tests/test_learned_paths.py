"""Validation paths learned, not listed: the modules the base's validation imports are validation code too.

A twin of the slime case: the validation calls a helper module that `validation.paths` does not name; a
regression there used to come out "untouched", with nothing run.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from twin.imported_helper import ARGUMENTS, HELPER, NEW_ASSERT, UNIMPORTED, build_tree, policy_text

from app.analysis.core.model import MAX_IMPORTED, MAX_LEARNED, Outcome, SuiteResult, checked_imports
from app.analysis.core.policy import Policy, parse_policy
from app.analysis.verdict.render import render
from app.analysis.verdict.report import CheckReport
from app.engine import validation_cache
from app.engine.check_steps import analysed_because, run_check

CI_LAUNCH = "import subprocess\n\nsubprocess.run(['python3', 'train.py', '--backend', '{backend}'])\n"


def policy(paths: list[str]) -> Policy:
    return parse_policy(policy_text(paths), "learned-policy.yml")


def tree(root: Path, changes: dict[str, str] | None = None) -> Path:
    return build_tree(root, changes)


def check(base: Path, head: Path, cache: Path, paths: list[str]) -> CheckReport:
    return run_check(base, head, policy(paths), base_sha=None, head_sha=None, cache_dir=cache,
                     allow_unsandboxed=False)


@pytest.mark.parametrize("paths", [["arguments.py"], []], ids=["listed-elsewhere", "no-paths"])
def test_an_assert_added_in_an_imported_helper_is_a_new_rejection(tmp_path: Path, paths: list[str]) -> None:
    base = tree(tmp_path / "base")
    head = tree(tmp_path / "head", {"helpers/checks.py": NEW_ASSERT})
    assert not policy(paths).touches_validation(["helpers/checks.py"])  # the listed paths alone: untouched
    report = check(base, head, tmp_path / "cache", paths)
    assert report.validation_changed and report.sandboxed
    # learned first, by validating the base alone: then the head, since the change touches what it imports
    assert report.analysed_because == "touches helpers/checks.py, imported by validation at the base"
    [finding] = report.blocking
    assert (finding.kind, finding.path, finding.line, finding.in_diff) == (
        "new_rejection", "helpers/checks.py", 3, True)
    assert report.outcome("base", "tests/test_lora.py").outcome == "accepted"
    assert report.learned_paths is not None
    assert {"arguments.py", "helpers/__init__.py", "helpers/checks.py"} <= report.learned_paths
    assert "tools/report.py" not in report.learned_paths

    again = check(base, head, tmp_path / "cache", paths)  # the next push: the learned set is known
    assert again.base_cached and [f.kind for f in again.blocking] == ["new_rejection"]
    assert again.analysed_because == "touches helpers/checks.py, imported by validation at the base"
    document = json.loads(render(again, "json"))
    assert document["analysed_because"] == again.analysed_because
    assert "helpers/checks.py" in document["validation_imports"]
    assert "analysed: the change touches helpers/checks.py, imported by validation at the base" in \
        render(again, "text")


def test_a_listed_change_validates_both_revisions_at_once_and_still_learns(tmp_path: Path) -> None:
    # arguments.py is listed: analysed whatever the base imports, so the base does not go first. The head
    # also changes the imported helper (a new assert) and starts importing tools/report.py, which the base's
    # validation never imported: learned from the base, only the helper's lines count as traced
    validate = "def validate(args):\n    checks.check_parallelism(args)\n"
    head_arguments = ARGUMENTS.replace(validate, "def validate(args):\n    from tools import report\n"
                                                 "    report.main()\n    checks.check_parallelism(args)\n")
    assert head_arguments != ARGUMENTS
    base = tree(tmp_path / "base")
    head = tree(tmp_path / "head", {"arguments.py": head_arguments, HELPER: NEW_ASSERT,
                                    UNIMPORTED: "def main():\n    return 1\n"})
    threads: dict[str, set[str]] = {}

    def progress(step: str, done: int, total: int, what: str) -> None:
        threads.setdefault(step, set()).add(threading.current_thread().name)

    report = run_check(base, head, policy(["arguments.py"]), base_sha=None, head_sha=None,
                       cache_dir=tmp_path / "cache", allow_unsandboxed=False, progress=progress)
    assert report.analysed_because == "touches arguments.py, a validation path"
    # each revision on a thread of its own, at once (learning first runs the base on the caller's thread)
    assert threads["base"].isdisjoint(threads["head"])
    assert all(name.startswith("prtriage-validate") for name in threads["base"] | threads["head"])
    [finding] = report.blocking
    assert (finding.kind, finding.path, finding.line) == ("new_rejection", HELPER, 3)
    assert report.learned_paths is not None and HELPER in report.learned_paths
    assert UNIMPORTED not in report.learned_paths
    hit = {path for result in report.head.values() for path in result.lines_hit}
    assert HELPER in hit and UNIMPORTED not in hit  # the head ran it, but it is no validation code here
    # what the base imported was kept: the next check at this base starts from it
    again = check(base, tree(tmp_path / "other", {UNIMPORTED: "def main():\n    return 2\n"}),
                  tmp_path / "cache", ["arguments.py"])
    assert not again.validation_changed and again.timing.base_s == 0


def test_a_module_validation_does_not_import_is_untouched_once_learned(tmp_path: Path) -> None:
    base = tree(tmp_path / "base")
    head = tree(tmp_path / "head", {"tools/report.py": "def main():\n    return 1\n"})
    first = check(base, head, tmp_path / "cache", ["arguments.py"])
    assert not first.validation_changed  # learned by validating the base, which the head does not touch
    assert first.timing.base_s > 0 and first.matrix.suites == ()
    learned = first.learned_paths
    assert learned is not None and "helpers/checks.py" in learned
    # the next change at the same base is decided from the learned set: nothing runs, not even the sandbox
    other = tree(tmp_path / "other", {"tools/report.py": "def main():\n    return 2\n"})
    second = run_check(base, other, policy(["arguments.py"]), base_sha=None, head_sha=None,
                       cache_dir=tmp_path / "cache", allow_unsandboxed=False)
    assert not second.validation_changed and second.timing.base_s == 0
    assert second.learned_paths == learned


def test_a_change_to_no_python_module_never_learns(tmp_path: Path) -> None:
    base = tree(tmp_path / "base")
    head = tree(tmp_path / "head", {"README.md": "docs\n"})
    report = check(base, head, tmp_path / "cache", [])
    assert not report.validation_changed and report.timing.base_s == 0
    assert not (tmp_path / "cache").exists()


def test_the_host_refuses_an_import_list_that_leaves_the_repository() -> None:
    good = SuiteResult("s", Outcome("accepted"), imported=("a/b.py", "a.py"))
    assert SuiteResult.from_json(good.to_json()).imported == ("a.py", "a/b.py")
    for bad in (["../outside.py"], ["/etc/x.py"], ["data.yaml"], [3], "a.py", ["a.py"] * 2001):
        with pytest.raises(ValueError, match="imported"):
            checked_imports(bad)


def test_a_stored_learned_set_is_read_back_only_under_its_own_key(tmp_path: Path) -> None:
    paths = frozenset({"pkg/a.py", "pkg/b.py"})
    assert validation_cache.store_learned(tmp_path, "k" * 64, paths, sandboxed=True)
    assert validation_cache.lookup_learned(tmp_path, "k" * 64) == paths
    assert validation_cache.lookup_learned(tmp_path, "k" * 32 + "j" * 32) is None
    assert not validation_cache.store_learned(tmp_path, "u" * 64, paths, sandboxed=False)
    assert validation_cache.lookup_learned(tmp_path, "u" * 64) is None


def test_nothing_is_learned_from_errors_alone_nor_cut_short() -> None:
    def result(suite: str, outcome: str, imported: tuple[str, ...]) -> SuiteResult:
        return SuiteResult(suite, Outcome(outcome), imported=imported)  # type: ignore[arg-type]

    answered = {"a": result("a", "accepted", ("x.py",)), "b": result("b", "rejected", ("y.py", "x.py")),
                "c": result("c", "error", ("z.py",))}
    assert validation_cache.learned_from(answered, 1.0) == {"x.py", "y.py"}  # an error tells nothing
    assert validation_cache.learned_from({"c": answered["c"]}, 1.0) is None
    many = {f"s{i}": result(f"s{i}", "accepted", tuple(f"m{i}/{j}.py" for j in range(MAX_IMPORTED)))
            for i in range(MAX_LEARNED // MAX_IMPORTED + 1)}
    assert validation_cache.learned_from(many, 1.0) is None  # a set cut short would call the rest untouched
    # a base failing more suites than the health rule allows is blind: its answered suites stand for none
    healthy = {f"s{i}": result(f"s{i}", "accepted", ("x.py",)) for i in range(9)}
    assert validation_cache.learned_from({**healthy, "b": answered["b"]}, 0.1) == {"x.py", "y.py"}
    assert validation_cache.learned_from({**healthy, "b": answered["b"], "c": answered["c"]}, 0.1) is None
    assert validation_cache.learned_from(answered, 0.5) is None


def test_why_a_change_is_analysed() -> None:
    listed = policy(["arguments.py"])
    assert analysed_because(listed, ("README.md", "docs/x.md"), None) is None  # no module: nothing to learn
    assert analysed_because(listed, ("arguments.py", "b.py"), None) == \
        "touches arguments.py, a validation path"
    assert analysed_because(listed, ("a.py", "b.py"), None) == \
        "touches a.py and 1 more; what validation imports at this base is not known yet"
    assert analysed_because(listed, ("a.py",), frozenset({"b.py"})) is None
    assert analysed_because(listed, ("a.py", "b.py"), frozenset({"b.py"})) == \
        "touches b.py, imported by validation at the base"


# slime in Nov 2025 (a5cadbdab2e3's base): every Megatron suite stopped importing its backend package at a
# module needing what CI has (there `-torch.finfo(torch.float8_e4m3fn).max` under a stubbed torch), a
# rejection. Learned from that base, a change to a module of the package after the failing one
# (`update_weight_utils.py`) came out "untouched", with nothing run: 4 of the 21 "untouched" commits sampled
# from slime's history before 2026-07 touch what a healthy base's validation imports.
BACKEND_ARGUMENTS = """import argparse


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="megatron")
    args = parser.parse_args()
    if args.backend == "megatron":
        from backends.megatron import validate
    else:
        from backends.fsdp import validate
    validate(args)
    return args
"""
BACKEND_FILES = {
    "arguments.py": BACKEND_ARGUMENTS,
    "backends/__init__.py": "",
    "backends/fsdp.py": "def validate(args):\n    pass\n",
    "backends/megatron/__init__.py": "from .kernels import BLOCK\nfrom .weights import validate\n",
    "backends/megatron/kernels.py": (
        "import torch\n\nif not torch.cuda.is_available():\n    raise RuntimeError('kernels need a GPU')\n"
        "BLOCK = 128\n"),
    "backends/megatron/weights.py": "def validate(args):\n    pass\n",
    "tests/test_lora.py": CI_LAUNCH.format(backend="fsdp"),
    "tests/test_megatron.py": CI_LAUNCH.format(backend="megatron"),
    "tests/test_megatron_long.py": CI_LAUNCH.format(backend="megatron"),
}


def test_nothing_is_learned_at_a_base_too_broken_to_stand_for_its_suites(tmp_path: Path) -> None:
    base = tree(tmp_path / "base", BACKEND_FILES)
    head = tree(tmp_path / "head", {**BACKEND_FILES, "backends/megatron/weights.py":
                                    "def validate(args):\n    assert False, 'no weights'\n"})
    report = check(base, head, tmp_path / "cache", ["arguments.py"])
    # analysed (the imports are not known), and said blind: 2 of 3 suites fail at the base
    assert report.validation_changed and report.health is not None and not report.health.could_analyse
    assert report.analysed_because == \
        "touches backends/megatron/weights.py; what validation imports at this base is not known yet"
    assert report.outcome("base", "tests/test_megatron.py").message == "kernels need a GPU"
    assert report.outcome("base", "tests/test_lora.py").outcome == "accepted"
    assert report.learned_paths is None
    again = check(base, head, tmp_path / "cache", ["arguments.py"])  # nothing stored to decide it from
    assert again.validation_changed and again.base_cached and again.learned_paths is None
