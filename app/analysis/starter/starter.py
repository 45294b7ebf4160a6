"""`prtriage init`: a starter policy detected from a repository's own tree, then refined by its health.

Detection reads the tree, never runs it (the sandbox does that, in the doctor rounds of `refine`):
- the validator: the module-level `parse_args` with the most `add_argument` calls, or a config class's
  `parse_args` built on tyro; the `*validate_args` functions that module defines or imports from the tree;
- the CI sources, each detected by its kind's module in `app/analysis/sources/`: matrix rows of GitHub
  workflows naming Python scripts (`workflow_rows`), scripts that register with CI through a `register_*`
  function of the tests (`record_launches`), test modules building `...Definitions(...)` lists run by a
  runner script (`python_definitions`);
- what the harness needs: real packages the validation imports and this machine has, Megatron-LM's
  parser and defaults when the validation builds on Megatron without having it, an HF config stand-in when
  the validation reads one.
Each choice carries its reason, written as a comment above the key. `refine` then reads a doctor round
(the captured suites and the base's errors) and adds what the errors ask for: option defaults, CI-host
paths, the HF config's fixture. Heuristics all: the health report is the judge, and the user's to read.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from app.analysis.core.model import Outcome, Suite
from app.analysis.core.policy import path_matches
from app.analysis.core.tree_reading import (
    Module,
    import_prefixes,
    module_name,
    read_modules,
    read_text,
    tree_package,
)
from app.analysis.sources.registry import KINDS
from app.analysis.starter.starter_ci_has import ci_has_declared
from app.analysis.starter.starter_offline import offline_answer
from app.analysis.starter.starter_real import real_config_types
from app.analysis.starter.starter_shapes import detect_shape
from app.analysis.starter.starter_torch import capture_failures, real_torch
from app.analysis.starter.starter_tree import (
    CONFIG_STACK,
    REQUIREMENTS_WHY,
    TORCH_LIMITS,
    NoValidator,
    Starter,
    declared,
    import_names,
    imported_modules,
    installed,
    is_test,
    packages_harness,
    pinned_version,
    requirements_for,
    stub_versions,
)
from app.analysis.verdict.doctor import ATTRIBUTE
from app.analysis.verdict.health import Health
from app.sandbox.harness.neutral import neutral_default

MIN_OPTIONS = 10  # add_argument calls that make a module-level parse_args the command line's
MEGATRON_ARGUMENTS = "megatron.training.arguments"
# Megatron-owned options a Megatron-based validator reads but whose parser it does not have in its tree:
# Megatron's own defaults (megatron/training/arguments.py), so validation reads what a run would.
MEGATRON_DEFAULTS: dict[str, Any] = {
    "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "context_parallel_size": 1,
    "expert_model_parallel_size": 1, "fp16": False, "bf16": False, "rotary_base": 10000,
    "untie_embeddings_and_output_weights": False, "seq_length": None, "max_position_embeddings": None,
    "tokenizer_model": None, "tokenizer_type": None, "vocab_size": None, "padded_vocab_size": None,
    "decoder_first_pipeline_num_layers": None, "decoder_last_pipeline_num_layers": None,
    "hidden_dropout": 0.1, "attention_dropout": 0.1, "moe_router_load_balancing_type": "aux_loss",
    "moe_input_jitter_eps": None, "moe_router_force_load_balancing": False, "moe_router_force_biased": None,
    "overlap_param_gather": False, "use_precision_aware_optimizer": False,
}
# HF config keys from Megatron's option names: the config a suite's checkpoint would carry.
MEGATRON_HF_NAMES = {
    "hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads",
    "num_hidden_layers": "num_layers", "intermediate_size": "ffn_hidden_size",
    "moe_intermediate_size": "moe_ffn_hidden_size",
    "tie_word_embeddings": "not untie_embeddings_and_output_weights", "rms_norm_eps": "layernorm_epsilon",
    "rope_theta": "rotary_base",
}
HF_CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "num_hidden_layers": 28,
             "num_attention_heads": 16,
             "num_key_value_heads": 8, "hidden_size": 2048, "intermediate_size": 11008, "vocab_size": 151936,
             "max_position_embeddings": 32768, "rope_theta": 1000000.0, "tie_word_embeddings": True}
LAUNCHERS = ["python", "python3", "torchrun", "ray"]
# With no validator recognised, every Python script a CI launch starts is run to its training boundary, but
# for the tests' own helpers: CI scripts run them after the training to check its outputs (NeMo RL's
# `tests/check_metrics.py` reads the metrics the run wrote), which no run here has written.
LAUNCHED_SCRIPT = r"^(?!(?:.*/)?tests?/)(?:.*/)?[^/]+\.py$"
# Device facts the validation asks the GPU for: on CI's GPUs the answer is yes.
DEVICE_CHECKS = ("has_cuda_capability",)
# The machine's own directories, and the sandbox's mount of the tree (`/repo`): never a CI host's.
HOST_DIRS = frozenset({"repo", "tmp", "proc", "sys", "dev", "usr", "bin", "etc", "lib", "opt", "var", "run"})
_ABSOLUTE = re.compile(r"(?<![\w.~:/-])(/[\w.+-]+(?:/[\w.+*-]+)*)")
_MODEL_FLAG = re.compile(r"^--(?:hf|model|ref|critic|tokenizer)[-_]?(?:checkpoint|path|load|model)?", re.I)
# A Hydra override naming a model directory (`actor_rollout_ref.model.path=/root/models/Qwen/Qwen2.5-0.5B`).
_MODEL_OVERRIDE = re.compile(r"^\+{0,2}[\w.]*(?:model[._]path|model_name_or_path)=(/[^\s,]+)$")


def detect(root: Path) -> Starter:
    """The starter policy of the tree at ROOT."""
    modules = read_modules(root, lambda text: True)
    shaped = detect_shape(root, modules)
    if shaped is not None:
        return shaped
    starter = Starter({"version": 1})
    try:
        validation, used = _validation(root, modules, starter.why)
        entry_pattern = _launched_entry(validation["entry"], validation["paths"], modules)
        found = f"found the validator {validation['entry']}, but"
    except NoValidator as exc:
        validation, used, entry_pattern = {"mode": "boundary"}, [], LAUNCHED_SCRIPT
        starter.why["validation.mode"] = (f"{exc}: each CI launch's own script runs until training would "
                                          "start (its training boundary)")
        found = f"{exc}, and"
    starter.policy["validation"] = validation
    recording = _recording(entry_pattern, modules)
    sources = list(_sources(root, recording))
    if not sources:
        raise NoValidator(f"{found} no CI source any kind of source detects in the tree's workflows and "
                          f"tests ({', '.join(sorted(KINDS))}: docs/policy.md, `matrix.sources`)")
    starter.policy["matrix"] = {"sources": [source for source, _ in sources]}
    for index, (_, reason) in enumerate(sources):
        starter.why[f"matrix.sources[{index}]"] = reason
    boundary = validation.get("mode") == "boundary"
    if boundary:  # what the launched programs import is what validation runs
        used = _launched_programs(root, [source for source, _ in sources], modules)
    deeper = [m for u in used for m in imported_modules(u, modules)]
    stack_from = [*modules.values(), *used] if boundary else []
    starter.policy["harness"] = _harness(root, [*used, *deeper], modules, stack_from)
    _add_needs(starter.policy["harness"], [source for source, _ in sources], root)
    if boundary:
        versions = stub_versions(root, [*modules.values(), *used], starter.policy["harness"]["real_packages"])
        if versions:
            starter.policy["harness"]["stub_attributes"] = versions
            starter.why["harness.stub_attributes"] = (
                "the tree imports these packages, absent here and stubbed: each answers the version the "
                "tree's dependency files give CI (code checks `torch.__version__` before it goes on)")
    starter.why["harness.requirements"] = REQUIREMENTS_WHY
    python = _required_python(root)
    if python:
        starter.policy["harness"]["python"] = [python]
        starter.why["harness.python"] = (f"pyproject.toml's requires-python asks for Python {python} at "
                                         "least, newer than the one prtriage runs on: CI runs that one")
    starter.why["harness.real_packages"] = REAL_WHY
    return starter


REAL_WHY = ("packages the validation (or the programs CI launches) imports that this machine has; every "
            "other missing module is stubbed")
_PROGRAM = re.compile(r"(?:\$\{?\w+\}?/|\./)?((?:[\w.+-]+/)*[\w.+-]+\.py)\b")


def _launched_programs(root: Path, sources: list[dict[str, Any]], modules: dict[str, Module]) -> list[Module]:
    """The programs a CI launch may start, run to their boundary with no validator: what they import is
    what validation needs real (Hydra composing its config). The tree's scripts (a `__main__` block outside
    the tests), and the tree's Python programs the sources' CI scripts name (`python
    ${REPO_PATH}/examples/x/train.py`); both read from `examples/` too, which detection's modules leave out
    and where launched programs often live."""
    examples = read_modules(root / "examples", lambda text: "__main__" in text) \
        if (root / "examples").is_dir() else {}
    found = {m.path: m for m in [*modules.values(), *(_under("examples", m) for m in examples.values())]
             if not is_test(m) and "__main__" in m.source and "__name__" in m.source}
    globs = [g for source in sources for g in source.get("scripts", [])]
    for path in sorted(root.rglob("*")) if globs else []:
        relative = path.relative_to(root).as_posix()
        if not path.is_file() or not any(path_matches(relative, g) for g in globs):
            continue
        for program in _PROGRAM.findall(read_text(path)):
            if program != relative and program not in found and (root / program).is_file():
                found[program] = Module(program[:-3].replace("/", "."), program, read_text(root / program))
    return list(found.values())


def _under(directory: str, module: Module) -> Module:
    """MODULE, read from DIRECTORY of the tree, named from the tree's root."""
    return Module(f"{directory}.{module.name}", f"{directory}/{module.path}", module.source)


def _required_python(root: Path) -> str | None:
    """`X.Y` of pyproject.toml's `requires-python = ">=X.Y..."` when it is newer than this interpreter (an
    older Python fails on what the repository uses: pydantic refuses `typing.TypedDict` before 3.12)."""
    pyproject = root / "pyproject.toml"
    text = read_text(pyproject) if pyproject.is_file() else ""
    found = re.search(r'^requires-python\s*=\s*["\'][^"\']*>=\s*(\d+)\.(\d+)', text, re.M)
    if found is None or (int(found.group(1)), int(found.group(2))) <= sys.version_info[:2]:
        return None
    return f"{found.group(1)}.{found.group(2)}"


def _validation(root: Path, modules: dict[str, Module],
                why: dict[str, str]) -> tuple[dict[str, Any], list[Module]]:
    """The `validation` section, and the modules the validation runs (for what they import)."""
    entry, entry_module, why["validation.entry"] = _entry(modules)
    functions = _functions(entry_module, modules)
    near = imported_modules(entry_module, modules)
    used = list({m.name: m for m in [entry_module, *(modules[f.split(":")[0]] for f in functions),
                                     *near]}.values())
    argument_modules = [m for m in used if m is entry_module or "arg" in m.name.rsplit(".", 1)[-1]]
    validation: dict[str, Any] = {"paths": _validation_paths(root, entry_module, argument_modules),
                                  "entry": entry}
    why["validation.paths"] = ("the validator's modules and the scripts that call it: a PR touching none of "
                               "them needs no analysis")
    if functions:
        validation["functions"] = functions
        why["validation.functions"] = "validators the entry module defines or imports (`*validate_args`)"
    validation["unknown_flags"] = "error"
    megatron = any(MEGATRON_ARGUMENTS in m.source for m in used) and MEGATRON_ARGUMENTS not in modules
    replace = _megatron_keys(validation, why) if megatron else []
    if any("AutoConfig.from_pretrained" in m.source for m in used):
        replace.append(_hf_config_replace(megatron))
        why["validation.replace"] = "; ".join(filter(None, [why.get("validation.replace"), (
            "validation reads the HF config of the suite's checkpoint: a fixture stands in for it"
            + (", following the suite's own model options" if megatron else ""))]))
    replace += _device_checks(modules, why)
    if replace:
        validation["replace"] = replace
    return validation, used


def _device_checks(modules: dict[str, Module], why: dict[str, str]) -> list[dict[str, Any]]:
    found = [f"{m.name}:{name}" for m in modules.values() if not is_test(m)
             for name in m.functions() if name in DEVICE_CHECKS]
    if found:
        why["validation.replace"] = "; ".join(filter(None, [why.get("validation.replace"),
                                                            "device checks answer as CI's GPUs do"]))
    return [{"target": target, "with": "return_value", "value": True, "only_if_missing": False}
            for target in found]


def _megatron_keys(validation: dict[str, Any], why: dict[str, str]) -> list[dict[str, Any]]:
    validation["attribute_defaults"] = dict(MEGATRON_DEFAULTS)
    why["validation.attribute_defaults"] = "Megatron-owned options the validator reads: Megatron's defaults"
    why["validation.replace"] = ("the validator builds on Megatron-LM's parser, which is not in this tree: "
                                 "its parser runs with this repository's options added")
    return [{"target": f"{MEGATRON_ARGUMENTS}:parse_args", "with": "argparse_with_provider",
             "provider_kwarg": "extra_args_provider"}]


def _hf_config_replace(megatron: bool) -> dict[str, Any]:
    replace: dict[str, Any] = {"target": "transformers:AutoConfig.from_pretrained",
                               "with": "fixture_namespace",
                               "fixture": "hf_config", "fixture_file": "config.json"}
    if megatron:
        replace["from_args"] = dict(MEGATRON_HF_NAMES)
    return replace


def _entry(modules: dict[str, Module]) -> tuple[str, Module, str]:
    """The validator's entry: `module:parse_args` with the most options, or `module:Class.parse_args` of a
    config class parsed by tyro."""
    best: tuple[int, str, Module, str] | None = None
    for module in modules.values():
        if is_test(module):
            continue
        options = module.source.count("add_argument(")
        if "parse_args" in module.functions() and options >= MIN_OPTIONS:
            candidate = (options, f"{module.name}:parse_args", module,
                         f"{module.path} defines parse_args over {options} add_argument calls")
            best = candidate if best is None or candidate[0] > best[0] else best
        if "tyro" in module.source:
            for node in module.tree.body:
                methods = [n.name for n in getattr(node, "body", []) if isinstance(n, ast.FunctionDef)]
                if isinstance(node, ast.ClassDef) and "parse_args" in methods:
                    candidate = (10_000, f"{module.name}:{node.name}.parse_args", module,
                                 f"{module.path}: {node.name}.parse_args parses the command line with tyro")
                    best = candidate if best is None or candidate[0] > best[0] else best
    if best is None:
        raise NoValidator("no command-line validator found: no module-level parse_args with at least "
                          f"{MIN_OPTIONS} add_argument calls, no tyro config class with parse_args")
    return best[1], best[2], best[3]


def _functions(entry: Module, modules: dict[str, Module]) -> list[str]:
    """The entry module's own `*validate_args`, and those it imports from the tree without calling them
    (one it calls runs in its place in the entry's own flow: called again on its own, it would see a
    namespace the flow has not finished)."""
    own = [f"{entry.name}:{name}" for name in entry.functions() if name.endswith("validate_args")]
    called = {node.func.id for node in ast.walk(entry.tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    imported = [f"{node.module}:{alias.name}" for node in ast.walk(entry.tree)
                if isinstance(node, ast.ImportFrom) and node.module in modules and node.level == 0
                for alias in node.names
                if alias.name.endswith("validate_args") and (alias.asname or alias.name) not in called
                and alias.name in modules[node.module].functions()]
    return list(dict.fromkeys([*own, *imported]))


def _validation_paths(root: Path, entry: Module, used: list[Module]) -> list[str]:
    paths = [m.path for m in used]
    if "tyro" in entry.source:  # a config package: its dataclasses are the validation
        paths = [f"{PurePosixPath(entry.path).parent.as_posix()}/**", *paths[1:]]
    callers = [path.name for path in sorted(root.glob("*.py")) if entry.name in read_text(path)]
    return list(dict.fromkeys([*paths, *callers]))


def _launched_entry(entry: str, paths: list[str], modules: dict[str, Module]) -> str:
    """The entry pattern of a validator some script of the tree would launch; a validator no such script
    reaches (a tool's own `parse_args`) is not the one CI's launches validate with: raises NoValidator."""
    pattern = _entry_pattern(entry, paths)
    if not any(re.search(pattern, module.path) for module in modules.values()):
        raise NoValidator(f"{entry} parses a command line, but no script of the tree matching {pattern} "
                          "launches it")
    return pattern


def _entry_pattern(entry: str, paths: list[str]) -> str:
    """The launched scripts whose arguments are validated: the top-level scripts that call the entry, else
    the entry package's `train` module."""
    scripts = [PurePosixPath(p).stem for p in paths if "/" not in p and p.endswith(".py")]
    if scripts:
        return rf"(^|/)({'|'.join(re.escape(s) for s in scripts)})\.py$"
    package = re.escape(entry.split(".")[0])
    return rf"(^|/){package}/train\.py$"


def _sources(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """What each kind of matrix source detects in the tree (beside the kind, in `app/analysis/sources/`)."""
    for kind in KINDS.values():
        if kind.detect is not None:
            yield from kind.detect(root, recording)


def _add_needs(harness: dict[str, Any], sources: list[dict[str, Any]], root: Path) -> None:
    """What the written kinds' capture needs itself (pytest and its plugins), pinned as CI has it (the tree's
    lock or pin, else this machine's version, else unpinned), among the requirements."""
    kinds = dict.fromkeys(KINDS[source["kind"]] for source in sources)
    wanted = [name for kind in kinds if kind.needs is not None for name in kind.needs(root)]
    taken = {re.split(r"[=<>!~\[ ]", requirement, maxsplit=1)[0].lower()
             for requirement in harness["requirements"]}
    for distribution in dict.fromkeys(wanted):
        if distribution.lower() not in taken:
            harness["requirements"].append(_pinned(distribution, root))


def _pinned(distribution: str, root: Path) -> str:
    version = pinned_version(root, distribution, exact=True)
    if version is None:
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return distribution
    return f"{distribution}=={version}"


def _recording(entry_pattern: str, modules: dict[str, Module]) -> dict[str, Any]:
    """How scripts are recorded: a job submitted to Ray carries its environment in --runtime-env-json,
    any other in what the script exports."""
    ray_jobs = any("runtime-env-json" in module.source for module in modules.values())
    return {"entry": entry_pattern, "launchers": list(LAUNCHERS),
            "env_from": ["runtime_env_json"] if ray_jobs else ["exported"]}


def _harness(root: Path, used: list[Module], modules: dict[str, Module],
             stack_from: list[Module]) -> dict[str, Any]:
    harness: dict[str, Any] = packages_harness(root, used, modules, stack_from=stack_from)
    if "torch" in harness["real_packages"]:
        harness["limits"] = {"memory_mb": TORCH_LIMITS["memory_mb"]}
    return harness


def refine(starter: Starter, suites: Iterable[Suite], health: Health, root: Path | None = None) -> Starter:
    """STARTER with what one doctor round asks for; the changes listed in its last `rounds` entry (empty:
    nothing more to do). ROOT, the tree, lets it read the line a base error is at."""
    refined = starter.copy()
    suites = list(suites)
    errors = [f"{g.example.exception or ''}: {g.example.message or ''}" for g in health.errors]
    errors += [failure.reason for failure in (*health.failed, *health.partial)]
    # Paths the suites name exist on CI's hosts for the scripts that run there; suites read from data files
    # (yaml_args, static) run no script: there, only the paths validation failed on.
    kinds = {source["kind"] for source in refined.policy["matrix"]["sources"]}
    named = _suite_paths(suites) if kinds - {"yaml_args", "static"} else iter(())
    changes = _host_prefixes(refined, [*named, *_error_paths(errors)])
    changes += _config_fixture(refined, suites, errors)
    for text in errors:
        changes += _attribute_default(refined.policy["validation"], text, refined.why)
    if root is not None:
        for group in health.errors:
            changes += _unset_options(refined, root, group.example)
            changes += _offline_answer(refined, root, group.example)
            changes += _asks_absent_package(refined, root, group.example)
        changes += _runner_variables(refined, root, health)
        changes += _package_versions(refined, root, errors)
        failures = [*(group.example for group in health.errors), *capture_failures(
            failure.reason for failure in (*health.failed, *health.partial))]
        changes += _declared_packages(refined, root, failures)
        changes += ci_has_declared(refined, root, failures)
        changes += _config_stack_at(refined, root, failures)
        changes += real_config_types(refined, root, failures)
        changes += real_torch(refined, root, failures)
    refined.rounds.append(changes)
    return refined


def _suite_paths(suites: list[Suite]) -> Iterator[str]:
    for suite in suites:
        for word in (*suite.argv, *suite.env.values()):
            yield from _ABSOLUTE.findall(word)


def _error_paths(errors: list[str]) -> Iterator[str]:
    for text in errors:
        if any(cue in text for cue in ("No such file", "not found", "Read-only file system", "exist")):
            yield from _ABSOLUTE.findall(text)


def _host_prefixes(starter: Starter, paths: Iterable[str]) -> list[str]:
    """The top directories of CI hosts that suites name or scripts fail on: present, as on a CI host."""
    harness = starter.policy.setdefault("harness", {})
    known = harness.get("existing_path_prefixes", [])
    tops = sorted({"/dev/shm/" if path.startswith("/dev/shm/") else f"/{path.split('/')[1]}/"
                   for path in paths if len(path) > 1}
                  - {f"/{name}/" for name in HOST_DIRS} - set(known))
    if not tops:
        return []
    harness["existing_path_prefixes"] = [*known, *tops]
    starter.why["harness.existing_path_prefixes"] = ("directories of CI hosts that the suites name or the "
                                                     "scripts failed on: they exist there")
    return [f"harness.existing_path_prefixes += {tops}"]


def _config_fixture(starter: Starter, suites: list[Suite], errors: list[str]) -> list[str]:
    """The HF config the validation reads (replace ... fixture hf_config): served for every model
    directory the suites name, as one small model's."""
    replaces = starter.policy["validation"].get("replace", [])
    fixtures = starter.policy["harness"].setdefault("fixtures", [])
    if not any(r.get("fixture") == "hf_config" for r in replaces) or any(f.get("name") == "hf_config"
                                                                          for f in fixtures):
        return []
    patterns: Counter[str] = Counter()
    for text in errors:
        patterns.update(_model_pattern(p) for p in _ABSOLUTE.findall(text) if p.endswith("/config.json"))
    for suite in suites:
        for flag, value in zip(suite.argv, suite.argv[1:], strict=False):
            if _MODEL_FLAG.search(flag) and value.startswith("/"):
                patterns[_model_pattern(value.rstrip("/") + "/config.json")] += 1
    # Hydra overrides: the models' own directory (`/root/models`), any depth beneath (`Qwen/Qwen2.5-0.5B`)
    models = Counter("/".join(m.group(1).split("/")[:3]) for s in suites for w in s.argv
                     if (m := _MODEL_OVERRIDE.match(w)) and m.group(1).count("/") >= 3)
    if models:
        patterns = Counter({f"{models.most_common(1)[0][0]}/**/config.json": 1})
    if not patterns:
        return []
    pattern = patterns.most_common(1)[0][0]
    fixtures.append({"path": pattern, "name": "hf_config", "content": dict(HF_CONFIG)})
    starter.why["harness.fixtures"] = ("the HF config of the models the suites name: one small model's for "
                                       "all, its sizes following each suite's options")
    return [f"harness.fixtures += hf_config at {pattern}"]


def _attribute_default(validation: dict[str, Any], text: str, why: dict[str, str]) -> list[str]:
    """An option the validator reads that no parser defines: a neutral default by its name's shape (sizes
    1, switches false, anything else None)."""
    match = ATTRIBUTE.search(text)
    if match is None or "Namespace" not in text:
        return []
    name = match.group(1)
    defaults = validation.setdefault("attribute_defaults", {})
    if name in defaults:
        return []
    defaults[name] = neutral_default(name)
    why["validation.attribute_defaults"] = ("options the validator reads that no parser in the tree defines "
                                            "(upstream-owned): a neutral default each; check them")
    return [f"validation.attribute_defaults.{name} = {defaults[name]!r}"]


def _unset_options(starter: Starter, root: Path, error: Outcome) -> list[str]:
    """A None compared or iterated at the error's line (`args.sglang_dp_size > 1`): options a parser
    upstream would have set; a default for those whose name says its shape (a size 1, a switch false)."""
    if error.exception != "TypeError" or "NoneType" not in (error.message or "") or not error.path:
        return []
    line = _line(root, error.path, error.line or 0)
    defaults = starter.policy["validation"].setdefault("attribute_defaults", {})
    changes = []
    for name in dict.fromkeys(re.findall(r"\bargs\.(\w+)", line)):
        value = neutral_default(name)
        if name not in defaults and value is not None:
            defaults[name] = value
            changes.append(f"validation.attribute_defaults.{name} = {value!r}")
    if changes:
        starter.why["validation.attribute_defaults"] = ("options the validator reads that no parser in the "
                                                        "tree sets: a neutral default each; check them")
    return changes


def _offline_answer(starter: Starter, root: Path, error: Outcome) -> list[str]:
    """The function that asked a server (no network in the sandbox) answers empty (starter_offline)."""
    found = offline_answer(error, root)
    validation = starter.policy["validation"]
    if found is None or any(r["target"] == found[0]["target"] for r in validation.get("replace", [])):
        return []
    validation.setdefault("replace", []).append(found[0])
    starter.why["validation.replace"] = "; ".join(filter(None, [starter.why.get("validation.replace"),
                                                                found[1]]))
    return [f"validation.replace += {found[0]['target']} returns {found[0]['value']!r}"]


def _runner_variables(starter: Starter, root: Path, health: Health) -> list[str]:
    """`os.environ["http_proxy"]` failing in a CI script: a variable the CI runner has; set, empty, in the
    environment of every source's scripts."""
    names = []
    for failure in (*health.failed, *health.partial):
        match = re.search(r"KeyError: '(\w+)' \(at ([^:()]+):(\d+)\)", failure.reason)
        if match and "environ" in _line(root, match.group(2), int(match.group(3))):
            names.append(match.group(1))
    changes = []
    for source in starter.policy["matrix"]["sources"]:
        if source["kind"] != "workflow_rows":  # the one kind whose runner this policy describes
            continue
        env = source.setdefault("env", {})
        for name in dict.fromkeys(names):
            if name not in env:
                env[name] = ""
                changes.append(f"matrix.sources: env.{name} = ''")
    if changes:
        starter.why["matrix.sources.env"] = "variables the CI runner has that the scripts read"
    return changes


def _asks_absent_package(starter: Starter, root: Path, error: Outcome) -> list[str]:
    """A tree function that imports an absent (stubbed) package in its body, before the line it fails at, and
    fails on what the stub gave (`get_args(vllm.config.lora.MaxLoRARanks)` empty: IndexError): only the real
    package, in CI's image, can answer it; replaced by a function returning None, named as CI imports its
    module. Checked on the suites, the user keeps or drops it."""
    if error.exception not in ("IndexError", "TypeError", "AttributeError", "KeyError", "StopIteration") \
            or not error.path or not error.path.endswith(".py") or not error.line:
        return []
    try:
        tree = ast.parse(read_text(root / error.path))
    except (SyntaxError, ValueError):
        return []
    function = next((node for node in tree.body if isinstance(node, ast.FunctionDef)
                     and node.lineno <= error.line <= (node.end_lineno or node.lineno)), None)
    if function is None:
        return []
    # Only an import that ran before the failing line can have given what failed there; a package of the
    # tree's own (a src layout's, a workspace member's) is no absent one, whatever its directory.
    prefixes = import_prefixes(root)
    absent = [name for node in ast.walk(function) if getattr(node, "lineno", error.line) < error.line
              for name in import_names(node) if not installed(name.split(".")[0])
              and not tree_package(root, name.split(".")[0], prefixes)]
    replaces = starter.policy["validation"].get("replace", [])
    target = f"{module_name(error.path, prefixes)}:{function.name}"
    if not absent or any(r.get("target") == target for r in replaces):
        return []
    starter.policy["validation"]["replace"] = replaces
    replaces.append({"target": target, "with": "return_value", "value": None, "only_if_missing": False})
    starter.why["validation.replace"] = "; ".join(filter(None, [starter.why.get("validation.replace"), (
        f"{function.name} asks {absent[0].split('.')[0]}, absent and stubbed here, what only the real "
        "package knows: returns None (CI's image has it)")]))
    return [f"validation.replace += {target} -> None"]


_NO_MODULE = re.compile(r"No module named '([\w]+)")


def _declared_packages(starter: Starter, root: Path, failures: Iterable[Outcome]) -> list[str]:
    """A package a real one imports for the tree (`from torch.utils.tensorboard import ...` asks
    tensorboard), absent here, that the tree's dependency files ask for: CI installs it with the project,
    so it is made real (a stub only answers the tree's own imports). Only where the failing line of the
    tree imports from a real package: a package the tree imports itself is the stubs' to answer."""
    harness = starter.policy["harness"]
    changes = []
    for failure in failures:
        found = _NO_MODULE.search(failure.message or "")
        name = found.group(1) if found else ""
        real = harness["real_packages"]
        if not name or name in real or (root / name).exists() or not declared(root, name) \
                or not _imports_real_package(root, failure, real):
            continue
        version = pinned_version(root, name, exact=True)
        harness["real_packages"] = sorted([*harness["real_packages"], name])
        harness["requirements"] = [*harness["requirements"], f"{name}=={version}" if version else name]
        starter.why["harness.real_packages"] = "; ".join(filter(None, [
            starter.why.get("harness.real_packages"),
            f"{name}: a real package imports it for the tree, and the tree's dependency files ask for it"]))
        changes.append(f"harness.real_packages += {name} (imported for {failure.path}:{failure.line} by a "
                       "real package; the tree's dependency files ask for it)")
    return changes


def _config_stack_at(starter: Starter, root: Path, failures: Iterable[Outcome]) -> list[str]:
    """The configuration stack a failing module imports at its top, stubbed where validation's own modules
    did not import it (Megatron-LM's `megatron/rl`: `register_type.__fields__` of a pydantic model, an
    AttributeError on the stub): made real, as for the modules detection saw."""
    harness = starter.policy["harness"]
    changes = []
    for failure in failures:
        if not failure.path or not failure.path.endswith(".py") or not (root / failure.path).is_file():
            continue
        try:
            tree = ast.parse(read_text(root / failure.path))
        except (SyntaxError, ValueError):
            continue
        names = {name.split(".")[0] for node in tree.body for name in import_names(node)}
        for name in sorted(names & CONFIG_STACK.keys() - set(harness["real_packages"])):
            harness["real_packages"] = sorted([*harness["real_packages"], name])
            harness["requirements"] = list(dict.fromkeys([*harness["requirements"],
                                                          *requirements_for([name], root)]))
            changes.append(f"harness.real_packages += {name} (the configuration stack {failure.path} "
                           f"imports, stubbed, failed at line {failure.line})")
    return changes


def _imports_real_package(root: Path, failure: Outcome, real: list[str]) -> bool:
    if not failure.path or not failure.path.endswith(".py") or not failure.line:
        return False
    lines = read_text(root / failure.path).split("\n")
    at = lines[failure.line - 1].strip() if 0 < failure.line <= len(lines) else ""
    found = re.match(r"(?:from|import)\s+([\w]+)", at)
    return found is not None and found.group(1) in real


def _package_versions(starter: Starter, root: Path, errors: list[str]) -> list[str]:
    """A package whose installed version the validation asks (`importlib.metadata.version("vllm")`, "Minimum
    required nvidia-resiliency-ext package version"), absent here and stubbed: the version the tree's
    dependency files give CI (a stub's `__version__` is what the harness answers for it)."""
    attributes = starter.policy["harness"].get("stub_attributes", {})
    changes = []
    for text in errors:
        # "vllm version None not supported": the code's own lookup caught PackageNotFoundError
        asked = r"PackageNotFoundError|No package metadata|required .*version|\bversion None\b"
        if not re.search(asked, text, re.I):
            continue
        # the package as the error names it: quoted, after "found for", before "version None", or a
        # distribution-like name
        words = re.findall(r"'([\w.-]+)'|found for ([\w.-]+)|([\w.-]+) version None\b"
                           r"|(?<![\w./-])([a-z][a-z0-9]*(?:[-_][a-z0-9]+)+)", text)
        for distribution in dict.fromkeys(words):
            name = next(filter(None, distribution))
            module = name.replace("-", "_").lower()
            key = f"{module}.__version__"
            version = None if installed(module) or key in attributes else pinned_version(root, name)
            if version:
                attributes[key] = version
                changes.append(f"harness.stub_attributes.{key} = {version!r}")
    if changes:
        starter.policy["harness"]["stub_attributes"] = attributes
        starter.why["harness.stub_attributes"] = ("packages whose installed version the validation asks, "
                                                  "stubbed here: the version the tree's dependency files pin")
    return changes


def _line(root: Path, path: str, number: int) -> str:
    lines = read_text(root / path).split("\n")
    return lines[number - 1] if 0 < number <= len(lines) else ""


def _model_pattern(config: str) -> str:
    parts = config.split("/")
    return "/".join([*parts[:-2], "*", parts[-1]]) if len(parts) > 3 else config


def undetected(root: Path, reason: str) -> Starter:
    """The policy `init` writes where it detects no CI source (REASON): each launch run to its training
    boundary, no source yet, and the packages the tree's configuration stack needs, to fill in by hand: `init`
    writes a file whatever it found."""
    modules = read_modules(root, lambda text: True)
    starter = Starter({"version": 1, "validation": {"mode": "boundary"}, "matrix": {"sources": []},
                       "harness": packages_harness(root, [], modules, modules.values())})
    starter.why["matrix.sources"] = (f"{reason}. Name here how CI starts its suites, then run `prtriage "
                                     "doctor` on this file")
    starter.why["harness.real_packages"] = REAL_WHY
    return starter


def render(starter: Starter, header: Iterable[str] = ()) -> str:
    """The policy as YAML, each section and source preceded by the reasons it was chosen."""
    lines = [f"# {line}" for line in header]
    lines += ["# Starter policy written by `prtriage init`: every key is a guess from the tree and its",
              "# health; `prtriage doctor` tells what the analysis sees (docs/policy.md)."]
    for key, value in starter.policy.items():
        lines += _comment(starter.why, key, indent="")
        if not isinstance(value, dict):
            lines.append(yaml.safe_dump({key: value}, sort_keys=False).rstrip())
            continue
        lines.append(f"{key}:")
        for inner, item in value.items():
            lines += _comment(starter.why, f"{key}.{inner}", indent="  ")
            if key == "matrix" and inner == "sources":
                lines.append("  sources:" if item else "  sources: []")
                for index, source in enumerate(item):
                    lines += _comment(starter.why, f"matrix.sources[{index}]", indent="    ")
                    dumped = yaml.safe_dump([source], sort_keys=False, width=100).rstrip()
                    lines += [f"    {line}" for line in dumped.split("\n")]
                continue
            dumped = yaml.safe_dump({inner: item}, sort_keys=False, width=100).rstrip()
            lines += [f"  {line}" for line in dumped.split("\n")]
    return "\n".join(lines) + "\n"


def _comment(why: dict[str, str], key: str, indent: str) -> list[str]:
    reason = why.get(key)
    return [f"{indent}# {reason}"] if reason else []
