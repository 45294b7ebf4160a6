"""The yaml_args matrix source: Megatron-LM's model_config.yaml maps flattened into argv as its CI runner
(`tests/functional_tests/shell_test_utils/_run_training.sh`) flattens them, scoped by its recipes.

The values are the ones seen in the real tree (NVIDIA/Megatron-LM main, 2026-08-22); the twin at the end
has its shape (a recipe, two cases, a tiny parse_and_validate_args) and goes through the real sandbox.
"""

from __future__ import annotations

import shlex
import textwrap
from pathlib import Path

import pytest
import yaml
from harness_twin import job, results, run_sandboxed
from hypothesis import given, settings
from hypothesis import strategies as st

from app.analysis.core.model import Outcome
from app.analysis.core.policy import builtin_policy, load_policy, parse_policy
from app.analysis.sources import yaml_plain
from app.analysis.sources.recipes import list_cases, recipe_rows
from app.analysis.sources.yaml_args import _xargs_trim, envsubst, flatten_file, flatten_map
from app.analysis.sources.yaml_args_keys import YamlArgs
from app.analysis.sources.yaml_plain import YamlError, compose_plain
from app.analysis.verdict.render import render, report_json
from app.analysis.verdict.report import CheckReport
from app.engine.check_steps import run_check

SOURCE = YamlArgs.model_validate({"kind": "yaml_args", "map": "MODEL_ARGS", "env_map": "ENV_VARS"})


def flat(body: str, variables: dict[str, str] | None = None, source: YamlArgs = SOURCE) -> list[str]:
    [suite] = flatten_file(textwrap.dedent(body), source, variables or {})
    return list(suite.argv)


@pytest.mark.parametrize(("entry", "words"), [
    ("--use-mcore-models: true", ["--use-mcore-models"]),                        # a bare flag
    ('--bf16: "true"', ["--bf16"]),                                              # yq prints it alike
    ("--lr: 1.0e-4", ["--lr", "1.0e-4"]),                                        # the text, not 0.0001
    ("--min-lr: 6e-5", ["--min-lr", "6e-5"]),
    ("--tokenizer-type: yes", ["--tokenizer-type", "yes"]),                      # YAML 1.2: a word
    ("--moe-layer-freq: '([0]*3+[1]*11)'", ["--moe-layer-freq", "([0]*3+[1]*11)"]),
    ('--cuda-graph-modules: "[attn mamba moe_router]"', ["--cuda-graph-modules", "attn", "mamba",
                                                          "moe_router"]),
    ('--spec: "[megatron.core.models.hybrid.hybrid_layer_specs hybrid_stack_spec]"',
     ["--spec", "megatron.core.models.hybrid.hybrid_layer_specs", "hybrid_stack_spec"]),
    ('--recompute-modules: "[moe_act]"', ["--recompute-modules", "moe_act"]),
    ("--eval-ranks: [0, 1]", ["--eval-ranks", "0", "1"]),                         # a YAML list: its items
    ('--prompt: "a  b|c"', ["--prompt", "a b|c"]),                               # xargs trims, one word
    ('--ckpt-step: ""', []),                                                     # an empty value is dropped
    ("--overlap-grad-reduce: false", ["--overlap-grad-reduce", "false"]),        # yq's tostring
    ("--seed: ~", ["--seed", "null"]),
])
def test_one_entry_flattens_as_the_runner_flattens_it(entry: str, words: list[str]) -> None:
    assert flat(f"MODEL_ARGS:\n  {entry}\n") == words


def test_placeholders_envsubst_first_then_the_shell_expands_what_is_left() -> None:
    body = """
        ENV_VARS:
          DATA_BLEND: "1.0 ${DATA_PATH}/text"
        MODEL_ARGS:
          --data-path: ${DATA_PATH}/my-gpt3_00_text_document
          --tensorboard-dir: $TENSORBOARD_PATH
          --blend: $DATA_BLEND
          --wandb-exp-name: ${WANDB_EXPERIMENT}
          --num-layers: 12
    """
    assert flat(body, {"DATA_PATH": "/mnt/artifacts", "TENSORBOARD_PATH": "/w/tb"}) == [
        "--data-path", "/mnt/artifacts/my-gpt3_00_text_document", "--tensorboard-dir", "/w/tb",
        "--blend", "1.0", "/mnt/artifacts/text",       # the ENV_VARS value, split as an unquoted word
        "--wandb-exp-name",                            # unset: empty, the word vanishes
        "--num-layers", "12"]
    assert envsubst("$A ${B} $C", {"A": "1", "B": "2"}) == "1 2 $C"


def test_env_map_merge_keys_numbered_maps_and_edits() -> None:
    source = YamlArgs.model_validate({
        "kind": "yaml_args", "map": "MODEL_ARGS", "env_map": "ENV_VARS",
        "edits": [{"key": "--exit-interval", "from": "--train-iters",
                   "when": {"MODE": ["pretraining", None], "TEST_TYPE": ["regular", "ckpt-resume"]}}]})
    body = textwrap.dedent("""
        ENV_VARS:
          CUDA_DEVICE_MAX_CONNECTIONS: 1
        TEST_TYPE: ckpt-resume
        BASE_MODEL_ARGS: &base
          --num-layers: 12
          --train-iters: 100
        MODEL_ARGS:
          <<: *base
          --num-layers: 24
        MODEL_ARGS_2:
          <<: *base
          --ckpt-format: torch_dist
    """)
    first, second = flatten_file(body, source, {})
    assert first.argv == ("--num-layers", "24", "--train-iters", "100", "--exit-interval", "100")
    assert second.run == 2 and "--ckpt-format" in second.argv
    assert first.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    release = body.replace("TEST_TYPE: ckpt-resume", "TEST_TYPE: release")
    assert "--exit-interval" not in flatten_file(release, source, {})[0].argv


def test_untrusted_files_are_bounded() -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, n in zip("abcdef", "bcdefg", strict=True))
    with pytest.raises(YamlError, match="values"):
        compose_plain(laughs)
    with pytest.raises(YamlError, match="no `MODEL_ARGS`"):
        flat("ENV_VARS: {}\n")
    with pytest.raises(YamlError, match="not valid YAML"):
        flat("MODEL_ARGS:\n  --x: {assets_dir}/tb\n")  # a JET field never filled breaks the YAML
    assert flatten_map({"$(touch /tmp/x)": True}, {}) == ["$(touch", "/tmp/x)"]  # never run


RECIPE = """
type: basic
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  nodes: 1
  gpus: 8
  platforms: dgx_a100
  script: |-
    cd /opt/megatron-lm
    NAME=$(echo {test_case}_{environment} | sed 's/dgx_h100/dgx_a100/g')
    ARGUMENTS=(
        "DATA_PATH=/mnt/artifacts"
        "CHECKPOINT_LOAD_PATH=/mnt/artifacts/model/{name}"
        "TENSORBOARD_PATH={assets_dir}/tensorboard"
        "TRAINING_SCRIPT_PATH=pretrain_gpt.py"
        "TRAINING_PARAMS_PATH=./tests/functional_tests/test_cases/{model}/{test_case}/model_config.yaml"
    )
    bash ./tests/functional_tests/shell_test_utils/run_ci_test.sh ${{ARGUMENTS[@]}}
products:
  - test_case: [gpt3_tp2]
    products:
      - environment: [dev, lts]
        scope: [mr, nightly]
        platforms: [dgx_h100]
  - test_case: [gpt3_broken]
    products:
      - environment: [dev]
        scope: [mr-broken]
  - test_case: [gpt3_new_assert]
    products:
      - environment: [dev]
        scope: [mr-github]
"""
TP2 = """
ENV_VARS:
  NCCL_ALGO: Ring
TEST_TYPE: regular
MODEL_ARGS:
  --tensor-model-parallel-size: 2
  --load: ${CHECKPOINT_LOAD_PATH}
  --tensorboard-dir: ${TENSORBOARD_PATH}
  --bf16: true
"""
RECIPE_POLICY = {
    "kind": "yaml_args", "recipes": ["tests/test_utils/recipes/**/*.yaml"], "scopes": ["mr", "mr-github",
                                                                                       "nightly"],
    "recipe_variables": ["DATA_PATH", "CHECKPOINT_LOAD_PATH", "TENSORBOARD_PATH"],
    "config_variable": "TRAINING_PARAMS_PATH", "entry_variable": "TRAINING_SCRIPT_PATH",
    "checkout": "/opt/megatron-lm", "fields": {"assets_dir": "/workspace/assets"}, "map": "MODEL_ARGS",
    "env_map": "ENV_VARS", "variables": {"GPUS_PER_NODE": "8"},
    "env_products": {"WORLD_SIZE": ["nodes", "GPUS_PER_NODE"]}}


def test_recipe_rows_expand_products_as_recipe_parser_does() -> None:
    rows = recipe_rows(RECIPE, "r.yaml", YamlArgs.model_validate(RECIPE_POLICY))
    assert [(r.fields["test_case"], r.fields["environment"], r.fields["scope"]) for r in rows] == [
        ("gpt3_tp2", "dev", "mr"), ("gpt3_tp2", "dev", "nightly"), ("gpt3_tp2", "lts", "mr"),
        ("gpt3_tp2", "lts", "nightly"), ("gpt3_broken", "dev", "mr-broken"),
        ("gpt3_new_assert", "dev", "mr-github")]
    assert rows[0].fields["platforms"] == "dgx_h100" and rows[4].fields["platforms"] == "dgx_a100"
    assert rows[0].variables == {  # a field templated of fields (`name`) is filled too
        "DATA_PATH": "/mnt/artifacts", "CHECKPOINT_LOAD_PATH": "/mnt/artifacts/model/gpt3_tp2_dev_dgx_h100",
        "TENSORBOARD_PATH": "/workspace/assets/tensorboard", "TRAINING_SCRIPT_PATH": "pretrain_gpt.py",
        "TRAINING_PARAMS_PATH": "./tests/functional_tests/test_cases/gpt/gpt3_tp2/model_config.yaml"}


def test_cases_by_scope_one_suite_per_command_line_and_why_the_rest_are_not_captured() -> None:
    files = {"tests/test_utils/recipes/h100/gpt.yaml": RECIPE,
             "tests/test_utils/recipes/h100/perf.yaml": RECIPE.replace("TRAINING_PARAMS_PATH", "OTHER")
             .replace("gpt3_", "perf_"),
             "tests/functional_tests/test_cases/gpt/gpt3_tp2/model_config.yaml": TP2}
    listing = list_cases(YamlArgs.model_validate(RECIPE_POLICY), sorted(files), files.__getitem__)
    suite, lts = listing.suites  # mr and nightly: one command line; dev and lts load their own checkpoints
    assert lts.argv[3] == "/mnt/artifacts/model/gpt3_tp2_lts_dgx_h100"
    assert (suite.id, suite.entry, suite.case) == (
        "gpt/gpt3_tp2", "pretrain_gpt.py", "tests/functional_tests/test_cases/gpt/gpt3_tp2/model_config.yaml")
    assert suite.argv == ("--tensor-model-parallel-size", "2", "--load",
                          "/mnt/artifacts/model/gpt3_tp2_dev_dgx_h100", "--tensorboard-dir",
                          "/workspace/assets/tensorboard", "--bf16")
    assert suite.env == {"WORLD_SIZE": "8", "NCCL_ALGO": "Ring"}
    assert listing.disabled == ["gpt/gpt3_broken (scope mr-broken)", "gpt/perf_broken (scope mr-broken)"]
    assert listing.not_considered == []
    assert [case for case, _ in listing.failed] == ["gpt/gpt3_new_assert"]  # its file is not in the tree
    assert [case for case, _ in listing.no_entry] == ["gpt/perf_new_assert", "gpt/perf_tp2"]
    assert (listing.cases, listing.captured) == (4, 1)
    # a scope CI runs (by its name) that the policy does not list: not considered, which is not what CI skips
    narrower = YamlArgs.model_validate({**RECIPE_POLICY, "scopes": ["mr", "nightly"]})
    listing = list_cases(narrower, sorted(files), files.__getitem__)
    assert listing.not_considered == ["gpt/gpt3_new_assert (scope mr-github)",
                                      "gpt/perf_new_assert (scope mr-github)"]
    assert listing.disabled == ["gpt/gpt3_broken (scope mr-broken)", "gpt/perf_broken (scope mr-broken)"]


def test_the_builtin_megatron_policy_loads_and_is_picked_by_repository_name() -> None:
    path = builtin_policy("NVIDIA", "Megatron-LM")
    assert path.name == "Megatron-LM.yml"
    [source] = load_policy(path).matrix.sources
    assert isinstance(source, YamlArgs) and source.map == "MODEL_ARGS"


ARGUMENTS = '''
import argparse
import os


def set_global_variables(args):
    assert not getattr(set_global_variables, "done", False), "args is already initialized."
    set_global_variables.done = True


def parse_and_validate_args(extra_args_provider=None, args_defaults={}):
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--tensor-model-parallel-size", type=int, default=1)
    parser.add_argument("--load")
    parser.add_argument("--tensorboard-dir")
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    args = parser.parse_args()
    args.world_size = int(os.getenv("WORLD_SIZE", "1"))
    validate_args(args)
    set_global_variables(args)
    return args


def validate_args(args):
    assert args.world_size % args.tensor_model_parallel_size == 0, "world size"
'''
# The entry script passes its own provider (`--bf16` is its flag), then would train: never reached.
PRETRAIN = '''
from megatron.training.arguments import parse_and_validate_args


def add_precision_args(parser):
    parser.add_argument("--bf16", action="store_true")
    return parser


if __name__ == "__main__":
    args = parse_and_validate_args(extra_args_provider=add_precision_args)
    raise SystemExit("training starts here")
'''


def twin(root: Path, arguments: str) -> Path:
    files = {"tests/test_utils/recipes/h100/gpt.yaml": RECIPE,
             "tests/functional_tests/test_cases/gpt/gpt3_tp2/model_config.yaml": TP2,
             "tests/functional_tests/test_cases/gpt/gpt3_new_assert/model_config.yaml":
                 TP2.replace("--bf16: true", "--bf16: true\n  --tensorboard-dir: /tmp/tb"),
             "megatron/__init__.py": "", "megatron/training/__init__.py": "",
             "megatron/training/arguments.py": arguments, "pretrain_gpt.py": PRETRAIN,
             "tools/no_validation.py": "print('nothing validated')\n"}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def recipe_check(tmp_path: Path, scopes: list[str]) -> CheckReport:
    """The twin's check of a head adding an assert that rejects gpt3_new_assert (scope mr-github), with the
    policy's SCOPES."""
    source = {**RECIPE_POLICY, "scopes": scopes}
    policy = parse_policy(
        "version: 1\n"
        "validation:\n"
        "  paths: ['megatron/training/**']\n"
        "  entry: 'megatron.training.arguments:parse_and_validate_args'\n"
        "  run_entry_script: true\n"  # pretrain_gpt.py's provider defines --bf16
        "  replace:\n"  # what the built-in policy does: global state is set after validation, not by it
        "    - {target: 'megatron.training.arguments:set_global_variables', with: return_value, value: null,"
        " only_if_missing: false}\n"
        f"matrix:\n  sources: [{source!r}]\n".replace("'", '"'), "twin")
    head = ARGUMENTS + '    assert not (args.bf16 and args.tensorboard_dir.startswith("/tmp")), "tb"\n'
    return run_check(twin(tmp_path / "base", ARGUMENTS), twin(tmp_path / "head", head), policy,
                     base_sha=None, head_sha=None, cache_dir=tmp_path / "cache", allow_unsandboxed=False)


def test_twin_end_to_end_a_new_assert_blocks_the_suites_it_rejects(tmp_path: Path) -> None:
    report = recipe_check(tmp_path, ["mr", "mr-github", "nightly"])
    assert [s.id for s in report.matrix.suites] == ["gpt/gpt3_new_assert", "gpt/gpt3_tp2", "gpt/gpt3_tp2#2"]
    assert all(r.outcome.outcome == "accepted" for r in report.base.values())
    [finding] = report.findings
    assert (finding.kind, finding.severity, finding.suites) == (
        "new_rejection", "blocking", ("gpt/gpt3_new_assert",))
    assert report.health is not None and report.health.not_considered == ()
    assert report.health.disabled == ("gpt/gpt3_broken (scope mr-broken)",)


def test_a_scope_the_policy_leaves_out_is_listed_as_not_considered(tmp_path: Path) -> None:
    """Written after NVIDIA/Megatron-LM's history: a change exited 0 while the suites it broke belonged to a
    CI scope the policy left out, listed among the disabled (what CI skips) if at all."""
    report = recipe_check(tmp_path, ["mr", "nightly"])
    assert [s.id for s in report.matrix.suites] == ["gpt/gpt3_tp2", "gpt/gpt3_tp2#2"]
    assert [f for f in report.findings if f.severity == "blocking"] == []
    assert report.health is not None
    assert report.health.not_considered == ("gpt/gpt3_new_assert (scope mr-github)",)
    assert report.health.to_json()["scripts"]["not_considered"] == ["gpt/gpt3_new_assert (scope mr-github)"]
    assert report_json(report)["capture"]["not_considered"] == ["gpt/gpt3_new_assert (scope mr-github)"]
    text = render(report, "text")
    assert "health: 2 suites from 1 of 3 scripts (1 disabled, 1 not considered); base accepts 2/2" in text
    assert ("not considered: 1 case CI may run, which the policy leaves out (never replayed): "
            "gpt/gpt3_new_assert (scope mr-github)") in text


def test_entry_scripts_own_flags_count_and_one_that_never_calls_the_entry_is_rejected(tmp_path: Path) -> None:
    repo = twin(tmp_path / "repo", ARGUMENTS)
    policy = {"validation": {"entry": "megatron.training.arguments:parse_and_validate_args",
                             "run_entry_script": True,
                             "replace": [{"target": "megatron.training.arguments:set_global_variables",
                                          "with": "return_value", "value": None, "only_if_missing": False}]},
              "harness": {"limits": {"suite_seconds": 20}}}
    suites = [{"id": "gpt", "script": "r", "argv": ["--bf16"], "env": {}, "entry": "pretrain_gpt.py"},
              {"id": "tool", "script": "r", "argv": [], "env": {}, "entry": "tools/no_validation.py"},
              {"id": "tp3", "script": "r", "argv": ["--tensor-model-parallel-size", "3"],
               "env": {"WORLD_SIZE": "8"}, "entry": "pretrain_gpt.py"}]
    found = results(run_sandboxed(repo, job(suites, policy)))
    assert found["gpt"].outcome == Outcome("accepted")  # training after validation never ran
    tool = found["tool"].outcome
    assert (tool.outcome, tool.exception) == ("rejected", "EntryNotCalled")
    assert tool.message == "no_validation.py ended without calling " \
        "megatron.training.arguments:parse_and_validate_args"
    tp3 = found["tp3"].outcome
    assert (tp3.exception, tp3.message, tp3.path) == ("AssertionError", "world size",
                                                      "megatron/training/arguments.py")


def test_world_size_is_nodes_times_the_gpus_per_node_exported_else_the_runners_default() -> None:
    gb200 = RECIPE.replace("  nodes: 1\n  gpus: 8\n", "  nodes: 3\n  gpus: 4\n").replace(
        "    cd /opt/megatron-lm\n", "    cd /opt/megatron-lm\n    export GPUS_PER_NODE={gpus}\n")
    source = YamlArgs.model_validate({**RECIPE_POLICY, "recipe_variables": ["GPUS_PER_NODE"]})
    for recipe, world_size in [(gb200, "12"), (RECIPE.replace("  gpus: 8\n", "  gpus: 1\n"), "8")]:
        files = {"tests/test_utils/recipes/r.yaml": recipe,
                 "tests/functional_tests/test_cases/gpt/gpt3_tp2/model_config.yaml": TP2}
        listing = list_cases(source, sorted(files), files.__getitem__)
        assert {s.env["WORLD_SIZE"] for s in listing.suites} == {world_size}


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=" \t\r\n\x0b'\"\\abc=-_.é$()[]", max_size=30))
def test_the_runner_s_xargs_trim_is_shlex_s_whatever_the_value(text: str) -> None:
    try:
        expected = " ".join(shlex.split(text, posix=True))
    except ValueError:
        expected = ""  # an unmatched quote: xargs prints nothing
    assert _xargs_trim(text) == expected


PLAIN_DOCUMENTS = [
    "a: 1\nb: '2'\nc: \"x y\"\nd: |\n  block\ne: >\n  folded\nf: ~\ng: null\nh:\ni: true\nj: False\n",
    "base: &b\n  k: 1\n  l: two\nderived:\n  <<: *b\n  l: own\n'<<': quoted key\n",
    "- 1.0e-4\n- [a, 'b', \"c\"]\n- {x: yes, y: NO}\n- 0x1F\n- 1_000\n",
    "MODEL_ARGS:\n  --lr: 6.0e-5\n  --bf16: true\n  --spec: \"[a b]\"\n  --empty: ''\n",
]


@pytest.mark.parametrize("text", PLAIN_DOCUMENTS)
def test_libyaml_reads_a_document_as_the_pure_python_parser_does(text: str, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    assert yaml_plain.SAFE_LOADER is yaml.CSafeLoader  # PyYAML's wheels carry libyaml: the fast path runs
    fast = compose_plain(text)
    monkeypatch.setattr(yaml_plain, "SAFE_LOADER", yaml.SafeLoader)
    assert compose_plain(text) == fast
