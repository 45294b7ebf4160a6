"""`prtriage init`: a starter policy detected from a tree, refined by doctor rounds.

Detection is pinned on small trees of each shape the real repositories have (miles' registered scripts,
slime's workflow rows, torchtitan's definitions and launcher); the whole command runs on the miles twin in
the real sandbox and must see most of what the twin's hand-written policy sees (tests/realworld has the
same on the real miles).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from twin.cli import prtriage
from twin.miles import build_miles_twin
from twin.stubbed_config_type import (
    DISTRIBUTION,
    LOADER,
    MANAGER,
    MODULE,
    PACKAGE_SOURCE,
    VERSION,
    build_stubbed_config_twin,
)

from app.analysis.core.model import CaptureFailure, Matrix, Outcome, Suite, SuiteResult
from app.analysis.core.policy import parse_policy
from app.analysis.starter.starter import LAUNCHED_SCRIPT, detect, refine, render
from app.analysis.starter.starter_tree import NoValidator, Starter, requirements_for
from app.analysis.verdict.health import assess

TWIN_POLICY = Path(__file__).parent / "twin" / "policy.yml"
OPTIONS = "\n".join(f"    parser.add_argument('--option-{i}', type=int, default={i})" for i in range(12))


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def argparse_validator(package: str, extra: str = "") -> dict[str, str]:
    return {
        f"{package}/__init__.py": "",
        f"{package}/utils/__init__.py": "",
        f"{package}/utils/arguments.py": f"""\
import argparse
{extra}

def parse_args():
    parser = argparse.ArgumentParser()
{OPTIONS}
    args = parser.parse_args()
    return args


def {package}_validate_args(args):
    assert args.option_1 >= 0
""",
        "train.py": f"from {package}.utils.arguments import parse_args\n\nparse_args()\n",
    }


def test_registered_scripts_shape(tmp_path: Path) -> None:
    files = argparse_validator("kite")
    registered = "from tests.ci.register import register_cuda_ci\nregister_cuda_ci(1, 's')\n"
    files |= {
        "tests/ci/register.py": "def register_cuda_ci(est_time, suite, disabled=None):\n    pass\n",
        "tests/e2e/short/test_a.py": registered,
        "tests/e2e/long/test_b.py": registered,
        "tests/unit/test_c.py": "def test_c():\n    pass\n",
    }
    starter = detect(write(tmp_path, files))
    validation = starter.policy["validation"]
    assert validation["entry"] == "kite.utils.arguments:parse_args"
    assert validation["functions"] == ["kite.utils.arguments:kite_validate_args"]
    assert validation["paths"] == ["kite/utils/arguments.py", "train.py"]
    assert "replace" not in validation  # no Megatron, no HF config
    [source] = starter.policy["matrix"]["sources"]
    assert source["kind"] == "record_launches"
    assert source["scripts"] == ["tests/e2e/**/test_*.py"]
    assert source["registration"] == {"function": "tests.ci.register:register_cuda_ci",
                                      "disabled_kwarg": "disabled", "suite_kwarg": "suite"}
    assert source["entry"] == r"(^|/)(train)\.py$"
    assert source["env_from"] == ["exported"]  # no job submitted to Ray in this tree
    assert "2 scripts under tests/e2e/" in starter.why["matrix.sources[0]"]
    parse_policy(render(starter), "starter")  # the policy language accepts what init writes


def test_workflow_rows_shape_and_megatron_based_validator(tmp_path: Path) -> None:
    extra = "from megatron.training.arguments import parse_args as megatron_parse_args\n" \
            "from transformers import AutoConfig\nAutoConfig.from_pretrained"
    files = argparse_validator("wren", extra)
    files["wren/utils/arguments.py"] += textwrap.dedent("""\
        def parse_all():
            from wren.backends.engine_args import validate_args as engine_validate_args
            from wren.backends.server_args import validate_args as server_validate_args
            engine_validate_args(None)
        """)
    files |= {
        "wren/backends/__init__.py": "",
        "wren/backends/engine_args.py": "def validate_args(args):\n    pass\n",
        "wren/backends/server_args.py": "def validate_args(args):\n    pass\n",
        "tests/test_tiny_run.py": "import os\nJOB = ['ray', 'job', 'submit', '--runtime-env-json']\n",
        ".github/workflows/pr-test.yml": """\
            on: pull_request
            jobs:
              e2e:
                strategy:
                  matrix:
                    info:
                      - {num_gpus: 4, test_file: test_tiny_run.py}
                      - {num_gpus: 4, test_file: test_tiny_run.py}
                      - {num_gpus: 2, test_file: test_tiny_run.py, test_args: --fast}
              generated:
                strategy:
                  matrix: ${{ fromJson(needs.plan.outputs.matrix) }}
            """,
    }
    starter = detect(write(tmp_path, files))
    validation = starter.policy["validation"]
    # the engine's validator is called in the entry module's own flow: it runs there, not listed again
    assert validation["functions"] == ["wren.utils.arguments:wren_validate_args",
                                       "wren.backends.server_args:validate_args"]
    assert validation["paths"] == ["wren/utils/arguments.py", "wren/backends/server_args.py",
                                   "wren/backends/engine_args.py", "train.py"]
    replaced = [r["target"] for r in validation["replace"]]
    assert replaced == ["megatron.training.arguments:parse_args", "transformers:AutoConfig.from_pretrained"]
    assert validation["replace"][1]["from_args"]["num_hidden_layers"] == "num_layers"
    assert validation["attribute_defaults"]["tensor_model_parallel_size"] == 1
    [source] = starter.policy["matrix"]["sources"]
    assert (source["kind"], source["script"], source["args"], source["script_dir"]) == \
        ("workflow_rows", "info.test_file", "info.test_args", "tests")
    assert source["workflows"] == [".github/workflows/pr-test.yml"]
    assert source["env_from"] == ["runtime_env_json"]  # its environment travels with the Ray job


def test_python_definitions_shape(tmp_path: Path) -> None:
    files = {
        "kestrel/__init__.py": "",
        "kestrel/config/__init__.py": "",
        "kestrel/config/manager.py": """\
            import tyro

            class ConfigManager:
                def parse_args(self, args):
                    return tyro.cli(dict, args=args)
            """,
        "kestrel/train.py": "from kestrel.config.manager import ConfigManager\n",
        "run_train.sh": """\
            MODULE=${MODULE:-"llama"}
            CONFIG=${CONFIG:-"llama_debug"}
            torchrun --nproc_per_node=8 -m kestrel.train --module ${MODULE} --config ${CONFIG} "$@"
            """,
        "tests/integration_tests/__init__.py": """\
            from dataclasses import dataclass

            @dataclass
            class OverrideDefinitions:
                override_args: tuple = ()
                test_name: str = "default"
                disabled: bool = False
                configs: tuple = ()
            """,
        "tests/integration_tests/features.py": """\
            from tests.integration_tests import OverrideDefinitions

            def build_features_test_list():
                return [OverrideDefinitions([["--compile"]], test_name="compile")]

            def helper():
                return 1
            """,
        "tests/integration_tests/run_tests.py": """\
            def command(fn, output_dir, test_name):
                dump_folder_arg = f"--dump_folder {output_dir}/{test_name}"
                return f"MODULE={fn.__module__} CONFIG={fn.__name__} ./run_train.sh " + dump_folder_arg
            """,
        "kestrel/tools/utils.py": "def has_cuda_capability(major, minor):\n    return False\n",
        ".github/workflows/features.yaml": """\
            jobs:
              test:
                steps:
                  - run: python -m tests.integration_tests.run_tests $RUNNER_TEMP/out --ngpu 8
            """,
    }
    starter = detect(write(tmp_path, files))
    assert starter.policy["validation"]["entry"] == "kestrel.config.manager:ConfigManager.parse_args"
    assert starter.policy["validation"]["paths"] == ["kestrel/config/**"]
    [source] = starter.policy["matrix"]["sources"]
    assert source["functions"] == ["tests.integration_tests.features:build_features_test_list"]
    assert (source["name"], source["disabled"], source["runs"], source["shell_words"]) == \
        ("test_name", "disabled", "override_args", True)
    assert source["entry"] == "kestrel/train.py"
    assert source["args"] == ["--module", "{configs.__module__}", "--config", "{configs.__name__}",
                              "--dump_folder", "/home/runner/_work/_temp/out/{definition.test_name}"]
    assert source["env"] == {"RUNNER_TEMP": "/home/runner/_work/_temp"}
    assert starter.policy["validation"]["replace"] == [  # the GPU's answer on CI
        {"target": "kestrel.tools.utils:has_cuda_capability", "with": "return_value", "value": True,
         "only_if_missing": False}]
    assert source["defaults"] == {"configs.__module__": "llama", "configs.__name__": "llama_debug"}
    parse_policy(render(starter), "starter")


def test_with_no_validator_but_a_ci_source_each_launch_runs_to_its_boundary(tmp_path: Path) -> None:
    # NeMo RL-shaped: a pydantic config checked in setup(), no argparse validator to name
    registered = ("import subprocess\nfrom tests.ci.register import register_cuda_ci\n"
                  "register_cuda_ci(1, 's')\nsubprocess.run(['python3', 'examples/run_grpo.py'])\n")
    files = {
        "examples/run_grpo.py": "from pydantic import BaseModel\n\nclass MasterConfig(BaseModel):\n"
                                "    num_gpus: int\n",
        "tests/ci/register.py": "def register_cuda_ci(est_time, suite, disabled=None):\n    pass\n",
        "tests/e2e/test_grpo.py": registered,
    }
    starter = detect(write(tmp_path, files))
    assert starter.policy["validation"] == {"mode": "boundary"}
    assert starter.why["validation.mode"].startswith("no command-line validator found")
    [source] = starter.policy["matrix"]["sources"]
    assert (source["kind"], source["entry"]) == ("record_launches", LAUNCHED_SCRIPT)
    policy = parse_policy(render(starter), "starter")
    assert policy.validation.to_boundary and policy.validation.path_globs == ["**/*.py"]


def test_no_validator_says_what_it_looked_for(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/cli.py": "import argparse\n\ndef parse_args():\n    return None\n"})
    with pytest.raises(NoValidator, match="no module-level parse_args with at least 10"):
        detect(tmp_path)


def test_refine_adds_what_the_errors_ask_for(tmp_path: Path) -> None:
    files = argparse_validator("kite", "from transformers import AutoConfig\nAutoConfig.from_pretrained")
    files |= {"tests/ci/register.py": "def register_gpu_ci(disabled=None):\n    pass\n",
              "tests/e2e/test_a.py": "register_gpu_ci()\n",
              "kite/check.py": "def check(args):\n    if args.engine_dp_size > 1:\n        pass\n"}
    starter = detect(write(tmp_path, files))
    suite = Suite("tests/e2e/test_a.py", "tests/e2e/test_a.py",
                  ("--hf-checkpoint", "/root/models/Qwen3-4B", "--save", "/dev/shm/ckpt", "--log", "/tmp/x"))
    none = Outcome("error", "TypeError", "'>' not supported between instances of 'NoneType' and 'int'",
                   "kite/check.py", 2)
    matrix = Matrix((suite,), scripts=2, captured=1,
                    failed=(CaptureFailure("tests/e2e/test_b.py",
                                           "OSError: [Errno 30] Read-only file system: '/node_public'"),))
    health = assess(matrix, {suite.id: SuiteResult(suite.id, none)}, {}, {})
    refined = refine(starter, matrix.suites, health, tmp_path)
    harness = refined.policy["harness"]
    assert harness["existing_path_prefixes"] == ["/dev/shm/", "/node_public/", "/root/"]  # never /tmp
    assert harness["fixtures"] == [{"path": "/root/models/*/config.json", "name": "hf_config",
                                    "content": harness["fixtures"][0]["content"]}]
    assert refined.policy["validation"]["attribute_defaults"] == {"engine_dp_size": 1}
    assert len(refined.rounds[-1]) == 3
    again = refine(refined, matrix.suites, health, tmp_path)
    assert again.rounds[-1] == []  # nothing more: the rounds stop
    assert starter.policy["harness"].get("existing_path_prefixes") is None  # refine copies


def test_init_on_the_twin_sees_most_of_what_its_policy_sees(tmp_path: Path, prtriage_cache: Path) -> None:
    tree = build_miles_twin(tmp_path / "twin")
    hand = prtriage("doctor", "--tree", str(tree), "--policy", str(TWIN_POLICY), "--format", "json",
                    cache_dir=prtriage_cache)
    assert hand.returncode == 0, hand.describe()
    output = tmp_path / "starter.yml"
    run = prtriage("init", "--tree", str(tree), "--output", str(output), "--format", "json",
                   cache_dir=prtriage_cache)
    assert run.returncode == 0, run.describe()
    report, written = run.json(), output.read_text()
    expected = hand.json()["health"]
    assert report["health"]["suites"] >= 0.8 * expected["suites"], (report["health"], expected["suites"])
    assert report["health"]["base"]["accepted_share"] == expected["base"]["accepted_share"] == 1.0
    assert report["rounds"][0], "the first round adds the CI hosts' directories and the HF config fixture"
    assert report["rounds"][-1] == []
    assert yaml.safe_load(written) == report["policy"]
    assert "# miles/utils/arguments.py defines parse_args over" in written
    parse_policy(written, str(output))
    again = prtriage("init", "--tree", str(tree), "--output", str(output), cache_dir=prtriage_cache)
    assert again.returncode == 2 and "exists; give --force" in again.stderr, again.describe()


@pytest.mark.parametrize(("arguments", "message"), [
    (["--rounds", "0"], "--rounds must be 1-10"),
    (["--policy", "x.yml"], "--policy does not go with it"),
])
def test_init_bad_usage(tmp_path: Path, arguments: list[str], message: str) -> None:
    run = prtriage("init", "--tree", str(tmp_path), *arguments, cache_dir=tmp_path / "cache")
    assert run.returncode == 2 and message in run.stderr, run.describe()


def test_init_on_a_tree_without_a_ci_source_writes_the_file_and_exits_3(tmp_path: Path) -> None:
    """OpenRLHF/OpenRLHF: its one workflow builds a wheel and launches nothing, so no source is detected;
    the file is written all the same (README: on every exit but bad usage), with no source and the
    reason, a valid policy to fill in, and the next step names it."""
    write(tmp_path / "tree", {"README.md": "nothing here\n", "kite/config.py": "import yaml\n",
                              ".github/workflows/wheel.yml": "on: push\njobs:\n  build:\n    steps:\n"
                                                             "    - run: python setup.py bdist_wheel\n"})
    output = tmp_path / "out.yml"
    run = prtriage("init", "--tree", str(tmp_path / "tree"), "--output", str(output),
                   cache_dir=tmp_path / "cache")
    assert run.returncode == 3 and "no command-line validator found" in run.stderr, run.describe()
    assert f"wrote {output}" in run.stdout and f"--policy {output}" in run.stdout, run.describe()
    text = output.read_text()
    assert "sources: []" in text and "no CI source any kind of source detects" in text
    policy = parse_policy(text, str(output))
    assert policy.matrix.sources == [] and policy.validation.to_boundary
    assert "yaml" in policy.harness.real_packages  # the configuration stack the tree imports
    again = prtriage("init", "--tree", str(tmp_path / "tree"), "--output", str(output), "--force",
                     "--format", "json", cache_dir=tmp_path / "cache")
    document = json.loads(again.stdout)
    assert again.returncode == 3 and document["error"]["kind"] == "analysis", again.describe()
    assert document["policy_file"] == str(output) and document["policy"]["matrix"] == {"sources": []}
    assert str(output.resolve()) in document["next"]


SERVER_INFO = '''\
import requests


def get_server_info(url: str, timeout: float = 30.0) -> dict:
    errors = []
    for endpoint in ("/server_info", "/get_server_info"):
        try:
            response = requests.get(f"{url}{endpoint}", timeout=timeout)
            return response.json()
        except Exception as exc:
            errors.append(f"{endpoint}: {exc}")
    raise RuntimeError(f"Failed to fetch server info from {url}: {'; '.join(errors)}")


def discover(addrs):
    return [get_server_info(addr) for addr in addrs]


def load_topology(url):
    response = requests.get(url)
    return response.json()


class Client:
    def ask(self, url) -> dict:
        raise ConnectionError("Connection refused")


def untyped(url):
    raise ConnectionError("Connection refused")
'''
REFUSED = ("/server_info: HTTPConnectionPool(host='10.0.0.1', port=30000): Max retries exceeded with url: "
           "/server_info (Caused by NewConnectionError: Failed to establish a new connection: [Errno 111] "
           "Connection refused)")


def _network_error(tmp_path: Path, marker: str, message: str = REFUSED) -> Outcome:
    line = next(n for n, text in enumerate(SERVER_INFO.splitlines(), 1) if marker in text)
    return Outcome("error", "RuntimeError", message, "kite/external.py", line)


def _refined_with(tmp_path: Path, error: Outcome) -> tuple[dict, list[str]]:
    files = argparse_validator("kite") | {"kite/external.py": SERVER_INFO,
                                          "tests/ci/register.py": "def register_gpu_ci():\n    pass\n",
                                          "tests/e2e/test_a.py": "register_gpu_ci()\n"}
    starter = detect(write(tmp_path, files))
    suite = Suite("tests/e2e/test_a.py", "tests/e2e/test_a.py", ("--option-1", "2"))
    matrix = Matrix((suite,), scripts=1, captured=1)
    health = assess(matrix, {suite.id: SuiteResult(suite.id, error)}, {}, {})
    refined = refine(starter, matrix.suites, health, tmp_path)
    return refined.policy["validation"], refined.rounds[-1]


def test_refine_answers_for_the_function_that_asked_a_server(tmp_path: Path) -> None:
    validation, changes = _refined_with(tmp_path, _network_error(tmp_path, "raise RuntimeError"))
    assert validation["replace"] == [{"target": "kite.external:get_server_info", "with": "return_value",
                                      "value": {}, "only_if_missing": False}]
    assert changes == ["validation.replace += kite.external:get_server_info returns {}"]


def test_an_unannotated_function_returning_json_answers_an_empty_object(tmp_path: Path) -> None:
    validation, _ = _refined_with(tmp_path, _network_error(tmp_path, "response = requests.get(url)"))
    assert validation["replace"] == [{"target": "kite.external:load_topology", "with": "return_value",
                                      "value": {}, "only_if_missing": False}]


@pytest.mark.parametrize(("marker", "message"), [
    ("raise RuntimeError", "Failed to fetch server info: invalid JSON"),  # no network failure
    ('raise ConnectionError("Connection refused")\n\n\ndef untyped', REFUSED),  # a method reading self
])
def test_refine_leaves_what_it_cannot_tell_to_the_user(tmp_path: Path, marker: str, message: str) -> None:
    line = next(n for n, text in enumerate(SERVER_INFO.splitlines(), 1) if marker.split("\n")[0] in text)
    error = Outcome("error", "RuntimeError", message, "kite/external.py", line)
    validation, changes = _refined_with(tmp_path, error)
    assert "replace" not in validation and changes == []


def test_an_unannotated_function_without_json_is_left_to_the_user(tmp_path: Path) -> None:
    lines = SERVER_INFO.splitlines()
    line = len(lines)  # untyped's raise: the last line
    assert "raise ConnectionError" in lines[line - 1]
    validation, changes = _refined_with(tmp_path, Outcome("error", "ConnectionError", "Connection refused",
                                                          "kite/external.py", line))
    assert "replace" not in validation and changes == []


# Megatron-LM's shape: the validator is in the tree (parse_args with its options, then validate_args, then a
# once-per-process set_global_variables), top-level entry scripts call it with their own providers, recipes
# under tests/ hand a case file and an entry script to a shell runner.
MEGATRON_ARGUMENTS = f'''\
import argparse
import os

from megatron.training.global_vars import set_global_variables
from megatron.training.utils import get_device_arch_version
from megatron.training.versions import is_te_min_version


def parse_and_validate_args(extra_args_provider=None, args_defaults={{}}):
    args = parse_args(extra_args_provider)
    validate_args(args, args_defaults)
    set_global_variables(args)
    return args


def parse_args(extra_args_provider=None):
    parser = argparse.ArgumentParser(allow_abbrev=False)
{OPTIONS}
    parser.add_argument("--tensor-model-parallel-size", type=int, default=1)
    parser.add_argument("--load")
    parser.add_argument("--tensorboard-dir")
    parser.add_argument("--fp8", action="store_true")
    parser.add_argument("--train-iters", type=int)
    parser.add_argument("--exit-interval", type=int)
    parser.add_argument("--seed", type=int, default=1234)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    args = parser.parse_args()
    args.world_size = int(os.getenv("WORLD_SIZE", "1"))
    args.rank = int(os.getenv("RANK", "0"))
    return args


def validate_args(args, defaults={{}}):
    assert args.world_size % args.tensor_model_parallel_size == 0, "world size"
    if args.fp8 and get_device_arch_version() < 9:
        raise ValueError("fp8 needs Hopper")
    assert not args.fp8 or is_te_min_version("2.0"), "fp8 needs TE 2.0"
'''
GLOBAL_VARS = '''\
_GLOBAL_ARGS = None


def _ensure_var_is_not_initialized(var, name):
    assert var is None, f"{name} is already initialized."


def set_global_variables(args):
    global _GLOBAL_ARGS
    _ensure_var_is_not_initialized(_GLOBAL_ARGS, "args")
    _GLOBAL_ARGS = args
'''
ENTRY_SCRIPT = '''\
from megatron.training.arguments import parse_and_validate_args


def add_{name}_args(parser):
    parser.add_argument("--bf16", action="store_true")
    return parser


if __name__ == "__main__":
    args = parse_and_validate_args(extra_args_provider=add_{name}_args)
    raise SystemExit("training starts here")
'''
RUN_CI_TEST = '''\
MODE=$(cat $TRAINING_PARAMS_PATH |
    /usr/local/bin/yq '.MODE // "pretraining"')
TEST_TYPE=$(cat $TRAINING_PARAMS_PATH |
    /usr/local/bin/yq '.TEST_TYPE')
TEST_TYPES=("regular" "ckpt-resume" "release")
if [[ "$MODE" == "pretraining" && "$TEST_TYPE" != "release" ]]; then
    if [[ "$LIGHTWEIGHT" == "true" ]]; then
        /usr/local/bin/yq -i '.MODEL_ARGS."--exit-interval" = 4' $TRAINING_PARAMS_PATH
    elif [[ "$LIGHTWEIGHT" == "false" ]]; then
        /usr/local/bin/yq -i '.MODEL_ARGS."--exit-interval" = .MODEL_ARGS."--train-iters"' $PARAMS
    fi
fi
for i in $(seq 1 $N_REPEAT); do
    export REPEAT=$i
    export RUN_NUMBER=1
    bash $(dirname $0)/_run_training.sh
done
'''
RUN_TRAINING = '''\
cat $TRAINING_PARAMS_PATH | envsubst >$TRAINING_PARAMS_PATH.tmp
NUM_NODES=${NUM_NODES:-${SLURM_NNODES:-1}}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
mkdir -p $DATA_PATH
python -m torch.distributed.run --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES \\
    $TRAINING_SCRIPT_PATH "${PARAMS[@]}"
'''


def megatron_shaped(root: Path) -> Path:
    from test_yaml_args import RECIPE, TP2

    case = TP2.replace("--bf16: true", "--bf16: true\n  --train-iters: 10\n  --seed: ${REPEAT}")
    runner = "tests/functional_tests/shell_test_utils"
    return write(root, {
        "megatron/__init__.py": "", "megatron/training/__init__.py": "",
        "megatron/training/arguments.py": MEGATRON_ARGUMENTS,
        "megatron/training/global_vars.py": GLOBAL_VARS,
        "megatron/training/utils/__init__.py":
            "from megatron.training.utils.common import get_device_arch_version\n",
        "megatron/training/utils/common.py": "def get_device_arch_version():\n    import torch\n\n"
                                             "    return torch.cuda.get_device_properties(0).major\n",
        "megatron/training/models.py": "from typing import Any, override\n",
        "megatron/training/versions.py": "from importlib.metadata import version\n\n\n"
                                         "def is_te_min_version(wanted):\n"
                                         "    return version('transformer-engine') >= wanted\n",
        "uv.lock": '[[package]]\nname = "transformer-engine"\nversion = "2.17.1+4329ff84"\n',
        "pretrain_gpt.py": ENTRY_SCRIPT.format(name="gpt"),
        "pretrain_bert.py": ENTRY_SCRIPT.format(name="bert"),
        "tests/test_utils/recipes/h100/gpt.yaml": RECIPE,
        "tests/test_utils/recipes/_build.yaml": "type: build\nspec:\n  script: docker build .\n",
        "tests/functional_tests/test_cases/gpt/gpt3_tp2/model_config.yaml": case,
        "tests/functional_tests/test_cases/gpt/gpt3_new_assert/model_config.yaml":
            case + "MODEL_ARGS_2:\n  --load: /mnt/x\n  --train-iters: 20\n",
        f"{runner}/run_ci_test.sh": RUN_CI_TEST, f"{runner}/_run_training.sh": RUN_TRAINING,
    })


def test_entry_scripts_around_a_shared_validator_with_yaml_cases_shape(tmp_path: Path) -> None:
    starter = detect(megatron_shaped(tmp_path))
    validation = starter.policy["validation"]
    assert validation["entry"] == "megatron.training.arguments:parse_and_validate_args"
    assert validation["run_entry_script"] is True and validation["unknown_flags"] == "error"
    assert validation["paths"] == ["megatron/training/arguments.py", "megatron/training/global_vars.py",
                                   "megatron/training/utils/__init__.py", "megatron/training/versions.py",
                                   "pretrain_bert.py", "pretrain_gpt.py"]
    assert "functions" not in validation  # the entry's own flow runs validate_args
    assert validation["replace"] == [
        {"target": "megatron.training.arguments:set_global_variables", "with": "return_value", "value": None,
         "only_if_missing": False},
        # re-exported by megatron/training/utils/__init__.py, defined in common.py; the recipe's GPU is H100
        {"target": "megatron.training.arguments:get_device_arch_version", "with": "return_value", "value": 9,
         "only_if_missing": False}]
    assert "asserts it runs once per process" in starter.why["validation.replace"]
    [source] = starter.policy["matrix"]["sources"]
    assert source == {
        "kind": "yaml_args", "recipes": ["tests/test_utils/recipes/h100/*.yaml"],
        "scopes": ["mr", "mr-github", "nightly"],  # mr-broken is not run
        "recipe_variables": ["CHECKPOINT_LOAD_PATH", "TENSORBOARD_PATH"],  # those the cases reference
        "fields": {"assets_dir": "/workspace/assets"},
        "config_variable": "TRAINING_PARAMS_PATH", "entry_variable": "TRAINING_SCRIPT_PATH",
        "checkout": "/opt/megatron-lm", "map": "MODEL_ARGS", "numbered_maps": True, "env_map": "ENV_VARS",
        # the runner's copy under its conditions on the case's own fields (its LIGHTWEIGHT mode: as if unset)
        "edits": [{"key": "--exit-interval", "from": "--train-iters",
                   "when": {"MODE": ["pretraining", None], "TEST_TYPE": ["regular", "ckpt-resume"]}}],
        # REPEAT: the first pass of the runner's `for i in $(seq 1 $N_REPEAT)` loop
        "variables": {"GPUS_PER_NODE": "8", "REPEAT": "1"},
        "env_products": {"WORLD_SIZE": ["nodes", "GPUS_PER_NODE"]},
        "env": {"RANK": "0"}}
    harness = starter.policy["harness"]
    # the version validation reads of a package absent here: the lock file's, local part dropped
    assert harness["stub_attributes"] == {"transformer_engine.__version__": "2.17.1"}
    if sys.version_info < (3, 12):
        assert harness["backports"] == {"typing.override": "typing_extensions:override"}
        # a plain install's analysis environment holds only the requirements: without typing_extensions
        # in them no backport applies (Megatron-LM: `cannot import name 'override' from 'typing'`)
        assert any(r.startswith("typing_extensions==") for r in harness["requirements"])
    else:
        assert "backports" not in harness
    parse_policy(render(starter), "starter")


def test_a_shared_validator_called_by_one_script_or_without_recipes_is_not_this_shape(tmp_path: Path) -> None:
    tree = megatron_shaped(tmp_path / "one")
    (tree / "pretrain_bert.py").unlink()
    with pytest.raises(NoValidator):  # then the big parse_args is the validator, and no CI source is known
        detect(tree)
    tree = megatron_shaped(tmp_path / "none")
    (tree / "tests/test_utils/recipes/h100/gpt.yaml").unlink()
    with pytest.raises(NoValidator):
        detect(tree)


def verl_shaped(root: Path) -> Path:
    from test_workflow_steps import VERL_SHAPED

    files = dict(VERL_SHAPED)
    files["setup.py"] = 'VLLM_REQUIRES = ["tensordict>=0.8.0", "vllm>=0.8.5,<=0.12.0"]\n'
    files["verl/trainer/config/model.yaml"] = "_target_: verl.workers.config.HFModelConfig\npath: ~/m\n"
    files["verl/workers/__init__.py"] = files["verl/workers/config/__init__.py"] = ""
    files["verl/workers/config/model.py"] = ("from transformers import AutoConfig\n\n\nclass HFModelConfig:\n"
                                             "    def __post_init__(self):\n"
                                             "        AutoConfig.from_pretrained(self.path)\n")
    return write(root, files)


def test_hydra_application_started_by_workflow_steps_shape(tmp_path: Path) -> None:
    starter = detect(verl_shaped(tmp_path))
    validation = starter.policy["validation"]
    assert validation["entry"] == "verl.trainer.main_ppo:main"
    assert validation["functions"] == ["verl.utils.config:validate_config"]
    assert validation["hydra"] == {"resolve": False, "checks": [
        {"function": "verl.utils.config:validate_config",
         "kwargs_from": {"use_critic": "verl.trainer.ppo.utils:need_critic"}}]}
    assert validation["paths"] == ["verl/trainer/main_ppo.py", "verl/trainer/config/**",
                                   "verl/trainer/ppo/utils.py", "verl/utils/config.py",
                                   "verl/workers/config/**"]
    assert [r["target"] for r in validation["replace"]] == ["transformers:AutoConfig.from_pretrained"]
    [source] = starter.policy["matrix"]["sources"]
    assert source["kind"] == "workflow_steps" and source["scripts"] == ["tests/special_e2e/**/*.sh"]
    # no step launches the transfer_queue copy; the SFT trainer the other script launches is no Hydra app
    assert source["entry"] == r"^(verl\.trainer\.main_ppo)$"
    assert source["env"] == {"HOME": "/root"}  # runs-on [L20x8]: a self-hosted runner
    assert "hydra" in starter.policy["harness"]["real_packages"]
    parse_policy(render(starter), "starter")


def test_the_hydra_shape_makes_hydra_real_even_where_init_runs_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # from a plain install (no Hydra beside prtriage) the verl-shaped starter stubbed hydra: every suite's
    # `@hydra.main` entry failed to import, 0% accepted
    import importlib.metadata

    from app.analysis.starter import starter_tree

    monkeypatch.setattr(starter_tree, "installed", lambda name: False)
    monkeypatch.setattr(importlib.metadata, "packages_distributions", lambda: {})
    root = verl_shaped(tmp_path)
    (root / "requirements.txt").write_text("hydra-core==1.3.2\n")
    starter = detect(root)
    assert starter.policy["validation"]["entry"] == "verl.trainer.main_ppo:main"
    assert "hydra" in starter.policy["harness"]["real_packages"]
    assert "hydra-core==1.3.2" in starter.policy["harness"]["requirements"]


def test_init_on_the_hydra_twin_sees_what_its_policy_sees(tmp_path: Path, prtriage_cache: Path) -> None:
    from test_workflow_steps import verl_shaped_policy

    tree = verl_shaped(tmp_path / "twin")
    hand = tmp_path / "hand.yml"
    hand.write_text(yaml.safe_dump(verl_shaped_policy()))
    expected = prtriage("doctor", "--tree", str(tree), "--policy", str(hand), "--format", "json",
                        cache_dir=prtriage_cache)
    assert expected.returncode == 0, expected.describe()
    run = prtriage("init", "--tree", str(tree), "--output", str(tmp_path / "starter.yml"), "--format", "json",
                   cache_dir=prtriage_cache)
    assert run.returncode == 0, run.describe()
    health, built = run.json()["health"], expected.json()["health"]
    assert health["suites"] == built["suites"] == 3, (health, built)
    assert health["base"]["accepted_share"] == built["base"]["accepted_share"] == 1.0
    rounds = run.json()["rounds"]
    assert "harness.fixtures += hf_config at /root/models/**/config.json" in rounds[0]
    assert "harness.stub_attributes.vllm.__version__ = '0.12.0'" in [c for r in rounds for c in r]


def test_init_on_the_megatron_twin_sees_what_its_policy_sees(tmp_path: Path, prtriage_cache: Path) -> None:
    from test_yaml_args import RECIPE_POLICY

    tree = megatron_shaped(tmp_path / "twin")
    hand = tmp_path / "hand.yml"
    hand.write_text(yaml.safe_dump({"version": 1, "validation": {
        "paths": ["megatron/training/**"], "entry": "megatron.training.arguments:parse_and_validate_args",
        "run_entry_script": True,
        "replace": [{"target": "megatron.training.arguments:set_global_variables", "with": "return_value",
                     "value": None, "only_if_missing": False}]},
        "matrix": {"sources": [{**RECIPE_POLICY, "variables": {"GPUS_PER_NODE": "8", "REPEAT": "1"}}]}}))
    expected = prtriage("doctor", "--tree", str(tree), "--policy", str(hand), "--format", "json",
                        cache_dir=prtriage_cache)
    assert expected.returncode == 0, expected.describe()
    run = prtriage("init", "--tree", str(tree), "--output", str(tmp_path / "starter.yml"), "--format", "json",
                   cache_dir=prtriage_cache)
    assert run.returncode == 0, run.describe()
    health, built = run.json()["health"], expected.json()["health"]
    assert health["suites"] == built["suites"] == 4, (health, built)  # gpt3_tp2 x2 rows, new_assert, #run2
    assert health["base"]["accepted_share"] == built["base"]["accepted_share"] == 1.0
    # nothing to add: the suites name CI hosts' directories (/mnt/artifacts), but no script runs on them, and
    # validation found what it read
    assert run.json()["rounds"] == [[]]


# Megatron-LM's Bert entries: `from ...bert_layer_specs import bert_layer_with_transformer_engine_spec` at
# import runs a module `__getattr__` that raises when the guarded `import transformer_engine` failed.
TE_EXTENSION = """\
try:
    import transformer_engine  # noqa: F401

    HAVE_TE = True
except ImportError:
    HAVE_TE = False
"""
BERT_SPECS = """\
from megatron.core.extensions.transformer_engine import HAVE_TE


def __getattr__(name):
    if name == "bert_layer_with_transformer_engine_spec":
        if not HAVE_TE:
            raise ImportError("Transformer Engine is not installed. "
                              "Please use local Bert layer spec instead.")
        return "te"
    raise AttributeError(name)
"""


def megatron_with_bert(root: Path) -> Path:
    from test_yaml_args import RECIPE

    tree = megatron_shaped(root)
    gpt = tree / "tests/functional_tests/test_cases/gpt"
    return write(tree, {
        "megatron/core/__init__.py": "", "megatron/core/extensions/__init__.py": "",
        "megatron/core/extensions/transformer_engine.py": TE_EXTENSION,
        "megatron/core/models/__init__.py": "", "megatron/core/models/bert_layer_specs.py": BERT_SPECS,
        "pretrain_bert.py": "from megatron.core.models.bert_layer_specs import "
                            "bert_layer_with_transformer_engine_spec\n" + ENTRY_SCRIPT.format(name="bert"),
        "tests/test_utils/recipes/h100/bert.yaml": RECIPE.replace("pretrain_gpt.py", "pretrain_bert.py")
        .replace("model: gpt", "model: bert").replace("gpt3_", "bert_"),
        **{f"tests/functional_tests/test_cases/bert/bert_{case}/model_config.yaml":
           (gpt / f"gpt3_{case}/model_config.yaml").read_text() for case in ("tp2", "new_assert")}})


def test_init_tells_ci_has_a_declared_package_a_base_failure_says_is_not_installed(
        tmp_path: Path, prtriage_cache: Path) -> None:
    # Megatron-LM from a plain install: 7 Bert suites rejected at "Transformer Engine is not installed",
    # the optional import absent here; uv.lock locks transformer-engine, which CI's image has
    tree = megatron_with_bert(tmp_path / "twin")
    run = prtriage("init", "--tree", str(tree), "--output", str(tmp_path / "starter.yml"), "--format", "json",
                   cache_dir=prtriage_cache)
    assert run.returncode == 0, run.describe()
    health, rounds = run.json()["health"], run.json()["rounds"]
    assert health["suites"] == 8 and health["base"]["accepted_share"] == 1.0, health
    assert rounds[0] == ["harness.ci_has += transformer_engine (transformer-engine: "
                         "megatron/core/models/bert_layer_specs.py:7 says it is not installed; the tree's "
                         "dependency files ask for it)"], rounds
    written = yaml.safe_load((tmp_path / "starter.yml").read_text())["harness"]
    assert written["ci_has"] == ["transformer_engine"]
    assert written["stub_attributes"]["transformer_engine.__version__"] == "2.17.1"


# torchtitan's workflows install torchao (`USE_CPP=0 python -m pip install --pre torchao --index-url ...` in
# the `script:` input of pytorch/test-infra's reusable linux_job_v2.yml); no dependency file names it
CI_INSTALLS_TE = """\
on: pull_request
jobs:
  gpu:
    uses: some-org/infra/.github/workflows/linux_job.yml@main
    with:
      runner: linux.g5.4xlarge.nvidia.gpu
      script: |
        set -eux
        pip install --force-reinstall --pre torch --index-url ${{ matrix.index-url }}
        USE_CPP=0 python -m pip install --pre "transformer_engine[pytorch]==2.17.1" \\
          --index-url ${{ matrix.index-url }}
        bash tests/functional_tests/shell_test_utils/run_ci_test.sh
"""


def test_init_tells_ci_has_a_package_ci_workflows_install_a_base_failure_says_is_not_installed(
        tmp_path: Path, prtriage_cache: Path) -> None:
    # torchtitan from a plain install: 4 suites rejected at "torchao is not installed" (float8.py:78), the
    # optional import absent here, which CI's workflows install and its dependency files do not name
    tree = megatron_with_bert(tmp_path / "twin")
    write(tree, {"uv.lock": '[[package]]\nname = "numpy"\nversion = "2.1.0"\n',
                 ".github/workflows/functional.yml": CI_INSTALLS_TE})
    run = prtriage("init", "--tree", str(tree), "--output", str(tmp_path / "starter.yml"), "--format", "json",
                   cache_dir=prtriage_cache)
    assert run.returncode == 0, run.describe()
    health, rounds = run.json()["health"], run.json()["rounds"]
    assert health["suites"] == 8 and health["base"]["accepted_share"] == 1.0, health
    assert rounds[0] == ["harness.ci_has += transformer_engine (transformer-engine: "
                         "megatron/core/models/bert_layer_specs.py:7 says it is not installed; CI's "
                         "workflows install it)", "harness.stub_attributes.transformer_engine.__version__ = "
                         "'2.17.1'"], rounds
    written = yaml.safe_load((tmp_path / "starter.yml").read_text())["harness"]
    assert written["ci_has"] == ["transformer_engine"]
    assert written["stub_attributes"]["transformer_engine.__version__"] == "2.17.1"


@pytest.mark.parametrize(("message", "files", "wanted"), [
    ("ImportError: fancy-attn package is required", {"uv.lock": 'name = "fancy-attn"\nversion = "2.1"\n'},
     {"fancy_attn.__version__": "2.1"}),
    ("RuntimeError: fp8 requires Fancy Attn>=2", {"requirements.txt": "fancy_attn>=2.0\n"},
     {"fancy_attn.__version__": "2.0"}),
    ("ValueError: fancy_attn not available", {"pyproject.toml": '[project]\ndependencies = ["fancy-attn"]\n'},
     {}),
    ("ImportError: fancy_attn is not installed", {".github/workflows/gpu.yml": (
        "on: pull_request\njobs:\n  gpu:\n    runs-on: [self-hosted]\n    steps:\n"
        "      - run: USE_CPP=0 python -m pip install --pre fancy-attn==2.3 --index-url ${{ matrix.u }}\n")},
     {"fancy_attn.__version__": "2.3"}),
])
def test_refine_tells_ci_has_only_a_package_the_tree_declares_imports_and_this_machine_lacks(
        tmp_path: Path, message: str, files: dict[str, str], wanted: dict[str, str]) -> None:
    root = write(tmp_path, {**argparse_validator("kite"), **files,
                            "requirements-dev.txt": "jinja2>=3\n",
                            "kite/ops.py": "try:\n    import fancy_attn\nexcept ImportError:\n"
                                           "    fancy_attn = None\nimport jinja2\n",
                            "tests/ci/register.py": "def register_gpu_ci():\n    pass\n",
                            "tests/e2e/test_a.py": "register_gpu_ci()\n"})
    starter = detect(root)
    suite = Suite("tests/e2e/test_a.py", "tests/e2e/test_a.py", ("--option-1", "2"))

    def refined_at(text: str) -> dict:
        exception, _, rest = text.partition(": ")
        health = assess(Matrix((suite,), scripts=1, captured=1), {suite.id: SuiteResult(
            suite.id, Outcome("rejected", exception, rest, "kite/ops.py", 4))}, {}, {})
        return refine(starter, (suite,), health, root).policy["harness"]

    harness = refined_at(message)
    assert harness["ci_has"] == ["fancy_attn"]
    assert {k: v for k, v in harness.get("stub_attributes", {}).items() if "fancy" in k} == wanted
    # a package this machine has (jinja2), one the tree does not declare, a word that names no package
    assert "ci_has" not in refined_at("ImportError: jinja2 is not installed")
    assert "ci_has" not in refined_at("ImportError: other_attn is not installed")
    assert "ci_has" not in refined_at("AssertionError: --deterministic-mode requires: tp_comm_overlap=False")


def test_refine_pins_asked_package_versions_and_replaces_a_function_failing_on_a_stub(tmp_path: Path) -> None:
    starter = detect(megatron_shaped(tmp_path))
    write(tmp_path, {
        "pyproject.toml": 'dependencies = ["vllm>=0.8.5,<=0.12.0", "nvidia-resiliency-ext==0.6.0"]\n',
        "megatron/training/lora.py": "from typing import get_args\n\n\ndef max_rank(rank):\n"
                                     "    from vllm.config.lora import MaxLoRARanks\n\n"
                                     "    return sorted(get_args(MaxLoRARanks))[-1]\n",
        "megatron/training/plain.py": "def first(values):\n    return values[0]\n"})
    suite = Suite("gpt/gpt3_tp2", "r", ("--load", "/mnt/artifacts/ckpt"), entry="pretrain_gpt.py")
    outcomes = {
        "a": Outcome("error", "PackageNotFoundError", "To use vllm rollout, please ensure the 'vllm' package "
                     "is properly installed.", "megatron/training/lora.py", 5),
        "b": Outcome("error", "AssertionError", "Minimum required nvidia-resiliency-ext package version is "
                     "0.6.0.", "megatron/training/arguments.py", 3),
        "c": Outcome("error", "IndexError", "list index out of range", "megatron/training/lora.py", 7),
        "d": Outcome("error", "IndexError", "list index out of range", "megatron/training/plain.py", 2)}
    suites = tuple(Suite(key, "r", suite.argv, entry=suite.entry) for key in outcomes)
    health = assess(Matrix(suites, scripts=1, captured=1),
                    {key: SuiteResult(key, outcome) for key, outcome in outcomes.items()}, {}, {})
    refined = refine(starter, suites, health, tmp_path)
    assert refined.policy["harness"]["stub_attributes"] == {"transformer_engine.__version__": "2.17.1",
                                                            "vllm.__version__": "0.12.0",
                                                            "nvidia_resiliency_ext.__version__": "0.6.0"}
    # only the function that imports the absent package; plain.py's IndexError is the code's own
    assert refined.policy["validation"]["replace"][-1] == {
        "target": "megatron.training.lora:max_rank", "with": "return_value", "value": None,
        "only_if_missing": False}
    assert len(refined.policy["validation"]["replace"]) == len(starter.policy["validation"]["replace"]) + 1
    # a yaml_args suite names /mnt/artifacts, but no script runs there: no existing_path_prefixes
    assert "existing_path_prefixes" not in refined.policy["harness"]
    assert refine(refined, suites, health, tmp_path).rounds[-1] == []


def test_refine_leaves_a_src_layout_launch_alone_and_names_its_modules_as_ci_imports_them(
        tmp_path: Path) -> None:
    """PrimeIntellect-ai/prime-rl: the tree's package lives under src/ (and in a uv workspace member's src/);
    a launch's entry function `rl(config)` failed at `config.run.name` and imports the tree's own
    `prime_rl.trainer` in its body, after that line. The round replaced the whole entry with `return None`
    (target `src.prime_rl.entrypoints.rl:rl`), taking the tree's package for an absent one: a suite would
    then be accepted with nothing validated. A src-layout helper that does import an absent package before
    its failing line is still answered, under the name CI imports it by."""
    starter = detect(megatron_shaped(tmp_path))
    write(tmp_path, {
        "pyproject.toml": 'dependencies = ["vllm<=0.12.0"]\n[tool.uv.sources]\n'
                          'kite-configs = { path = "packages/kite-configs", editable = true }\n',
        "packages/kite-configs/src/kite/configs/__init__.py": "class RunConfig:\n    name = None\n",
        "src/kite/__init__.py": "", "src/kite/trainer/__init__.py": "def warm():\n    pass\n",
        "src/kite/entrypoints/rl.py": "def rl(config):\n    assert config.run.name is not None\n"
                                      "    from kite.trainer import warm\n\n    warm()\n",
        "src/kite/lora.py": "from typing import get_args\n\n\ndef max_rank(rank):\n"
                            "    from vllm.config.lora import MaxLoRARanks\n\n"
                            "    return sorted(get_args(MaxLoRARanks))[-1]\n"})
    outcomes = {"a": Outcome("rejected", "AttributeError", "'FieldInfo' object has no attribute 'name'",
                             "src/kite/entrypoints/rl.py", 2),
                "b": Outcome("rejected", "IndexError", "list index out of range", "src/kite/lora.py", 7)}
    suites = tuple(Suite(key, "r", ("--x",), entry="pretrain_gpt.py") for key in outcomes)
    before = list(starter.policy["validation"].get("replace", []))

    def replaced(keys: str) -> list[dict]:
        health = assess(Matrix(suites, scripts=1, captured=1),
                        {key: SuiteResult(key, outcomes[key]) for key in keys}, {}, {})
        return refine(starter, suites, health, tmp_path).policy["validation"].get("replace", [])[len(before):]

    assert replaced("a") == []
    assert replaced("ab") == [{"target": "kite.lora:max_rank", "with": "return_value", "value": None,
                               "only_if_missing": False}]


def test_tree_modules_are_named_as_ci_imports_them(tmp_path: Path) -> None:
    """`src/` (a src layout's, a uv workspace member's) is where CI imports from; a `src/` that is a
    package itself (`src/__init__.py`) is imported as `src.x`, and the rest of the tree by its path."""
    from app.analysis.core.tree_reading import read_modules

    write(tmp_path, {"pyproject.toml": '[tool.uv.sources]\nconf = { path = "packages/conf" }\n',
                     "src/kite/run.py": "", "packages/conf/src/conf/core.py": "", "tools/plot.py": ""})
    assert sorted(read_modules(tmp_path, lambda text: True)) == ["conf.core", "kite.run", "tools.plot"]
    write(tmp_path, {"src/__init__.py": ""})
    assert "src.kite.run" in read_modules(tmp_path, lambda text: True)


def test_refine_pins_a_version_the_code_looked_up_and_found_none(tmp_path: Path) -> None:
    # verl: `importlib.metadata.version("vllm")` caught as None, then "vllm version None not supported"
    starter = detect(megatron_shaped(tmp_path))
    write(tmp_path, {"pyproject.toml": 'dependencies = ["vllm>=0.8.5,<=0.12.0"]\n'})
    suite = Suite("a", "r", ("--x",), entry="pretrain_gpt.py")
    outcome = Outcome("error", "ValueError", "vllm version None not supported and SGLang also not Found. "
                      "Currently supported vllm versions are 0.7.0+", "verl/third_party/vllm/__init__.py", 37)
    health = assess(Matrix((suite,), scripts=1, captured=1), {"a": SuiteResult("a", outcome)}, {}, {})
    refined = refine(starter, (suite,), health, tmp_path)
    assert refined.policy["harness"]["stub_attributes"]["vllm.__version__"] == "0.12.0"


def test_the_starter_pins_its_real_packages_as_the_analysis_environments_requirements(tmp_path: Path) -> None:
    """The distribution of each real package, at the version the tree's dependency files fix for CI, else
    at the one this machine has; a package no distribution provides is left out."""
    import importlib.metadata

    (tmp_path / "requirements.txt").write_text("PyYAML==6.0.1\njinja2>=3\n")
    found = requirements_for(["yaml", "jinja2", "not_a_package_here"], tmp_path)
    assert found == ["PyYAML==6.0.1", f"Jinja2=={importlib.metadata.version('jinja2')}"]
    (tmp_path / "uv.lock").write_text('[[package]]\nname = "jinja2"\nversion = "3.1.2"\n')
    assert requirements_for(["jinja2"], tmp_path) == ["Jinja2==3.1.2"]


LAUNCH_MAIN = "python ${REPO_PATH}/examples/reasoning/main.py --config-name $1\n"


def test_workflow_steps_of_shell_scripts_launching_programs_run_to_their_boundary(tmp_path: Path) -> None:
    # RLinf-shaped: each e2e step runs `bash tests/e2e_tests/<area>/run.sh <config>`, whose last line
    # starts `python ${REPO_PATH}/examples/<area>/main.py` (a Hydra application); the tree's biggest
    # `parse_args` is a data tool's, which no script launches
    tool = "import argparse\n\ndef parse_args():\n    parser = argparse.ArgumentParser()\n" + OPTIONS + (
        "\n    return parser.parse_args()\n")
    step = "export REPO_PATH=$(pwd)\nsource .venv/bin/activate\nbash tests/e2e_tests/{area}/run.sh {config}\n"
    workflow = {"jobs": {"e2e": {"runs-on": "gpu", "steps": [
        {"run": "bash requirements/install.sh"},
        {"run": step.format(area="reasoning", config="grpo")},
        {"run": step.format(area="embodied", config="ppo")}]}}}
    files = {
        "toolkits/lerobot/collect.py": tool,
        "examples/reasoning/main.py": "import hydra\nimport ray\n\n@hydra.main(config_path='config')\n"
                                      "def main(cfg):\n    ray.init()\n",
        "tests/e2e_tests/reasoning/run.sh": LAUNCH_MAIN,
        "tests/e2e_tests/embodied/run.sh": LAUNCH_MAIN,
        "requirements/install.sh": "pip install -e .\n",
        ".github/workflows/e2e.yml": yaml.safe_dump(workflow),
        # checked at import (`version.parse(torch.__version__) >= "2.6.0"`): a stub's 0.0.0 fails it
        "rlinf/fsdp.py": "import torchlike_absent\nimport unpinned_absent\n",
        "pyproject.toml": '[project]\ndependencies = ["torchlike-absent>=2.5.0"]\n[tool.uv]\n'
                          'override-dependencies = ["torchlike-absent==2.11.0"]\n',
    }
    starter = detect(write(tmp_path, files))
    assert starter.policy["validation"] == {"mode": "boundary"}
    assert "no script of the tree matching" in starter.why["validation.mode"]
    [source] = starter.policy["matrix"]["sources"]
    assert (source["kind"], source["entry"]) == ("workflow_steps", LAUNCHED_SCRIPT)
    assert source["workflows"] == [".github/workflows/e2e.yml"]
    assert source["scripts"] == ["tests/e2e_tests/**/*.sh"]  # not the install script: it launches nothing
    assert "hydra" in starter.policy["harness"]["real_packages"]  # the launched program composes for real
    # absent here, stubbed: at the version CI has (the exact override, not the floor)
    assert starter.policy["harness"]["stub_attributes"] == {"torchlike_absent.__version__": "2.11.0"}
    policy = parse_policy(render(starter), "starter")
    assert policy.validation.to_boundary


# NVIDIA-NeMo/RL's shape: the functional job's matrix comes from another job's output, its step is a shared
# composite action starting `bash tests/functional/${{ inputs.script }}.sh`, each L1 script runs test
# scripts, each test launches an `examples/run_*.py` (a pydantic config checked before Ray starts, a log
# directory made under the checkout first) and then a helper of the tests checking the training's metrics.
MATRIX_FROM_JOB = {
    "pyproject.toml": 'requires-python = ">=3.11"\n',
    ".github/workflows/ci.yml": """\
        on: push
        jobs:
          plan:
            runs-on: ubuntu-latest
            outputs:
              scripts: ${{ steps.plan.outputs.scripts }}
            steps:
              - id: plan
                run: echo "scripts=$(bash .github/plan.sh)" >> "$GITHUB_OUTPUT"
          functional:
            needs: [plan]
            strategy:
              matrix:
                script: ${{ fromJSON(needs.plan.outputs.scripts) }}
            runs-on: gpu
            steps:
              - uses: ./.github/actions/test-template
                with:
                  script: ${{ matrix.script }}
        """,
    ".github/actions/test-template/action.yml": """\
        inputs:
          script: {required: true}
          is_unit_test: {default: "false"}
        runs:
          using: composite
          steps:
            - shell: bash
              run: >-
                docker run --rm image:${{ github.run_id }} bash -c 'bash
                tests/${{ inputs.is_unit_test == 'true' && 'unit' || 'functional' }}/${{ inputs.script }}.sh'
        """,
    ".github/plan.sh": "for f in tests/functional/L1_*.sh; do basename \"$f\" .sh; done "
                       "| jq -R . | jq -sc .\n",
    "tests/functional/L1_Functional_A.sh": "bash ./tests/functional/grpo.sh\n",
    "tests/functional/L1_Functional_B.sh": "bash ./tests/functional/sft.sh\n"
                                           "bash ./tests/functional/grpo_tp.sh\n",
    "tests/functional/grpo.sh": "python examples/run_grpo.py policy.tensor_parallel_size=2\n"
                                "python tests/check_metrics.py logs/metrics.json\n",
    "tests/functional/grpo_tp.sh": "python examples/run_grpo.py policy.tensor_parallel_size=3\n",
    "tests/functional/sft.sh": "python examples/run_grpo.py num_gpus=16\n",
    "tests/check_metrics.py": "import json, sys\n\njson.load(open(sys.argv[1]))\n",
    "examples/run_grpo.py": """\
        import os
        import sys

        import ray
        from pydantic import BaseModel


        class PolicyConfig(BaseModel):
            tensor_parallel_size: int = 1


        class MasterConfig(BaseModel):
            policy: PolicyConfig = PolicyConfig()
            num_gpus: int = 8


        @ray.remote(num_gpus=1)
        class Trainer:
            pass


        def load(overrides):
            config = {"policy": {}}
            for override in overrides:
                key, _, value = override.partition("=")
                *parents, last = key.split(".")
                node = config
                for parent in parents:
                    node = node.setdefault(parent, {})
                node[last] = int(value)
            return MasterConfig(**config)


        if __name__ == "__main__":
            config = load(sys.argv[1:])
            assert config.num_gpus % config.policy.tensor_parallel_size == 0, "num_gpus must divide by tp"
            os.makedirs("logs/exp_001", exist_ok=True)
            Trainer.options(name="trainer").remote()
        """,
}


def test_scripts_a_matrix_from_another_job_runs_through_a_composite_action_shape(tmp_path: Path) -> None:
    starter = detect(write(tmp_path, MATRIX_FROM_JOB))
    assert starter.policy["validation"] == {"mode": "boundary"}
    [source] = starter.policy["matrix"]["sources"]
    assert (source["kind"], source["jobs"]) == ("computed_matrix", ["functional"])  # the plan step runs
    # what the rows are when it cannot: the glob's scripts that no other one there runs
    assert source["scripts"] == ["tests/functional/L1_Functional_*.sh"]  # not the tests the L1 scripts run
    assert source["command"] == ["bash", "{script}"]
    assert "each row of plan's output scripts (its step plan)" in starter.why["matrix.sources[0]"]
    assert "pydantic" in starter.policy["harness"]["real_packages"]  # what the launchable scripts import
    assert "python" not in starter.policy["harness"]  # requires-python asks for no newer Python
    newer = f'requires-python = ">={sys.version_info[0]}.{sys.version_info[1] + 1}.2,<4"\n'
    (tmp_path / "pyproject.toml").write_text(newer)
    wanted = f"{sys.version_info[0]}.{sys.version_info[1] + 1}"
    assert detect(tmp_path).policy["harness"]["python"] == [wanted]
    # a configuration package the tree pins is real even where this machine lacks it
    write(tmp_path, {"examples/run_cli.py": "import tyro\n\nif __name__ == '__main__':\n    tyro.cli(dict)\n",
                     "uv.lock": '[[package]]\nname = "tyro"\nversion = "0.9.1"\n'})
    harness = detect(tmp_path).policy["harness"]
    assert "tyro" in harness["real_packages"] and "tyro==0.9.1" in harness["requirements"]


def test_init_alone_on_the_matrix_from_another_job_shape(tmp_path: Path, prtriage_cache: Path) -> None:
    """End to end in the real sandbox: each L1 script's launches of the entry are suites (the metrics check
    is none), each runs to its Ray actor past its log directory, the one whose config fails is rejected."""
    tree = write(tmp_path / "tree", MATRIX_FROM_JOB)
    output = tmp_path / "starter.yml"
    run = prtriage("init", "--tree", str(tree), "--output", str(output), "--format", "json",
                   cache_dir=prtriage_cache)
    report = run.json()
    health = report["health"]
    assert health["suites"] == 3, run.describe()
    assert health["base"]["accepted"] == 2 and health["base"]["rejected"] == 1, health
    [error] = health["errors"]
    assert "num_gpus must divide by tp" in str(error), error
    assert "not computed" not in json.dumps(health)  # the rows are the plan step's, not the glob's
    assert output.is_file()


def test_boundary_mode_makes_the_config_stack_real_even_where_init_runs_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a plain install of prtriage has neither Hydra nor packaging: the launch still composes its config
    # with Hydra and compares versions with packaging (a stub's `>=` is always false) in the analysis env
    import importlib.metadata

    from app.analysis.starter import starter_tree

    monkeypatch.setattr(starter_tree, "installed", lambda name: False)
    monkeypatch.setattr(importlib.metadata, "packages_distributions", lambda: {})
    step = "bash tests/e2e/run.sh\n"
    files = {
        "examples/main.py": "import hydra\n\n@hydra.main(config_path='config')\ndef main(cfg):\n    pass\n",
        "pkg/cluster.py": "from packaging import version as vs\n",
        "tests/e2e/run.sh": "python examples/main.py\n",
        ".github/workflows/e2e.yml": yaml.safe_dump({"jobs": {"e2e": {"steps": [{"run": step}]}}}),
        "pyproject.toml": '[project]\ndependencies = ["hydra-core==1.4.0.dev1"]\n',
    }
    starter = detect(write(tmp_path, files))
    assert starter.policy["harness"]["real_packages"] == ["hydra", "packaging"]
    assert starter.policy["harness"]["requirements"] == ["hydra-core==1.4.0.dev1", "packaging"]


def test_refine_makes_torch_real_where_its_stub_failed_validation_at_a_line_using_it(tmp_path: Path) -> None:
    # verl from a plain install (no torch beside prtriage): 6 of 38 suites failed at `FP8_MIN = -FP8_MAX`
    # (`FP8_MAX = torch.finfo(FP8_DTYPE).max` on a stub), run at the import of verl/utils/kernel/fp8_kernel.py
    root = verl_shaped(tmp_path)
    write(root, {
        "verl/utils/kernel/fp8_kernel.py": "import logging\n\nimport torch\n\n"
                                           "FP8_DTYPE = torch.float8_e4m3fn\n"
                                           "FP8_MAX = torch.finfo(FP8_DTYPE).max\nFP8_MIN = -FP8_MAX\n",
        "verl/utils/lazy.py": "def dtype(name):\n    import torch\n\n    return getattr(torch, name)\n",
        "verl/utils/typed.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import torch\n\n"
                               "def size(x: 'torch.Tensor'):\n    return x.shape\n",
        "verl/utils/aliased.py": "from torch import finfo as fi\n\nLIMIT = fi(None).max\n"})
    starter = detect(root)
    stubbed = {"torch.__version__": "2.9.0", "vllm.__version__": "0.12.0"}
    starter.policy["harness"]["stub_attributes"] = stubbed
    suite = Suite("a", "r", ("x=1",), entry="verl.trainer.main_ppo")

    def failing_at(path: str, line: int, policy: Starter = starter) -> Starter:
        outcome = Outcome("error", "TypeError", "bad operand type for unary -: 'StubModule'", path, line)
        health = assess(Matrix((suite,), scripts=1, captured=1), {"a": SuiteResult("a", outcome)}, {}, {})
        return refine(policy, (suite,), health, root)

    # a torch imported in a function body, or only for type checking, was not what validation ran at import;
    # a line not naming torch is the repository's own failure
    for path, line in [("verl/utils/lazy.py", 4), ("verl/utils/typed.py", 7),
                       ("verl/utils/kernel/fp8_kernel.py", 1)]:
        assert "torch" not in failing_at(path, line).policy["harness"]["real_packages"], (path, line)
    for path, line in [("verl/utils/kernel/fp8_kernel.py", 7), ("verl/utils/kernel/fp8_kernel.py", 6),
                       ("verl/utils/aliased.py", 3)]:
        refined = failing_at(path, line)
        harness = refined.policy["harness"]
        assert "torch" in harness["real_packages"] and "torch==2.13.0" in harness["requirements"]
        assert harness["limits"] == {"memory_mb": 8192, "suite_seconds": 120}
        assert harness["stub_attributes"] == {"vllm.__version__": "0.12.0"}  # the real torch has its own
        assert f"the stub failed at {path}:{line}" in refined.rounds[-1][-1]
        parse_policy(render(refined), "starter")
        assert not any("torch" in change for change in failing_at(path, line, refined).rounds[-1])


def test_refine_makes_torch_real_where_capture_died_at_a_torch_op_the_stub_made(tmp_path: Path) -> None:
    # torchtitan from a plain install: capture imported the integration tests' definitions, which import
    # torchtitan/distributed/minimal_async_ep/api.py, and died at `@dispatch_op.register_fake`: the stubbed
    # `torch.library.custom_op` had left `dispatch_op` a plain function. No suite was captured, so no base
    # failure could say torch was wanted: the capture's failure must.
    root = verl_shaped(tmp_path)
    write(root, {"pkg/api.py": "import torch\n\n\n@torch.library.custom_op('ep::dispatch', mutates_args=())\n"
                               "def dispatch_op(x):\n    return x\n\n\n@dispatch_op.register_fake\n"
                               "def dispatch_op_fake(x):\n    return x\n\n\ndef plain(x):\n    return x\n"})
    starter = detect(root)
    suite = Suite("a", "r", ("x=1",), entry="verl.trainer.main_ppo")

    def died_at(line: int) -> Starter:
        reason = f"AttributeError: 'function' object has no attribute 'register_fake' (at pkg/api.py:{line})"
        matrix = Matrix((), scripts=1, captured=0, failed=(CaptureFailure("tests.defs:build", reason),))
        return refine(starter, (suite,), assess(matrix, {}, {}, {}), root)

    refined = died_at(9)
    assert "torch" in refined.policy["harness"]["real_packages"]
    assert "the stub failed at pkg/api.py:9" in refined.rounds[-1][-1]
    # a line naming neither torch nor what a torch decorator made is the repository's own failure
    assert "torch" not in died_at(14).policy["harness"]["real_packages"]


def test_refine_makes_real_a_declared_package_a_real_one_imports_for_the_tree(tmp_path: Path) -> None:
    # torchtitan from a plain install, once torch was real: capture died at `from torch.utils.tensorboard
    # import SummaryWriter` (torchtitan/components/metrics.py), real torch asking for tensorboard, which its
    # pyproject.toml lists; a stub only answers the tree's own imports
    root = verl_shaped(tmp_path)
    write(root, {"pkg/metrics.py": "import torch\nfrom torch.utils.tensorboard import SummaryWriter\n"
                                   "import wandb\n",
                 "requirements.txt": "tensorboard\nwandb==0.20.1\n"})
    starter = detect(root)
    harness = starter.policy["harness"]
    harness["real_packages"] = sorted([*harness["real_packages"], "torch"])
    suite = Suite("a", "r", ("x=1",), entry="verl.trainer.main_ppo")

    def died_at(line: int, name: str, policy: Starter = starter) -> Starter:
        reason = f"ModuleNotFoundError: No module named '{name}' (at pkg/metrics.py:{line})"
        matrix = Matrix((), scripts=1, captured=0, failed=(CaptureFailure("tests.defs:build", reason),))
        return refine(policy, (suite,), assess(matrix, {}, {}, {}), root)

    refined = died_at(2, "tensorboard")
    assert "tensorboard" in refined.policy["harness"]["real_packages"]
    assert "tensorboard" in refined.policy["harness"]["requirements"]
    assert refined.rounds[-1][0].startswith("harness.real_packages += tensorboard")
    assert not any("tensorboard" in c for c in died_at(2, "tensorboard", refined).rounds[-1])  # once
    # the tree's own import of an absent package is the stubs' to answer; an undeclared one is not CI's
    assert "wandb" not in died_at(3, "wandb").policy["harness"]["real_packages"]
    assert "grain" not in died_at(2, "grain").policy["harness"]["real_packages"]


def test_refine_makes_real_the_configuration_stack_a_failing_module_imports(tmp_path: Path) -> None:
    # Megatron-LM from a plain install: every suite failed at `register_type.__fields__['type_name']`
    # (megatron/rl/__init__.py:31), a pydantic model's, with pydantic stubbed: validation's own modules, which
    # detection read, do not import it; the module that failed does, at its top
    root = verl_shaped(tmp_path)
    write(root, {"pkg/rl.py": "from pydantic import BaseModel\n\n\n"
                              "class Request(BaseModel):\n    x: int = 1\n\n\n"
                              "NAMES = {Request.__fields__['x'].default: Request}\n",
                 "pkg/plain.py": "import json\n\nVALUE = json.loads('{}')['x']\n"})
    starter = detect(root)
    harness = starter.policy["harness"]
    harness["real_packages"] = [p for p in harness["real_packages"] if p != "pydantic"]
    suite = Suite("a", "r", ("x=1",), entry="verl.trainer.main_ppo")

    def failing_at(path: str, line: int) -> Starter:
        outcome = Outcome("rejected", "AttributeError", "__fields__", path, line)
        health = assess(Matrix((suite,), scripts=1, captured=1), {"a": SuiteResult("a", outcome)}, {}, {})
        return refine(starter, (suite,), health, root)

    refined = failing_at("pkg/rl.py", 8).policy["harness"]
    assert "pydantic" in refined["real_packages"]
    assert any(r.lower().startswith("pydantic") for r in refined["requirements"])
    assert "pydantic" not in failing_at("pkg/plain.py", 3).policy["harness"]["real_packages"]


TYRO_CHOKED = ("2: Invalid input to tyro.cli() Could not create CLI parser from the provided type. • Type "
               "typing.Tuple[typing.Any, ...] with struct-type values requires a default value.")


def test_refine_makes_real_a_pinned_package_a_config_parser_choked_on_the_stub_of(tmp_path: Path) -> None:
    # torchtitan from a plain install: tyro real, grain stubbed, every suite failed at `tyro.cli()`; tyro's
    # message names no type, the data loader's config types a field with grain's, and pyproject pins grain
    root = build_stubbed_config_twin(tmp_path)
    write(root, {"kestrel/layout.py": "from dataclasses import dataclass\n\nimport numpy as np\n\n\n"
                                      "@dataclass\nclass Layout:\n    shape: np.ndarray\n",
                 "requirements.txt": "numpy\n"})
    starter = detect(root)
    assert "tyro" in starter.policy["harness"]["real_packages"]
    assert MODULE not in starter.policy["harness"]["real_packages"]
    suite = Suite("a", "r", ("--loader.seed", "7"), entry="kestrel/train.py")

    def failing(exception: str, message: str, policy: Starter = starter) -> Starter:
        outcome = Outcome("rejected", exception, message, MANAGER, 20)
        health = assess(Matrix((suite,), scripts=1, captured=1), {"a": SuiteResult("a", outcome)}, {}, {})
        return refine(policy, (suite,), health, root)

    refined = failing("SystemExit", TYRO_CHOKED)
    harness = refined.policy["harness"]
    assert MODULE in harness["real_packages"] and f"{MODULE}==1.0" in harness["requirements"]
    assert f"on a stubbed type: {LOADER}:12" in refined.rounds[-1][-1], refined.rounds[-1]
    assert "numpy" not in harness["real_packages"]  # typed with too, but not pinned: no guess to install
    parse_policy(render(refined), "starter")
    assert not any(MODULE in change for change in failing("SystemExit", TYRO_CHOKED, refined).rounds[-1])
    # pydantic's message names the stub itself: that package, pinned or not, when the tree asks for it
    pydantic = ("Unable to generate pydantic-core schema for <stub numpy.ndarray>. Set "
                "`arbitrary_types_allowed=True` in the model_config")
    named = failing("PydanticSchemaGenerationError", pydantic).policy["harness"]
    assert "numpy" in named["real_packages"] and "numpy" in named["requirements"]
    assert MODULE not in named["real_packages"]
    # any other failure, at the same line, is the repository's or another rule's
    other = failing("SystemExit", "2: Unrecognized options: --x")
    assert MODULE not in other.policy["harness"]["real_packages"]


def test_init_on_the_twin_whose_config_types_a_field_with_a_stubbed_package(
        tmp_path: Path, prtriage_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end in the real sandbox: the first round's base fails every suite at tyro's parser, built from
    a type the harness stubbed; the refine round makes the pinned package real (pip installs it from a local
    wheel, as CI from PyPI) and the next round accepts them all. Without it, doctor shows the failure."""
    from test_environments import make_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, DISTRIBUTION, VERSION, PACKAGE_SOURCE)
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    tree = build_stubbed_config_twin(tmp_path / "twin")
    output = tmp_path / "starter.yml"
    run = prtriage("init", "--tree", str(tree), "--output", str(output), "--format", "json",
                   cache_dir=prtriage_cache)
    assert run.returncode == 0, run.describe()
    health = run.json()["health"]
    assert health["suites"] == 2 and health["base"]["accepted_share"] == 1.0, health
    changes = [change for r in run.json()["rounds"] for change in r]
    assert any(c.startswith(f"harness.real_packages += {MODULE}") for c in changes), changes
    # the same policy with the package left stubbed: every suite fails at tyro's parser
    policy = yaml.safe_load(output.read_text())
    harness = policy["harness"]
    harness["real_packages"].remove(MODULE)
    harness["requirements"].remove(f"{MODULE}=={VERSION}")
    stubbed = tmp_path / "stubbed.yml"
    stubbed.write_text(yaml.safe_dump(policy))
    doctor = prtriage("doctor", "--tree", str(tree), "--policy", str(stubbed), "--format", "json",
                      cache_dir=prtriage_cache)
    base = doctor.json()["health"]
    assert base["base"]["accepted"] == 0 and base["base"]["rejected"] == 2, base
    [error] = base["errors"]
    assert "Could not create CLI parser" in error["message"], error
