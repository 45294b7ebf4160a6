"""`prtriage init`: the shapes of trees whose validator is not a `parse_args` module of their own.

- Entry scripts around a shared validator: a function beside the tree's big `parse_args` that parses and
  validates (`megatron.training.arguments:parse_and_validate_args`), called by several top-level scripts,
  each with its own providers; CI writes each case as a YAML map (`model_config.yaml`'s `MODEL_ARGS`) that
  recipes under tests/ hand to a shell runner (`TRAINING_PARAMS_PATH=...`, `TRAINING_SCRIPT_PATH=...`).
  -> `run_entry_script: true` and a `yaml_args` source read from the recipes, the case files and the runner
  (app/analysis/sources/yaml_args_detect.py).
- A Hydra application started by workflow steps: app/analysis/starter/starter_hydra.py.
Both read the tree only; each choice carries its reason, as in app/analysis/starter/starter.py.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from app.analysis.core.tree_reading import Module, read_text
from app.analysis.sources.yaml_args_detect import detect_yaml_args
from app.analysis.starter.starter_hydra import hydra_shape
from app.analysis.starter.starter_tree import (
    REQUIREMENTS_WHY,
    TORCH_LIMITS,
    Starter,
    imported_modules,
    installed,
    is_test,
    packages_harness,
    pinned_version,
    requirements_for,
)

MIN_OPTIONS = 10
MIN_CALLERS = 2  # entry scripts sharing one validator
# Compute capability of the GPUs CI's recipes name (their directories or platforms): what a device query
# answers on them.
CAPABILITIES = {"a100": (8, 0), "a10": (8, 6), "l20": (8, 9), "l40": (8, 9), "h20": (9, 0), "h100": (9, 0),
                "h200": (9, 0), "b200": (10, 0), "gb200": (10, 0)}
_GPU = re.compile(r"(?<![a-z0-9])(gb200|b200|h200|h100|h20|a100|a10|l40|l20)(?![a-z0-9])", re.I)


def detect_shape(root: Path, modules: dict[str, Module]) -> Starter | None:
    """The starter of a tree of one of these shapes, or None (the other detections then look)."""
    return _entry_scripts_shape(root, modules) or hydra_shape(root, modules)


# --- entry scripts around a shared validator, cases as YAML maps ------------------------------------------

def _entry_scripts_shape(root: Path, modules: dict[str, Module]) -> Starter | None:
    found = _shared_validator(root, modules)
    if found is None:
        return None
    module, function, callers = found
    source = detect_yaml_args(root, module)
    if source is None:
        return None
    yaml_source, reason, recipe_texts, entries = source
    starter = Starter({"version": 1})
    why = starter.why
    deeper = imported_modules(module, modules)
    validation: dict[str, Any] = {"paths": _entry_paths(module, deeper, callers, entries),
                                  "entry": f"{module.name}:{function.name}", "run_entry_script": True,
                                  "unknown_flags": "error"}
    why["validation.paths"] = ("the validator's module, the tree modules it imports, and the entry scripts "
                               "the CI recipes start: a PR touching none of them needs no analysis")
    why["validation.entry"] = (f"{module.path}: {function.name} runs parse_args, then the validator; "
                               f"{len(callers)} top-level scripts call it ({', '.join(callers[:4])} ...)")
    why["validation.run_entry_script"] = ("each entry script passes its own providers and defaults: the "
                                          "suite runs its script, which stops where the validator returns")
    why["validation.unknown_flags"] = "parse_args is strict argparse: a flag no parser defines is refused"
    replace = _once_per_process(module, function, modules, why)
    replace += _device_facts(module, modules, recipe_texts, why)
    if replace:
        validation["replace"] = replace
    starter.policy["validation"] = validation
    starter.policy["matrix"] = {"sources": [yaml_source]}
    why["matrix.sources[0]"] = reason
    starter.policy["harness"] = _harness(root, [module, *deeper], modules, why)
    return starter


def _shared_validator(root: Path,
                      modules: dict[str, Module]) -> tuple[Module, ast.FunctionDef, list[str]] | None:
    """A function beside a big `parse_args` that calls it and a `*validate_args`, called by top-level
    scripts."""
    for module in modules.values():
        if is_test(module) or module.source.count("add_argument(") < MIN_OPTIONS:
            continue
        functions = module.functions()
        if "parse_args" not in functions:
            continue
        for name, node in functions.items():
            called = _called_names(node)
            if name == "parse_args" or "parse_args" not in called or isinstance(node, ast.AsyncFunctionDef):
                continue
            if not any(c.endswith("validate_args") for c in called):
                continue
            pattern = re.compile(rf"\b{re.escape(name)}\(")
            callers = [p.name for p in sorted(root.glob("*.py")) if pattern.search(read_text(p))]
            if len(callers) >= MIN_CALLERS:
                return module, node, callers
    return None


def _called_names(node: ast.AST) -> list[str]:
    return [n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def _entry_paths(module: Module, deeper: list[Module], callers: list[str], entries: list[str]) -> list[str]:
    return list(dict.fromkeys([module.path, *(m.path for m in deeper), *callers, *entries]))


def _definition(modules: dict[str, Module], module: str, name: str,
                hops: int = 3) -> tuple[Module, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """Where NAME, imported from MODULE of the tree, is defined (following re-exports of packages)."""
    found = modules.get(module)
    if found is None or hops == 0:
        return None
    if name in found.functions():
        return found, found.functions()[name]
    for origin, imported in found.imported():
        if imported == name:
            return _definition(modules, origin, name, hops - 1)
    return None


def _once_per_process(module: Module, function: ast.FunctionDef, modules: dict[str, Module],
                      why: dict[str, str]) -> list[dict[str, Any]]:
    """The validator's last call, when it is a function of the tree that asserts it runs once per process
    (`set_global_variables`: `assert var is None` on a global): after validation, and a warm harness runs
    many suites in one process."""
    calls = [s.value.func.id for s in function.body if isinstance(s, ast.Expr)
             and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)]
    imported = {name: origin for origin, name in module.imported()}
    if not calls or calls[-1] not in imported:
        return []
    name = calls[-1]
    found = _definition(modules, imported[name], name)
    if found is None or not _asserts_once(*found):
        return []
    why["validation.replace"] = (f"{function.name} ends with {name}, which asserts it runs once per process "
                                 "(globals asserted None): after validation, not part of it")
    return [{"target": f"{module.name}:{name}", "with": "return_value", "value": None,
             "only_if_missing": False}]


def _asserts_once(module: Module, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    helpers = module.functions()
    bodies = [function, *(helpers[c] for c in _called_names(function) if c in helpers)]
    return any(isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)
               and isinstance(node.test.ops[0], ast.Is) and isinstance(node.test.comparators[0], ast.Constant)
               and node.test.comparators[0].value is None for body in bodies for node in ast.walk(body))


def _device_facts(module: Module, modules: dict[str, Module], recipe_texts: list[str],
                  why: dict[str, str]) -> list[dict[str, Any]]:
    """The GPU facts the validator asks (`torch.cuda.get_device_capability()`, a tree helper returning the
    device's major version): answered as on the GPUs the CI recipes name most."""
    counts = Counter(match.lower() for text in recipe_texts for match in _GPU.findall(text))
    gpu = counts.most_common(1)[0][0] if counts else "h100"
    major, minor = CAPABILITIES[gpu]
    replace: list[dict[str, Any]] = []
    if "torch.cuda.get_device_capability(" in module.source:
        replace.append({"target": "torch.cuda:get_device_capability", "with": "return_value",
                        "value": [major, minor], "only_if_missing": False})
    for origin, name in module.imported():
        found = _definition(modules, origin, name)
        segment = ast.get_source_segment(found[0].source, found[1]) or "" if found else ""
        if re.search(r"get_device_(?:properties|capability)\(", segment) and ".major" in segment:
            replace.append({"target": f"{module.name}:{name}", "with": "return_value", "value": major,
                            "only_if_missing": False})
    if replace:
        why["validation.replace"] = "; ".join(filter(None, [why.get("validation.replace"), (
            f"device facts the validator asks: answered as on {gpu.upper()} (compute capability "
            f"{major}.{minor}), the GPU the CI recipes name most; the sandbox has none")]))
    return replace


def _harness(root: Path, used: list[Module], modules: dict[str, Module],
             why: dict[str, str]) -> dict[str, Any]:
    harness = packages_harness(root, used, modules)
    why["harness.requirements"] = REQUIREMENTS_WHY
    why["harness.real_packages"] = ("packages the validation imports that this machine has; every other "
                                    "missing module is stubbed")
    backports = _backports(modules)
    if backports:
        harness["backports"] = backports
        # what the backports are taken from must be in the analysis environment, or none applies
        harness["requirements"] = list(dict.fromkeys(
            [*harness["requirements"], *requirements_for(["typing_extensions"], root)]))
        why["harness.backports"] = (f"the tree imports from typing what Python {sys.version_info[0]}."
                                    f"{sys.version_info[1]} lacks: typing_extensions has it")
    versions = _read_versions(root, used, modules)
    if versions:
        harness["stub_attributes"] = versions
        why["harness.stub_attributes"] = ("packages whose installed version the validation reads "
                                          "(`version(\"transformer-engine\")`), absent here and stubbed: the "
                                          "version the tree's dependency files give CI")
    if "torch" in harness["real_packages"]:
        harness["limits"] = dict(TORCH_LIMITS)
        why["harness.limits"] = ("importing torch maps more than 4 GiB of address space, and takes tens of "
                                 "seconds on a loaded host")
    return harness


def _read_versions(root: Path, used: list[Module], modules: dict[str, Module]) -> dict[str, str]:
    local = {name.split(".")[0] for name in modules}
    names = {d for m in used for d in re.findall(r"\bversion\(\s*[\"']([\w.-]+)[\"']\s*\)", m.source)}
    found = {}
    for distribution in sorted(names):
        module = distribution.replace("-", "_").lower()
        version = None if module in local or installed(module) else pinned_version(root, distribution)
        if version:
            found[f"{module}.__version__"] = version
    return found


def _backports(modules: dict[str, Module]) -> dict[str, str]:
    import typing

    names = {n.strip().split(" as ")[0] for m in modules.values() if not is_test(m)
             for group in re.findall(r"^from typing import \(?([^()\n]+(?:\n[^()]*)?)\)?", m.source, re.M)
             for n in group.replace("\n", ",").split(",") if n.strip()}
    if not installed("typing_extensions"):
        return {}
    import typing_extensions

    return {f"typing.{n}": f"typing_extensions:{n}" for n in sorted(names)
            if n.isidentifier() and not hasattr(typing, n) and hasattr(typing_extensions, n)}
