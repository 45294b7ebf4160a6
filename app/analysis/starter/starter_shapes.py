"""`prtriage init`: the shapes of trees whose validator is not a `parse_args` module of their own.

- Entry scripts around a shared validator: a function beside the tree's big `parse_args` that parses and
  validates (`megatron.training.arguments:parse_and_validate_args`), called by several top-level scripts,
  each with its own providers; CI writes each case as a YAML map (`model_config.yaml`'s `MODEL_ARGS`) that
  recipes under tests/ hand to a shell runner (`TRAINING_PARAMS_PATH=...`, `TRAINING_SCRIPT_PATH=...`).
  -> `run_entry_script: true` and a `yaml_args` source read from the recipes, the case files and the runner.
- A Hydra application started by workflow steps: app/analysis/starter/starter_hydra.py.
Both read the tree only; each choice carries its reason, as in app/analysis/starter/starter.py.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from app.analysis.core.tree_reading import Module, read_text
from app.analysis.starter.starter_hydra import hydra_shape
from app.analysis.starter.starter_tree import (
    REQUIREMENTS_WHY,
    TORCH_LIMITS,
    Starter,
    imported_modules,
    installed,
    is_test,
    pinned_version,
    real_packages,
    requirements_for,
)

MIN_OPTIONS = 10
MIN_CALLERS = 2  # entry scripts sharing one validator
MAX_CASE_FILES = 2000
# Compute capability of the GPUs CI's recipes name (their directories or platforms): what a device query
# answers on them.
CAPABILITIES = {"a100": (8, 0), "a10": (8, 6), "l20": (8, 9), "l40": (8, 9), "h20": (9, 0), "h100": (9, 0),
                "h200": (9, 0), "b200": (10, 0), "gb200": (10, 0)}
_GPU = re.compile(r"(?<![a-z0-9])(gb200|b200|h200|h100|h20|a100|a10|l40|l20)(?![a-z0-9])", re.I)
# Variables a distributed launcher (torchrun) sets for each process; the first process is rank 0.
LAUNCHER_ENV = {"RANK": "0", "LOCAL_RANK": "0"}
_ENV_READ = re.compile(r"""(?:getenv|environ\.get|environ\[)\(?\s*['"](\w+)['"]""")
_PLACEHOLDER = re.compile(r"\$\{?([A-Za-z_]\w*)")
_UPPER = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def detect_shape(root: Path, modules: dict[str, Module]) -> Starter | None:
    """The starter of a tree of one of these shapes, or None (the other detections then look)."""
    return _entry_scripts_shape(root, modules) or hydra_shape(root, modules)


# --- entry scripts around a shared validator, cases as YAML maps ------------------------------------------

def _entry_scripts_shape(root: Path, modules: dict[str, Module]) -> Starter | None:
    found = _shared_validator(root, modules)
    if found is None:
        return None
    module, function, callers = found
    source = _yaml_args(root, module)
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


def _yaml_args(root: Path, validator: Module) -> tuple[dict[str, Any], str, list[str], list[str]] | None:
    """The `yaml_args` source: recipes under tests/ whose spec.script passes a case file and an entry
    script to a shell runner; the case files' maps; the runner's defaults and launch."""
    recipes = _recipes(root)
    if not recipes:
        return None
    words = [w for _, _, found in recipes for w in found]
    config_variable = Counter(n for n, v in words
                              if v.endswith((".yaml", ".yml")) and "{" in v).most_common(1)
    entry_variable = Counter(n for n, v in words if v.endswith(".py")).most_common(1)
    if not config_variable or not entry_variable:
        return None
    config_name, entry_name = config_variable[0][0], entry_variable[0][0]
    recipes = [r for r in recipes if {config_name, entry_name} <= {n for n, _ in r[2]}]
    scripts = [str(r[1].get("spec", {}).get("script") or "") for r in recipes]
    checkout = Counter(m for s in scripts for m in re.findall(r"\bcd\s+(/[\w./-]+)", s)).most_common(1)
    mount = checkout[0][0].rstrip("/") if checkout else ""
    templates = {v for r in recipes for n, v in r[2] if n == config_name}
    cases = _case_files(root, templates, mount)
    if not cases:
        return None
    maps = Counter(k for c in cases for k, v in c.items() if isinstance(v, dict)
                   and sum(str(x).startswith("--") for x in v) * 2 > len(v) > 0)
    if not maps:
        return None
    map_key = maps.most_common(1)[0][0]
    env_maps = Counter(k for c in cases for k, v in c.items() if isinstance(v, dict) and v and k != map_key
                       and all(_UPPER.match(str(x)) and not isinstance(y, dict | list) for x, y in v.items()))
    runner = _runner_text(root, scripts, mount)
    case_text = "\n".join(yaml.safe_dump(c) for c in cases)
    # the recipe words the cases reference, and those the runner launches with (GPUS_PER_NODE): any other
    # would only tell rows with the same command line apart
    launch = _launch(runner)
    referenced = set(_PLACEHOLDER.findall(case_text)) | set(launch.values())
    recipe_variables = sorted({n for n, _ in words} & referenced - {config_name, entry_name})
    directories = sorted({r[0].parent.relative_to(root).as_posix() for r in recipes})
    scopes = sorted({str(s) for r in recipes for s in _row_values(r[1], "scope")})
    broken = re.compile(r"broken|disabled|deprecated|flaky", re.I)
    source: dict[str, Any] = {"kind": "yaml_args", "recipes": [f"{d}/*.yaml" for d in directories],
                              "scopes": [s for s in scopes if not broken.search(s)],
                              "recipe_variables": recipe_variables}
    fields = _runtime_fields(recipes, scripts)
    if fields:
        source["fields"] = fields
    source.update(config_variable=config_name, entry_variable=entry_name)
    if mount:
        source["checkout"] = mount
    source["map"] = map_key
    source["numbered_maps"] = any(f"{map_key}_2" in c for c in cases)
    if env_maps:
        source["env_map"] = env_maps.most_common(1)[0][0]
    edits = _edits(runner, map_key)
    if edits:
        source["edits"] = edits
    wanted = (set(_PLACEHOLDER.findall(case_text)) | set(launch.values())) - set(recipe_variables)
    variables = _runner_defaults(runner, wanted | ({launch["nproc"]} if "nproc" in launch else set()))
    if variables:
        source["variables"] = variables
    reads = set(_ENV_READ.findall(validator.source))
    products = _world_size(launch, recipes) if "WORLD_SIZE" in reads else None
    if products:
        source["env_products"] = {"WORLD_SIZE": products}
    env = {k: v for k, v in LAUNCHER_ENV.items() if k in reads}
    if env:
        source["env"] = env
    entries = sorted({_repo_path(v, mount) for r in recipes for n, v in r[2]
                      if n == entry_name and "{" not in v})
    reason = (f"{len(recipes)} recipes under {', '.join(directories)} pass {config_name} (a case file, its "
              f"{map_key} map flattened into argv) and {entry_name} to the runner; scopes named broken, "
              "disabled, deprecated or flaky are left out; variables, the world size and the launcher's "
              "environment as the runner sets them")
    return source, reason, [*directories, *(read_text(r[0]) for r in recipes)], entries


def _recipes(root: Path) -> list[tuple[Path, dict[str, Any], list[tuple[str, str]]]]:
    found = []
    base = root / "tests"
    for path in sorted(base.rglob("*.y*ml")) if base.is_dir() else []:
        text = read_text(path)
        if "products:" not in text or "script" not in text:
            continue
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        spec = document.get("spec") if isinstance(document, dict) else None
        script = spec.get("script") if isinstance(spec, dict) else None
        if not isinstance(script, str) or not isinstance(document.get("products"), list):
            continue
        try:
            tokens = shlex.split(script, comments=True)
        except ValueError:
            tokens = script.split()
        words = [(n, v) for n, sep, v in (t.partition("=") for t in tokens) if sep and _UPPER.match(n)]
        found.append((path, document, words))
    return found


def _row_values(document: dict[str, Any], key: str) -> list[Any]:
    values = []
    for product in document.get("products") or []:
        for block in product.get("products") or [] if isinstance(product, dict) else []:
            if isinstance(block, dict) and isinstance(block.get(key), list):
                values += block[key]
    return values


def _runtime_fields(recipes: list[tuple[Path, dict[str, Any], list[tuple[str, str]]]],
                    scripts: list[str]) -> dict[str, str]:
    """Template fields (`{assets_dir}`) no recipe row gives: the CI system fills them at run time, with
    directories of its own; any absolute path stands for them."""
    known = {"test_case"} | {k for r in recipes for k in (r[1].get("spec") or {})}
    known |= {k for r in recipes for p in r[1].get("products") or [] if isinstance(p, dict)
              for b in p.get("products") or [] if isinstance(b, dict) for k in b}
    names = {m for s in scripts for m in re.findall(r"(?<!\{)\{(\w+_dir)\}(?!\})", s)} - known
    return {name: f"/workspace/{name.removesuffix('_dir')}" for name in sorted(names)}


def _repo_path(path: str, mount: str) -> str:
    if mount and path.startswith(mount + "/"):
        path = path[len(mount) + 1:]
    return str(PurePosixPath(path.removeprefix("./")))


def _case_files(root: Path, templates: set[str], mount: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for template in sorted(templates):
        pattern = re.sub(r"\{\w+\}", "*", _repo_path(template, mount))
        for path in sorted(root.glob(pattern))[:MAX_CASE_FILES]:
            try:
                document = yaml.safe_load(read_text(path))
            except yaml.YAMLError:
                continue
            if isinstance(document, dict):
                cases.append(document)
    return cases


def _runner_text(root: Path, scripts: list[str], mount: str) -> str:
    """The shell runner the recipes start, and the scripts of its directory it names."""
    named = Counter(m for s in scripts for m in re.findall(r"\bbash\s+([\w./-]+\.sh)", s))
    if not named:
        return ""
    runner = root / _repo_path(named.most_common(1)[0][0], mount)
    text = read_text(runner)
    siblings = sorted(runner.parent.glob("*.sh")) if runner.parent.is_dir() else []
    return text + "".join(read_text(p) for p in siblings if p != runner and p.name in text)


def _edits(runner: str, map_key: str) -> list[dict[str, Any]]:
    """The runner's `yq -i '.MAP."--exit-interval" = .MAP."--train-iters"'`: a key copied from another before
    flattening, under the conditions of its enclosing `if`/`elif` on the case file's own fields (`MODE`, read
    by `yq '.MODE // "pretraining"'`; `!=` a value: the others of the runner's `TEST_TYPES=(...)`). Conditions
    on anything else (the runner's own modes) are taken as met, as in a regular CI run."""
    fields = {var: (field, default or None) for var, field, default in re.findall(
        r"(\w+)=\$\(\s*cat \$\w+ \|\s*\S*yq '\.(\w+)(?: // \"([^\"]*)\")?'\s*\)", runner)}
    lines = runner.splitlines()
    edits: list[dict[str, Any]] = []
    for number, line in enumerate(lines):
        copied = re.search(rf"yq -i '\.{map_key}\.\"([\w-]+)\" = \.{map_key}\.\"([\w-]+)\"'", line)
        if copied is None:
            continue
        when: dict[str, list[str | None]] = {}
        indent, sibling = len(line) - len(line.lstrip()), None
        for previous in reversed(lines[:number]):
            depth, stripped = len(previous) - len(previous.lstrip()), previous.strip()
            if not stripped or depth >= indent or (sibling is not None and depth == sibling
                                                   and not stripped.startswith("if ")):
                continue
            if sibling is not None and depth == sibling:  # the `if` of the elif chain: its branch is not ours
                indent, sibling = depth, None
                continue
            if not stripped.startswith(("if ", "elif ")):
                continue
            for var, operator, value in re.findall(r'"\$(\w+)"\s*(==|!=|=)\s*"([^"]*)"', stripped):
                if var in fields and operator == "!=":
                    listed = re.search(rf"\b{var}S=\(([^)]*)\)", runner)
                    others = re.findall(r'"([^"]*)"', listed.group(1)) if listed else []
                    if others:
                        when[fields[var][0]] = [v for v in others if v != value]
                elif var in fields:
                    when[fields[var][0]] = [value, *([None] if fields[var][1] == value else [])]
            if stripped.startswith("elif "):
                sibling = depth
            else:
                indent = depth
        edit: dict[str, Any] = {"key": copied.group(1), "from": copied.group(2)}
        if when:
            edit["when"] = dict(sorted(when.items()))
        edits.append(edit)
    return edits


def _launch(runner: str) -> dict[str, str]:
    found = {}
    for key, flag in (("nproc", "--nproc[_-]per[_-]node"), ("nnodes", "--nnodes")):
        match = re.search(rf"{flag}[= ]\"?\$\{{?(\w+)", runner)
        if match:
            found[key] = match.group(1)
    return found


def _runner_defaults(runner: str, names: set[str]) -> dict[str, str]:
    """The runner's own values of NAMES: `NAME=${NAME:-8}`, else its first literal `export NAME=1`, else the
    first value of the loop that sets it (`for i in $(seq 1 $N_REPEAT); do export REPEAT=$i`)."""
    loops = dict(re.findall(r"\bfor (\w+) in \$\(seq (\d+) ", runner))
    found = {}
    for name in sorted(names):
        default = re.search(rf"\b{name}=\"?\$\{{{name}:-\"?([\w.-]+)\"?\}}", runner)
        literal = re.search(rf"^\s*(?:export\s+)?{name}=\"?([\w.-]+)\"?\s*$", runner, re.M)
        looped = re.search(rf"^\s*(?:export\s+)?{name}=\"?\$\{{?(\w+)\}}?\"?\s*$", runner, re.M)
        if default or literal:
            found[name] = (default or literal).group(1)  # type: ignore[union-attr]
        elif looped and looped.group(1) in loops:
            found[name] = loops[looped.group(1)]
    return found


def _world_size(launch: dict[str, str], recipes: list[tuple[Path, dict[str, Any], list[tuple[str, str]]]]
                ) -> list[str] | None:
    """WORLD_SIZE as the launcher makes it: nodes x processes per node; the nodes from the recipe field
    the runner's node variable is named after (`NUM_NODES` -> `nodes`)."""
    if "nproc" not in launch or "nnodes" not in launch:
        return None
    spec_keys = {k for r in recipes for k in (r[1].get("spec") or {})}
    variable = launch["nnodes"].lower()
    field = next((k for k in sorted(spec_keys) if variable == k or variable.endswith(f"_{k}")), None)
    return [field, launch["nproc"]] if field else None


def _harness(root: Path, used: list[Module], modules: dict[str, Module],
             why: dict[str, str]) -> dict[str, Any]:
    real = real_packages(used, modules)
    harness: dict[str, Any] = {"stub_missing_modules": True, "real_packages": real,
                               "requirements": requirements_for(real, root)}
    why["harness.requirements"] = REQUIREMENTS_WHY
    why["harness.real_packages"] = ("packages the validation imports that this machine has; every other "
                                    "missing module is stubbed")
    backports = _backports(modules)
    if backports:
        harness["backports"] = backports
        why["harness.backports"] = (f"the tree imports from typing what Python {sys.version_info[0]}."
                                    f"{sys.version_info[1]} lacks: typing_extensions has it")
    versions = _read_versions(root, used, modules)
    if versions:
        harness["stub_attributes"] = versions
        why["harness.stub_attributes"] = ("packages whose installed version the validation reads "
                                          "(`version(\"transformer-engine\")`), absent here and stubbed: the "
                                          "version the tree's dependency files give CI")
    if "torch" in real:
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
