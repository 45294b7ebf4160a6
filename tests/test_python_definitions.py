"""The python_definitions matrix source and the harness needs found on pytorch/torchtitan.

The repository here is written after torchtitan's real shape (tests/integration_tests/__init__.py's
`OverrideDefinitions` dataclass, `build_*_test_list()` functions, config functions passed as
`--module <fn.__module__> --config <fn.__name__>`, old-style override strings that the runner's shell splits,
a ConfigManager whose parser prints a framed error and exits 2), without torch: everything runs in the real
bubblewrap sandbox, nothing of it on the host.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from harness_twin import job, results, run_sandboxed

from app.analysis.core.model import Outcome
from app.analysis.core.policy import Policy, builtin_policy, load_policy
from app.analysis.sources.matrix import ScriptReport, build_matrix
from app.analysis.sources.python_definitions_keys import PythonDefinitions
from app.engine.matrix_capture import capture_matrix

POLICIES = Path(__file__).resolve().parents[1] / "policies"
FEATURES = "tests.integration_tests.features:build_features_test_list"
BROKEN = "tests.integration_tests.broken:build_broken_test_list"

TITAN_SHAPED = {
    "titan/__init__.py": "",
    "titan/manager.py": """
        import sys


        class ConfigManager:
            def __init__(self):
                self.seen = []  # a fresh instance per suite: nothing carries over

            def parse_args(self):
                args = sys.argv[1:]
                self.seen.extend(args)
                known = {"--module", "--config", "--dump_folder", "--training.steps"}
                for word in args:
                    name = word.split("=")[0]
                    if name.startswith("--") and name not in known:
                        print("starting up", file=sys.stderr)  # log lines before the box are no error
                        print("╭─ Unrecognized options ─────────╮", file=sys.stderr)
                        print(f"│ Unrecognized options: {name} │", file=sys.stderr)
                        print("│ ────────────────────────────── │", file=sys.stderr)
                        print("│ For full helptext, run train.py --help │", file=sys.stderr)
                        print("╰────────────────────────────────╯", file=sys.stderr)
                        raise SystemExit(2)
                assert len(self.seen) == len(args), "state leaked from another suite"
                return args
    """,
    "recipes/__init__.py": "",
    "recipes/features.py": """
        def debugmodel_default():
            return {}


        def debugmodel_save():
            return {}


        def debugmodel_load():
            return {}
    """,
    "tests/__init__.py": "",
    "tests/integration_tests/__init__.py": """
        from collections.abc import Callable, Sequence
        from dataclasses import dataclass


        @dataclass
        class OverrideDefinitions:
            override_args: Sequence[Sequence[str]] = ()
            test_descr: str = "default"
            test_name: str = "default"
            ngpu: int = 4
            disabled: bool = False
            configs: Sequence[Callable[[], dict]] = ()

            def __post_init__(self):
                if self.configs and not self.override_args:
                    self.override_args = tuple(() for _ in self.configs)
    """,
    "tests/integration_tests/features.py": """
        import os

        import recipes.features as recipes
        from tests.integration_tests import OverrideDefinitions

        os.system("touch /tmp/definitions-ran-a-command")  # run in the sandbox, as any repository code


        def build_features_test_list():
            return [
                OverrideDefinitions(configs=[recipes.debugmodel_default], test_name="default"),
                OverrideDefinitions(
                    configs=[recipes.debugmodel_save, recipes.debugmodel_load],
                    override_args=[["--training.steps 10"], ["--training.steps 20"]],
                    test_name="checkpoint",
                ),
                OverrideDefinitions(
                    [["--module graph.llama3", "--config graph_debugmodel", "--compile.mode 'jit'"]],
                    "old style", "old_style",
                ),
                OverrideDefinitions(configs=[recipes.debugmodel_default], test_name="off", disabled=True),
            ]
    """,
    "tests/integration_tests/checkpoint.py": """
        import os

        from tests.integration_tests import OverrideDefinitions

        # read at import, as torchtitan's tests/integration_tests/features.py did until its configs moved
        runner_temp = os.getenv("RUNNER_TEMP")
        checkpoint_path = os.path.join(runner_temp, "step-10") if runner_temp else "step-10"


        def build_checkpoint_test_list():
            load = [[f"--checkpoint.initial_load_path {checkpoint_path}"]]
            return [OverrideDefinitions(load, "load", "load")]
    """,
    "tests/integration_tests/broken.py": """
        from tests.integration_tests import OverrideDefinitions


        class Nameless:
            disabled = False
            override_args = [["--training.steps 1"]]


        def build_broken_test_list():
            return [OverrideDefinitions(test_name="fine"), Nameless()]
    """,
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def titan_shaped_policy(*functions: str) -> Policy:
    return Policy.model_validate({
        "validation": {"paths": ["titan/**"], "entry": "titan.manager:ConfigManager.parse_args"},
        "matrix": {"sources": [{
            "kind": "python_definitions", "functions": list(functions or [FEATURES]), "name": "test_name",
            "disabled": "disabled", "runs": "override_args", "shell_words": True, "per_run": ["configs"],
            "args": ["--module={configs.__module__}", "--config={configs.__name__}",
                     "--dump_folder", "/out/{definition.test_name}"],
            "defaults": {"configs.__module__": "recipes.default"},
            "entry": "titan/train.py", "env": {"RUNNER_TEMP": "/runner/_temp"}}]},
        "harness": {"limits": {"suite_seconds": 20}},
    })


def test_the_builtin_torchtitan_policy_loads_and_is_picked_by_repository_name() -> None:
    path = builtin_policy("pytorch", "torchtitan")
    assert path.resolve() == (POLICIES / "pytorch" / "torchtitan.yml").resolve()  # bundled: a link
    policy = load_policy(path)
    [source] = policy.matrix.sources
    assert isinstance(source, PythonDefinitions)
    assert "tests.integration_tests.features:build_features_test_list" in source.functions
    assert (source.name, source.runs, source.per_run, source.shell_words) == (
        "test_name", "override_args", ["configs"], True)
    assert policy.validation.entry == "torchtitan.config.manager:ConfigManager.parse_args"
    assert policy.validation.unknown_flags == "error"


def test_definitions_are_collected_in_the_sandbox_each_run_a_suite(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", TITAN_SHAPED)
    matrix, cached = capture_matrix(repo, titan_shaped_policy(), cache_dir=tmp_path / "cache")
    argv = {suite.id.removeprefix(FEATURES + "::"): list(suite.argv) for suite in matrix.suites}
    assert argv == {
        "default": ["--module=recipes.features", "--config=debugmodel_default", "--dump_folder",
                    "/out/default"],
        "checkpoint#1": ["--module=recipes.features", "--config=debugmodel_save", "--dump_folder",
                         "/out/checkpoint", "--training.steps", "10"],
        "checkpoint#2": ["--module=recipes.features", "--config=debugmodel_load", "--dump_folder",
                         "/out/checkpoint", "--training.steps", "20"],
        # no configs: a word with a default takes it, one without is left out; the run's own strings are
        # split as the shell splits them
        "old_style": ["--module=recipes.default", "--dump_folder", "/out/old_style", "--module",
                      "graph.llama3", "--config", "graph_debugmodel", "--compile.mode", "jit"],
    }
    assert not cached
    assert {suite.entry for suite in matrix.suites} == {"titan/train.py"}
    assert {suite.script for suite in matrix.suites} == {FEATURES}
    assert all(suite.env == {"RUNNER_TEMP": "/runner/_temp"} for suite in matrix.suites)
    assert matrix.disabled == (f"{FEATURES}::off",)
    assert (matrix.scripts, matrix.captured, matrix.failed, matrix.partial) == (1, 1, (), ())
    assert not Path("/tmp/definitions-ran-a-command").exists()  # the module ran in the sandbox only
    again, cached = capture_matrix(repo, titan_shaped_policy(), cache_dir=tmp_path / "cache")
    assert cached and again == matrix


def test_a_definition_that_cannot_be_read_is_partial_and_a_missing_function_failed(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", TITAN_SHAPED)
    missing = "tests.integration_tests.nowhere:build"
    matrix, _ = capture_matrix(repo, titan_shaped_policy(BROKEN, missing), cache_dir=None)
    assert [suite.id for suite in matrix.suites] == [f"{BROKEN}::fine"]
    [partial] = matrix.partial
    assert partial.script == BROKEN and "AttributeError" in partial.reason and "test_name" in partial.reason
    [failed] = matrix.failed
    assert failed.script == missing and failed.reason.startswith("ModuleNotFoundError")


def test_what_the_sandbox_reports_is_bounded_on_the_host() -> None:
    source = titan_shaped_policy().matrix.sources[0]
    huge = {"type": "script", "script": FEATURES, "status": "captured", "ended": True,
            "suites": [{"name": "bad", "argv": "--not a list"}, {"name": "bad2", "argv": [1, 2]}]
            + [{"name": "x" * 10_000, "argv": ["--a"] * 5000}] * 3000,
            "disabled": ["y" * 10_000]}
    report = ScriptReport.from_message(huge)
    matrix = build_matrix(titan_shaped_policy(), {0: [report]}, "")
    assert isinstance(source, PythonDefinitions)
    assert len(matrix.suites) == 1022  # 1024 taken, the two malformed left out
    assert all(len(suite.argv) == 512 for suite in matrix.suites)
    assert len(matrix.suites[0].id) == len(FEATURES) + 2 + 4096
    assert [len(name) for name in matrix.disabled] == [len(FEATURES) + 2 + 4096]


def test_a_class_method_entry_runs_on_a_fresh_instance_and_a_parser_exit_says_why(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", TITAN_SHAPED)
    policy = titan_shaped_policy().model_dump(mode="json", by_alias=True)
    suites = [{"id": name, "script": FEATURES, "argv": argv.split(), "env": {}, "entry": "titan/train.py"}
              for name, argv in [("one", "--module=m --config=c"), ("two", "--module=m --training.steps 3"),
                                 ("bad", "--module=m --compile.mode jit")]]
    found = results(run_sandboxed(repo, job(suites, policy)))
    assert found["one"].outcome == Outcome("accepted")
    assert found["two"].outcome == Outcome("accepted")
    bad = found["bad"].outcome
    assert (bad.outcome, bad.exception, bad.path) == ("rejected", "SystemExit", "titan/manager.py")
    assert bad.message == "2: Unrecognized options Unrecognized options: --compile.mode"


def test_definitions_are_read_in_the_job_environment(tmp_path: Path) -> None:
    # pytorch/torchtitan 2e998c0b1cc5 (#3393): the head's checkpoint config refuses a relative
    # initial_load_path; CI's runner ran on GitHub's runner, where RUNNER_TEMP is set, and the definitions
    # module read it at import: read without it, the load path was relative and the change looked blocking.
    repo = write_tree(tmp_path / "repo", TITAN_SHAPED)
    function = "tests.integration_tests.checkpoint:build_checkpoint_test_list"
    matrix, _ = capture_matrix(repo, titan_shaped_policy(function), cache_dir=None)
    [suite] = matrix.suites
    assert suite.argv[-2:] == ("--checkpoint.initial_load_path", "/runner/_temp/step-10")
