"""`prtriage init`'s detection of a `yaml_args` source: recipes under tests/ whose `spec.script` passes a case
file and an entry script to a shell runner (Megatron-LM's `TRAINING_PARAMS_PATH=...`,
`TRAINING_SCRIPT_PATH=...`), the case files' maps, the runner's defaults and launch. Reads the tree only;
the source carries its reason, as the starter's other choices do (app/analysis/starter/).
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from app.analysis.core.tree_reading import Module, read_text
from app.analysis.sources.yaml_args_keys import NOT_RUN_SCOPE

MAX_CASE_FILES = 2000
# Variables a distributed launcher (torchrun) sets for each process; the first process is rank 0.
LAUNCHER_ENV = {"RANK": "0", "LOCAL_RANK": "0"}
_ENV_READ = re.compile(r"""(?:getenv|environ\.get|environ\[)\(?\s*['"](\w+)['"]""")
_PLACEHOLDER = re.compile(r"\$\{?([A-Za-z_]\w*)")
_UPPER = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def detect_yaml_args(root: Path,
                     validator: Module) -> tuple[dict[str, Any], str, list[str], list[str]] | None:
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
    source: dict[str, Any] = {"kind": "yaml_args", "recipes": [f"{d}/*.yaml" for d in directories],
                              "scopes": [s for s in scopes if not NOT_RUN_SCOPE.search(s)],
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
