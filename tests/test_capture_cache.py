"""capture_matrix's cache: the same tree of the same repository costs no capture; any change recaptures.

The key is the host's hash of the whole tree, never what the sandboxed scripts say they read: they are a
pull request's code (issue "Hold under attack": a helper emptied the harness's list of reads and got its
own matrix reused for another pull request).
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.analysis.core.policy import Policy, parse_policy
from app.engine import matrix_capture
from app.engine.matrix_capture import capture_matrix
from app.trees.treehash import fingerprints, tree_digest

POLICY = {
    "validation": {"paths": ["train.py"], "entry": "arguments:parse_args"},
    "matrix": {"sources": [{"kind": "record_launches", "scripts": ["tests/**/test_*.py"],
                            "exclude": ["tests/**/test_skip*.py"], "entry": r"(^|/)train\.py$"}]},
    "harness": {"limits": {"suite_seconds": 10}},
}

FILES = {
    "tests/e2e/test_small.py": """
        import subprocess

        subprocess.run('source scripts/model.sh && python3 train.py "${MODEL_ARGS[@]}" --lr 1e-4', shell=True,
                       executable="/bin/bash", check=True)
    """,
    "tests/test_top.py": """
        import os

        os.system("python3 train.py --top")
    """,
    "tests/e2e/test_skip_me.py": """
        raise SystemExit("excluded: never run")
    """,
    "scripts/model.sh": """
        MODEL_ARGS=(--layers $((2 * 12)))
    """,
    "README.md": "A CI tree.\n",
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def policy(**harness: object) -> Policy:
    raw = json.loads(json.dumps(POLICY))
    raw["harness"].update(harness)
    return parse_policy(json.dumps(raw), "test")


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    write_tree(tmp_path / "repo", FILES)
    return tmp_path / "repo"


def argvs(tree: Path, cache: Path, repository: str = "owner/repo") -> tuple[list[tuple[str, ...]], bool]:
    matrix, cached = capture_matrix(tree, policy(), cache_dir=cache, repository=repository)
    return [s.argv for s in matrix.suites], cached


def no_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """bubblewrap missing, for real: any capture that tries to run now raises SandboxUnavailable."""
    monkeypatch.setenv("PRTRIAGE_BWRAP", str(tmp_path / "no-bwrap-here"))


def test_unchanged_tree_is_a_cache_hit_that_runs_no_sandbox(repo: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    first, cached = argvs(repo, cache)
    assert (first, cached) == ([("--layers", "24", "--lr", "1e-4"), ("--top",)], False)
    with monkeypatch.context() as patch:
        no_sandbox(patch, tmp_path)
        assert argvs(repo, cache) == (first, True)
    (repo / "README.md").write_text("edited: any file of the tree may be read by a script\n")
    assert argvs(repo, cache) == (first, False)


def test_a_change_in_a_sourced_shell_file_is_a_miss(repo: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    argvs(repo, cache)
    (repo / "scripts" / "model.sh").write_text("MODEL_ARGS=(--layers $((2 * 16)))\n")
    assert argvs(repo, cache) == ([("--layers", "32", "--lr", "1e-4"), ("--top",)], False)
    with monkeypatch.context() as patch:  # both trees are cached now, each under its own reads
        no_sandbox(patch, tmp_path)
        assert argvs(repo, cache)[1]
        (repo / "scripts" / "model.sh").write_text("MODEL_ARGS=(--layers $((2 * 12)))\n")
        assert argvs(repo, cache) == ([("--layers", "24", "--lr", "1e-4"), ("--top",)], True)


def test_a_new_ci_script_is_a_miss(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    argvs(repo, cache)
    write_tree(repo, {"tests/e2e/test_new.py": "import os\nos.system('python3 train.py --new')\n"})
    with monkeypatch.context() as patch:
        no_sandbox(patch, tmp_path)
        with pytest.raises(Exception, match="bubblewrap not found"):
            argvs(repo, cache)
    assert argvs(repo, cache) == ([("--new",), ("--layers", "24", "--lr", "1e-4"), ("--top",)], False)


@pytest.fixture
def capture_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the host's matrix source modules that capture's key reads instead of the installed ones."""
    copy = tmp_path / "sources"
    shutil.copytree(matrix_capture.SOURCES_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(matrix_capture, "SOURCES_DIR", copy)
    matrix_capture.capture_code_digest.cache_clear()
    yield copy
    matrix_capture.capture_code_digest.cache_clear()


def test_a_change_in_the_code_that_captures_is_a_miss(repo: Path, tmp_path: Path, capture_code: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A prtriage upgrade that changes how a kind lists or records its items, with tree, policy, harness
    and environment unchanged, captures again instead of reading the older code's matrix."""
    cache = tmp_path / "cache"
    first, _ = argvs(repo, cache)
    with monkeypatch.context() as patch:
        no_sandbox(patch, tmp_path)
        assert argvs(repo, cache) == (first, True)
        recorded = capture_code / "recorded.py"
        recorded.write_text(recorded.read_text() + "\n# the suites are made otherwise now\n")
        matrix_capture.capture_code_digest.cache_clear()  # a new process of the upgraded prtriage
        with pytest.raises(Exception, match="bubblewrap not found"):
            argvs(repo, cache)


def test_the_capture_harness_is_keyed_with_every_module_it_imports(tmp_path: Path) -> None:
    """Written after the key's fixed list of harness files: it left out boundary.py and repoline.py, which
    capture imports through fsfakes.py, so a change to them reused the older harness's matrices."""
    write_tree(tmp_path, {
        "program.py": "import os\nfrom first import f\n\ndef later():\n    import second\n",
        "first.py": "from app.sandbox.harness import third\n",
        "second.py": "", "third.py": "import first\n", "unrelated.py": ""})
    assert [p.name for p in matrix_capture.harness_closure(tmp_path, "program.py")] == [
        "first.py", "program.py", "second.py", "third.py"]
    installed = {p.name for p in matrix_capture.harness_closure(matrix_capture.HARNESS_DIR, "capture.py")}
    assert {"boundary.py", "repoline.py", "stubs.py"} <= installed and "validate.py" not in installed


def test_the_cache_entry_keys_on_the_whole_tree(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    argvs(repo, cache)
    [entry_file] = (cache / "matrix").glob("*/*/*.json")
    entry = json.loads(entry_file.read_text())
    assert entry["tree"] == tree_digest(fingerprints(repo)) and entry_file.stem == entry["tree"][:32]
    assert entry["scripts"] == ["0:tests/e2e/test_small.py", "0:tests/test_top.py"]
    assert entry["matrix"]["captured"] == 2 and not list(cache.rglob(".tmp-*"))


def test_another_repository_never_gets_the_matrix(repo: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    argvs(repo, cache, repository="attacker/fork")
    with monkeypatch.context() as patch:
        no_sandbox(patch, tmp_path)
        with pytest.raises(Exception, match="bubblewrap not found"):
            argvs(repo, cache, repository="victim/repo")


def test_a_script_that_hides_what_it_read_cannot_poison_the_cache(repo: Path, tmp_path: Path) -> None:
    # A pull request's CI helper reaches the harness's module state and empties its record of reads, and
    # chooses its own suites; a later tree with the same CI scripts but another helper must not get them.
    helper = "tests/helper_lib.py"
    write_tree(repo, {
        helper: "FLAGS = '--attacker-chosen'\n",
        "tests/test_top.py": """
            import builtins, os, sys
            from tests import helper_lib
            for module in list(sys.modules.values()):
                for name in ("_reads", "reads"):
                    found = getattr(module, name, None)
                    if isinstance(found, set):
                        found.clear()
            sys.modules.pop("tests.helper_lib")  # what is imported counts as read too: hide it
            os.system("python3 train.py " + helper_lib.FLAGS)
        """,
        "tests/__init__.py": "",
    })
    cache = tmp_path / "cache"
    assert ("--attacker-chosen",) in argvs(repo, cache)[0]
    write_tree(repo, {helper: "FLAGS = '--honest'\n"})
    suites, cached = argvs(repo, cache)
    assert not cached and ("--honest",) in suites and ("--attacker-chosen",) not in suites


def test_a_run_stopped_by_the_sandbox_is_reported_and_not_cached(repo: Path, tmp_path: Path) -> None:
    write_tree(repo, {"tests/test_stuck.py": "while True:\n    pass\n"})
    stuck = policy(limits={"suite_seconds": 60, "total_seconds": 3})
    matrix, cached = capture_matrix(repo, stuck, cache_dir=tmp_path / "cache")
    assert not cached
    [failure] = [f for f in matrix.failed if f.script == "tests/test_stuck.py"]
    assert "timed out" in failure.reason
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_policy_keys_capture_does_not_read_keep_the_cache(repo: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    first, _ = argvs(repo, cache)
    raw = json.loads(json.dumps(POLICY))
    raw["severities"] = {"new_rejection": "warning"}
    raw["validation"]["functions"] = ["arguments:validate"]
    with monkeypatch.context() as patch:
        no_sandbox(patch, tmp_path)
        matrix, cached = capture_matrix(repo, parse_policy(json.dumps(raw), "test"), cache_dir=cache,
                                        repository="owner/repo")
    assert cached and [s.argv for s in matrix.suites] == first
    raw["harness"]["existing_path_prefixes"] = ["/data/"]  # capture does read this one
    with monkeypatch.context() as patch:
        no_sandbox(patch, tmp_path)
        with pytest.raises(Exception, match="bubblewrap not found"):
            capture_matrix(repo, parse_policy(json.dumps(raw), "test"), cache_dir=cache,
                           repository="owner/repo")
