"""The kinds of matrix source behind one protocol: the registry names every kind the policy language has,
and a new kind is one module and its registration, captured end to end in the sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import toy_source_kind
import yaml

from app.analysis.core.policy import SOURCE_KEYS, PolicyError, parse_policy
from app.analysis.sources import registry
from app.analysis.starter.starter import detect
from app.engine.matrix_capture import HostTree, capture_matrix

POLICY = r"""
validation: {paths: ["pkg/**"], entry: "pkg.args:parse_args"}
matrix:
  sources:
    - kind: script_list
      list_file: ci/suites.txt
      entry: (^|/)train\.py$
harness: {limits: {suite_seconds: 20}}
"""
SCRIPT = """
    import subprocess

    if __name__ == "__main__":
        subprocess.run("ray stop --force", shell=True, check=True)
        subprocess.run("python3 train.py {words}", shell=True, check=True)
"""
TREE = {
    "ci/suites.txt": "tests/run_small.py\ntests/run_large.py\n# off: tests/run_gone.py\ntests/absent.py\n",
    "tests/run_small.py": SCRIPT.format(words="--num-layers 2"),
    "tests/run_large.py": SCRIPT.format(words="--num-layers 48 --bf16"),
    "train.py": "",
}


@pytest.fixture
def toy_kind() -> Iterator[None]:
    registry.register(toy_source_kind.KIND)
    try:
        yield
    finally:
        registry.unregister(toy_source_kind.KIND.name)


def write_tree(root: Path) -> Path:
    for relative, text in TREE.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def test_the_registry_names_every_kind_the_policy_language_has() -> None:
    assert set(registry.KINDS) == set(SOURCE_KEYS)
    assert all(SOURCE_KEYS[name] is kind.keys for name, kind in registry.KINDS.items())


def test_every_builtin_kind_parses_without_the_registry() -> None:
    # a reader of policies (the App reading a base's policy) imports the policy language alone: the
    # built-in kinds' keys come with it, the registry and the kinds' listing code do not
    program = textwrap.dedent("""
        import sys
        from app.analysis.core.policy import parse_policy
        sources = [
            {"kind": "record_launches", "scripts": ["ci/*.py"], "entry": "train"},
            {"kind": "workflow_rows", "workflows": ["w.yml"], "script": "s", "entry": "train"},
            {"kind": "workflow_steps", "workflows": ["w.yml"], "scripts": ["*.sh"], "entry": "train"},
            {"kind": "static", "suites": [{"id": "a", "argv": ["--x"]}]},
            {"kind": "python_definitions", "functions": ["t.d:f"], "name": "n"},
            {"kind": "yaml_args", "map": "MODEL_ARGS"},
            {"kind": "pytest_launches", "invocations": [["-m", "e2e"]], "entry": "train"},
            {"kind": "computed_matrix", "workflow": "w.yml", "jobs": ["j"], "entry": "train"},
        ]
        import json
        policy = parse_policy(json.dumps({"matrix": {"sources": sources}}), "all.yml")
        print(" ".join(source.kind for source in policy.matrix.sources))
        print(sorted(m for m in sys.modules if m.startswith("app.analysis.sources.")
                     and not m.endswith("_keys")))
    """)
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    kinds, loaded = run.stdout.splitlines()
    assert kinds == ("record_launches workflow_rows workflow_steps static python_definitions yaml_args "
                     "pytest_launches computed_matrix")
    assert set(kinds.split()) == set(registry.KINDS)
    assert loaded == "[]"


def test_a_new_kind_is_one_module_and_its_registration(toy_kind: None, tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo")
    policy = parse_policy(POLICY, "toy.yml")
    source = policy.matrix.sources[0]
    assert isinstance(source, toy_source_kind.ScriptList)
    listing = toy_source_kind.list_items(source, HostTree(repo), "matrix.sources[0]")
    assert [item["id"] for item in listing.items] == ["tests/run_small.py", "tests/run_large.py"]
    matrix, cached = capture_matrix(repo, policy, cache_dir=tmp_path / "cache")
    assert not cached
    assert {suite.id: suite.argv for suite in matrix.suites} == {
        "tests/run_small.py": ("--num-layers", "2"),
        "tests/run_large.py": ("--num-layers", "48", "--bf16")}
    assert matrix.disabled == ("tests/run_gone.py",)
    assert (matrix.scripts, matrix.captured) == (2, 2)
    again, cached = capture_matrix(repo, policy, cache_dir=tmp_path / "cache")
    assert cached and again == matrix


def test_a_kind_adds_to_the_cache_key_through_its_hook(toy_kind: None, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    repo = write_tree(tmp_path / "repo")
    policy = parse_policy(POLICY, "toy.yml")
    matrix, cached = capture_matrix(repo, policy, cache_dir=tmp_path / "cache")
    [entry] = (tmp_path / "cache" / "matrix").rglob("*.json")
    assert json.loads(entry.read_text())["scripts"] == [
        "0:tests/run_small.py", "0:tests/run_large.py", "0:toy-runner:1"]
    monkeypatch.setattr(toy_source_kind, "RUNNER_IMAGE", "toy-runner:2")
    again, cached = capture_matrix(repo, policy, cache_dir=tmp_path / "cache")
    assert not cached and again == matrix  # another image: the sandbox ran again


def test_init_detects_a_new_kind_through_its_module(toy_kind: None, tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo")
    starter = detect(repo)
    assert starter.policy["matrix"]["sources"][0]["kind"] == "script_list"
    assert starter.policy["matrix"]["sources"][0]["list_file"] == "ci/suites.txt"
    assert starter.why["matrix.sources[0]"] == "ci/suites.txt lists 2 CI scripts"
    parse_policy(yaml.safe_dump(starter.policy), "starter.yml")  # the keys it wrote are the kind's keys


def test_a_kind_no_module_registered_is_no_policy(toy_kind: None) -> None:
    registry.unregister(toy_source_kind.KIND.name)
    with pytest.raises(PolicyError, match="script_list"):
        parse_policy(POLICY, "toy.yml")
    registry.register(toy_source_kind.KIND)
    with pytest.raises(ValueError, match="exists already"):
        registry.register(toy_source_kind.KIND)
