"""A policy written at today's launch, checking changes of a repository's older eras.

Written after pytorch/torchtitan's history (README, "The 9 months before the slime and torchtitan policies'
snapshots": 0 of 6 sampled commits analysed). Two failures, each on every suite of its era:
- before its configs became Python functions (#2386, 2026-02-23) run_train.sh started the trainer with
  `--job.config_file <toml>`; the policy's `args` are today's `--module ... --config ...`, which that
  ConfigManager rejected (`SystemExit: 2: Unrecognized options`). The policy lists the older launch under
  the source's `forms`, with the text of run_train.sh that says it applies.
- until #3725 (2026-06-20) ConfigManager.parse_args was `def parse_args(self, args=sys.argv[1:])`: the
  default is evaluated at import, when CI's process has its argv already, but the harness imports the entry
  once before any suite's argv is set (`ValueError: --module is required` on every suite).
Here a real git repository goes through both eras, a change checked in each; the real command line, the
real sandbox.
"""

from __future__ import annotations

from pathlib import Path

from launch_twin import commit, git, write_repo
from twin.cli import prtriage

from app.analysis.core.launch_forms import fit_forms
from app.analysis.core.policy import Policy

OLD_RUN_TRAIN = '''\
CONFIG_FILE=${CONFIG_FILE:-"./titan/debug_model.toml"}
torchrun --nproc_per_node=${NGPU} -m titan.train --job.config_file ${CONFIG_FILE} "$@"
'''
NEW_RUN_TRAIN = '''\
MODULE=${MODULE:-"llama3"}
CONFIG=${CONFIG:-"llama3_debugmodel"}
torchrun --nproc_per_node=${NGPU} -m titan.train --module ${MODULE} --config ${CONFIG} "$@"
'''
# The frame tyro draws around its errors, as the real ConfigManager's parser prints it.
REFUSE = '''
def refuse(name):
    print(f"│ Unrecognized options: {name} │", file=sys.stderr)
    raise SystemExit(2)
'''
OLD_MANAGER = '''\
import sys
''' + REFUSE + '''

class ConfigManager:
    def parse_args(self, args: list[str] = sys.argv[1:]):
        known = {"--job.config_file", "--job.dump_folder", "--training.steps"}
        for word in args:
            if word.startswith("--") and word not in known:
                refuse(word)
        steps = int(args[args.index("--training.steps") + 1]) if "--training.steps" in args else 1
        return steps
'''
NEW_MANAGER = '''\
import sys
''' + REFUSE + '''

class ConfigManager:
    def parse_args(self, args: list[str] = sys.argv[1:]):
        if "--module" not in args:
            raise ValueError("--module is required. Example: --module llama3 --config llama3_debugmodel")
        known = {"--module", "--config", "--dump_folder", "--training.steps"}
        for word in args:
            if word.startswith("--") and word not in known:
                refuse(word)
        steps = int(args[args.index("--training.steps") + 1]) if "--training.steps" in args else 1
        return steps
'''
STEPS_CHECK = "        return steps\n"
NEW_CHECK = '        assert steps <= 15, "more than 15 steps need a checkpoint folder"\n' + STEPS_CHECK
DEFINITIONS = '''\
from dataclasses import dataclass


@dataclass
class OverrideDefinitions:
    override_args: tuple = ((),)
    test_descr: str = "default"
    test_name: str = "default"
'''
FEATURES = '''\
from tests.integration_tests import OverrideDefinitions


def build_features_test_list():
    return [
        OverrideDefinitions([["--training.steps 10"]], "short", "short"),
        OverrideDefinitions([["--training.steps 20"]], "long", "long"),
    ]
'''
POLICY = '''# written at the newest revision: its args are today's launch
version: 1
validation:
  paths: ["titan/**"]
  entry: "titan.manager:ConfigManager.parse_args"
matrix:
  sources:
    - kind: python_definitions
      functions: ["tests.integration_tests.features:build_features_test_list"]
      name: test_name
      runs: override_args
      shell_words: true
      per_run: [configs]
      args: ["--module", "{configs.__module__}", "--config", "{configs.__name__}",
             "--dump_folder", "/out/{definition.test_name}"]
      defaults: {configs.__module__: llama3, configs.__name__: llama3_debugmodel}
      forms:
        - when: {run_train.sh: "--job.config_file"}
          args: ["--job.config_file", "./titan/debug_model.toml",
                 "--job.dump_folder", "/out/{definition.test_name}"]
      entry: titan/train.py
harness:
  limits: {suite_seconds: 30}
'''


def _checked(repo: Path, base: str, head: str, policy: Path, cache: Path) -> dict:
    run = prtriage("check", "--repo", str(repo), "--base", base, "--head", head, "--policy", str(policy),
                   "--format", "json", cache_dir=cache)
    assert run.returncode == 1, run.describe()
    report: dict = run.json()
    return report


def test_a_change_of_each_era_is_analysed_with_the_launch_of_its_era(tmp_path: Path) -> None:
    files = {"run_train.sh": OLD_RUN_TRAIN, "titan/__init__.py": "", "titan/manager.py": OLD_MANAGER,
             "titan/train.py": "from titan.manager import ConfigManager\n\nConfigManager().parse_args()\n",
             "tests/__init__.py": "", "tests/integration_tests/__init__.py": DEFINITIONS,
             "tests/integration_tests/features.py": FEATURES}
    repo = write_repo(tmp_path, files)
    git(repo, "init", "-q", "-b", "main")
    old_base = commit(repo, "configs from TOML files")
    manager = repo / "titan" / "manager.py"
    manager.write_text(OLD_MANAGER.replace(STEPS_CHECK, NEW_CHECK))
    old_head = commit(repo, "refuse long runs")
    (repo / "run_train.sh").write_text(NEW_RUN_TRAIN)
    manager.write_text(NEW_MANAGER)
    new_base = commit(repo, "configs from Python functions")
    manager.write_text(NEW_MANAGER.replace(STEPS_CHECK, NEW_CHECK))
    new_head = commit(repo, "refuse long runs again")
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)

    old = _checked(repo, old_base, old_head, policy, tmp_path / "cache")
    assert old["health"]["could_analyse"] is True
    assert old["health"]["base"]["accepted"] == 2  # was 0: `Unrecognized options: --module` on each
    [finding] = [f for f in old["findings"] if f["severity"] == "blocking"]
    assert (finding["kind"], finding["path"]) == ("new_rejection", "titan/manager.py")
    assert [s.rsplit("::", 1)[1] for s in finding["suites"]] == ["long"]
    # never silent: the form used, in the report
    assert old["policy"]["followed"] == [
        f"the policy's matrix.sources[0] launched as its forms[1] at {old_head[:12]} (run_train.sh contains "
        "'--job.config_file'): --job.config_file ./titan/debug_model.toml --job.dump_folder "
        "/out/{definition.test_name}"]

    # today's launch at today's layout; the default read from sys.argv is the suite's argv, not the leader's
    new = _checked(repo, new_base, new_head, policy, tmp_path / "cache")
    assert new["health"]["base"]["accepted"] == 2  # was 0: `--module is required` on each
    [finding] = [f for f in new["findings"] if f["severity"] == "blocking"]
    assert [s.rsplit("::", 1)[1] for s in finding["suites"]] == ["long"]
    assert new["policy"].get("followed", []) == []


def test_the_first_form_that_fits_replaces_args_and_defaults_and_none_leaves_them() -> None:
    policy = Policy.model_validate({
        "validation": {"paths": ["titan/**"], "entry": "titan.manager:ConfigManager.parse_args"},
        "matrix": {"sources": [{
            "kind": "python_definitions", "functions": ["t.m:f"], "name": "test_name",
            "args": ["--module", "{configs.__module__}"], "defaults": {"configs.__module__": "llama3"},
            "forms": [{"when": {"run.sh": "--a", "other.sh": "x"}, "args": ["--never"]},
                      {"when": {"run.sh": "--a"}, "args": ["--first"], "defaults": {"x": "y"}},
                      {"when": {"run.sh": "--a"}, "args": ["--second"]}]}]}})
    files = {"run.sh": "python -m train --a $A", "other.sh": "y"}
    formed, notes = fit_forms(policy, files.get, "abc")
    source = formed.matrix.sources[0]
    assert (source.args, source.defaults) == (["--first"], {"x": "y"})
    assert notes == ("the policy's matrix.sources[0] launched as its forms[2] at abc (run.sh contains "
                     "'--a'): --first",)
    assert fit_forms(policy, {"run.sh": "python -m train --b"}.get, "abc") == (policy, ())
    assert fit_forms(policy, lambda path: None, "abc") == (policy, ())
