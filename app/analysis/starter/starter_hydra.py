"""`prtriage init`: a Hydra application (`@hydra.main`) that CI's workflow steps start through scripts
(`python3 -m verl.trainer.main_ppo`) -> `validation.hydra` with the start-up checks its run path calls on the
config, and a `workflow_steps` source (app/analysis/sources/workflow_steps_detect.py). Reads the tree only;
each choice carries its reason."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

from app.analysis.core.tree_reading import Module, read_text
from app.analysis.sources.workflow_steps_detect import launching_scripts, steps_source
from app.analysis.starter.starter_tree import (
    REQUIREMENTS_WHY,
    TORCH_LIMITS,
    Starter,
    imported_modules,
    is_test,
    packages_harness,
)


def hydra_shape(root: Path, modules: dict[str, Module]) -> Starter | None:
    """The starter of a tree whose CI launches a Hydra application, or None."""
    apps = {m.name: (m, node, kwargs) for m in modules.values() if not is_test(m) and "hydra.main" in m.source
            for node, kwargs in _hydra_mains(m)}
    if not apps:
        return None
    launched = launching_scripts(root, set(apps))
    counts = Counter(module for _, found in launched for module in found)
    if not counts:
        return None
    name = counts.most_common(1)[0][0]
    module, function, kwargs = apps[name]
    starter = Starter({"version": 1})
    why = starter.why
    checks = _hydra_checks(module, function, modules)
    check_names = {c["function"].split(":")[1] for c in checks}
    validators = [c["function"] for c in checks if "kwargs_from" in c]
    siblings = sorted(n for n in counts if n != name and apps[n][1].name == function.name
                      and any(f"{c}(" in apps[n][0].source for c in check_names if c.startswith("validat")))
    entries = [name, *siblings]
    config_dir = PurePosixPath(module.path).parent / str(kwargs.get("config_path") or ".")
    paths = [module.path, f"{config_dir.as_posix()}/**"]
    paths += sorted({modules[c.split(":")[0]].path for item in checks
                     for c in [item["function"], *item.get("kwargs_from", {}).values()]
                     if c.split(":")[0] in modules})
    targets = _config_targets(root / config_dir, modules)
    paths += sorted({f"{PurePosixPath(m.path).parent.as_posix()}/**" for m in targets})
    paths += [apps[n][0].path for n in siblings]
    validation: dict[str, Any] = {"paths": list(dict.fromkeys(paths)), "entry": f"{name}:{function.name}"}
    why["validation.paths"] = ("the Hydra application, its config directory, the checks it runs and the "
                               "dataclasses its config instantiates: a PR touching none needs no analysis")
    why["validation.entry"] = (f"{module.path}: {function.name} is a Hydra application (@hydra.main "
                               f"config_name={kwargs.get('config_name')!r}), the one CI's scripts launch "
                               f"most ({counts[name]} launches)")
    if validators:
        validation["functions"] = validators
        why["validation.functions"] = "the validators among the checks, rewritten for record mode"
    validation["unknown_flags"] = "error"
    why["validation.unknown_flags"] = ("Hydra composes in struct mode: an override of a key the config lacks "
                                       "is refused")
    validation["hydra"] = {"resolve": "OmegaConf.resolve(" in module.source, "checks": checks}
    why["validation.hydra"] = ("the checks the application's run path calls on the composed config, in "
                               "order, with the keyword arguments it computes from the config")
    if any("AutoConfig.from_pretrained" in m.source for m in targets):
        validation["replace"] = [{"target": "transformers:AutoConfig.from_pretrained",
                                  "with": "fixture_namespace", "fixture": "hf_config",
                                  "fixture_file": "config.json"}]
        why["validation.replace"] = ("the dataclasses the config instantiates read the model's HF config: a "
                                     "fixture stands in for it")
    starter.policy["validation"] = validation
    starter.policy["matrix"] = {"sources": [steps_source(root, launched, entries, why)]}
    launches = sum(counts[e] for e in entries)
    why["matrix.sources[0]"] = (f"workflow steps run scripts that launch the application ({launches} "
                                f"launches of {', '.join(entries)} with `python -m`); each step runs as CI "
                                "runs it, its variables exported")
    used = [module, *imported_modules(module, modules)]
    harness = packages_harness(root, used, modules)
    why["harness.requirements"] = REQUIREMENTS_WHY
    why["harness.real_packages"] = ("packages the application and the modules it imports import that this "
                                    "machine has (Hydra and OmegaConf compose the config for real)")
    if "torch" in harness["real_packages"]:
        harness["limits"] = dict(TORCH_LIMITS)
        why["harness.limits"] = "importing torch maps more than 4 GiB of address space"
    starter.policy["harness"] = harness
    return starter


def _hydra_mains(module: Module) -> list[tuple[ast.FunctionDef, dict[str, Any]]]:
    found = []
    for node in module.tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
                    and decorator.func.attr == "main" and isinstance(decorator.func.value, ast.Name)
                    and decorator.func.value.id == "hydra"):
                kwargs = {k.arg: k.value.value for k in decorator.keywords
                          if k.arg and isinstance(k.value, ast.Constant)}
                found.append((node, kwargs))
    return found


def _hydra_checks(module: Module, function: ast.FunctionDef,
                  modules: dict[str, Module]) -> list[dict[str, Any]]:
    """Tree functions the application calls on its config: in its own body (`auto_set_device(config)`), and
    the validators its run path calls (`validate_config(config, use_critic=need_critic(config))`)."""
    imported = {name: origin for origin, name in module.imported()
                if origin in modules or any(m.startswith(origin + ".") for m in modules)}
    config = function.args.args[0].arg if function.args.args else "config"
    checks: list[dict[str, Any]] = []

    def config_call(call: ast.Call) -> bool:
        given = [*call.args, *(k.value for k in call.keywords if k.arg in (None, "config"))]
        return any(isinstance(a, ast.Name) and a.id == config for a in given[:1])

    for node in ast.walk(function):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported
                and config_call(node)):
            checks.append({"function": f"{imported[node.func.id]}:{node.func.id}"})
    for node in ast.walk(module.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported
                and node.func.id.startswith("validat")):
            continue
        check: dict[str, Any] = {"function": f"{imported[node.func.id]}:{node.func.id}"}
        kwargs = {k.arg: f"{imported[k.value.func.id]}:{k.value.func.id}" for k in node.keywords
                  if k.arg and isinstance(k.value, ast.Call) and isinstance(k.value.func, ast.Name)
                  and k.value.func.id in imported}
        if kwargs:
            check["kwargs_from"] = kwargs
        if check["function"] not in {c["function"] for c in checks}:
            checks.append(check)
    return checks


def _config_targets(config_dir: Path, modules: dict[str, Module]) -> list[Module]:
    """The tree modules defining the `_target_` classes the application's YAML configs instantiate."""
    targets = set()
    for path in sorted(config_dir.rglob("*.yaml")) if config_dir.is_dir() else []:
        targets |= set(re.findall(r"_target_:\s*['\"]?([\w.]+)\.(\w+)", read_text(path)))
    found = {}
    for package, cls in targets:
        for module in modules.values():
            inside = module.name == package or module.name.startswith(package + ".")
            if inside and f"class {cls}" in module.source:
                found[module.name] = module
    return [found[n] for n in sorted(found)]
