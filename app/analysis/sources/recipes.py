"""The cases of a yaml_args source: recipe rows (which case runs in which scope, with which entry script and
variables), each case's YAML file flattened into suites.

A recipe (Megatron-LM's `tests/test_utils/recipes/**/*.yaml`) has a `spec` (model, nodes, gpus, the shell
`script` CI runs) and `products`: per test case, blocks whose list-valued keys (environment, scope,
platforms) multiply into rows, as the repository's own `recipe_parser.flatten_products` expands them; a row
overrides the spec's keys. Recipes are a pull request's content: read with yaml.safe_load, bounded. Pure:
files come in as text through `read`. The yaml_args kind's module: its cases are listed on the host, and
nothing of them runs in the sandbox.
"""

from __future__ import annotations

import functools
import itertools
import logging
import posixpath
import shlex
import string
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from app.analysis.core.model import CaptureFailure, Suite
from app.analysis.core.policy import path_matches
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree
from app.analysis.sources.yaml_args import FlatSuite, flatten_file
from app.analysis.sources.yaml_args_keys import NOT_RUN_SCOPE, YamlArgs
from app.analysis.sources.yaml_plain import MAX_FILE_BYTES, SAFE_LOADER, YamlError

MAX_ROWS_PER_RECIPE = 4096
log = logging.getLogger(__name__)
Read = Callable[[str], str]


@dataclass(frozen=True)
class RecipeRow:
    """One expanded product of a recipe: its fields (spec and product) and the script's variables."""

    recipe: str
    fields: Mapping[str, Any]
    variables: Mapping[str, str]


@dataclass(frozen=True)
class CaseSuite:
    id: str
    case: str  # the YAML file, repo-relative
    argv: tuple[str, ...]
    env: Mapping[str, str]
    entry: str


@dataclass
class CaseListing:
    """Per case (a suite id), its suites or why it has none; cases CI does not run are disabled."""

    suites: list[CaseSuite] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (case, reason)
    no_entry: list[tuple[str, str]] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    # cases of scopes the policy's `scopes` leaves out: CI may run them, the analysis does not consider them
    not_considered: list[str] = field(default_factory=list)
    cases: int = 0
    captured: int = 0
    notes: list[str] = field(default_factory=list)


def recipe_rows(text: str, path: str, source: YamlArgs) -> list[RecipeRow]:
    """The rows of one recipe, in order. Raises YamlError."""
    if len(text.encode()) > MAX_FILE_BYTES:
        raise YamlError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    try:
        recipe = yaml.load(text, Loader=SAFE_LOADER)
    except (yaml.YAMLError, RecursionError) as exc:
        raise YamlError(f"{path}: not valid YAML: {exc}") from None
    spec = recipe.get("spec") if isinstance(recipe, dict) else None
    if not isinstance(spec, dict):
        raise YamlError(f"{path}: no `spec` mapping")
    rows = []
    for fields in itertools.islice(_products(recipe.get("products")), MAX_ROWS_PER_RECIPE):
        merged = {**source.fields, **{k: v for k, v in spec.items() if k not in fields}, **fields}
        # A field may be a template of others (`name: "{test_case}_{environment}_{platforms}"`): one pass.
        merged = {k: _fill(v, merged) if isinstance(v, str) and k != "script" else v
                  for k, v in merged.items()}
        rows.append(RecipeRow(recipe=path, fields=merged,
                              variables=script_variables(str(spec.get("script") or ""), source, merged)))
    return rows


def _products(products: Any) -> Iterator[dict[str, Any]]:
    """recipe_parser.flatten_products: per test case, each block's lists multiplied (cadence is no axis)."""
    for product in products if isinstance(products, list) else ():
        if not isinstance(product, dict) or not isinstance(product.get("products"), list):
            continue
        cases = product.get("test_case")
        if not isinstance(cases, list) or not cases:
            continue
        for block in product["products"]:
            if not isinstance(block, dict):
                continue
            keys = [k for k in block if k != "cadence" and isinstance(block[k], list)]
            for combination in itertools.product(*(block[k] for k in keys)):
                yield {**dict(zip(keys, combination, strict=True)), "test_case": cases[0]}


def script_variables(script: str, source: YamlArgs, fields: Mapping[str, Any]) -> dict[str, str]:
    """The `NAME=value` words of the recipe's shell script for the names the source reads, their `{field}`
    templates filled from the row (JET's own formatting: `{test_case}`, `${{HOME}}` -> `${HOME}`)."""
    wanted = set(source.recipe_variables) | {source.config_variable, source.entry_variable} - {""}
    found: dict[str, str] = {}
    for word in _script_words(script):
        name, sep, value = word.partition("=")
        if sep and name in wanted and name not in found:
            found[name] = _fill(value, fields)
    return found


@functools.lru_cache(maxsize=256)
def _script_words(script: str) -> tuple[str, ...]:
    """The script's shell words: one recipe's script serves each of its rows, split once."""
    try:
        return tuple(shlex.split(script, comments=True))
    except ValueError:
        return tuple(script.split())


def _fill(template: str, fields: Mapping[str, Any]) -> str:
    try:
        return _KeepUnknown().vformat(template, (), dict(fields))
    except (ValueError, IndexError, AttributeError, TypeError):
        return template


class _KeepUnknown(string.Formatter):
    """A field the row does not have (`{assets_dir}`, filled by JET at run time) stays as written."""

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        if isinstance(key, str) and key not in kwargs:
            return "{" + key + "}"
        return super().get_value(key, args, kwargs)


def repo_path(path: str, checkout: str) -> str:
    """A recipe's path as repo-relative: `./x` -> `x`, `<checkout>/x` -> `x`."""
    mount = checkout.rstrip("/")
    if mount and path.startswith(mount + "/"):
        path = path[len(mount) + 1:]
    return posixpath.normpath(path) if path else path


def list_cases(source: YamlArgs, paths: list[str], read: Read) -> CaseListing:
    """Every case of the source among the tree's `paths`, flattened into suites."""
    if not source.recipes:
        return _file_cases(source, paths, read)
    listing = CaseListing()
    rows: list[RecipeRow] = []
    for path in sorted(p for p in paths if any(path_matches(p, g) for g in source.recipes)):
        try:
            rows += recipe_rows(read(path), path, source)
        except (OSError, YamlError) as exc:
            listing.notes.append(str(exc))
    _row_cases(source, rows, set(paths), read, listing)
    return listing


def _file_cases(source: YamlArgs, paths: list[str], read: Read) -> CaseListing:
    listing = CaseListing()
    for path in sorted(p for p in paths if any(path_matches(p, g) for g in source.files)):
        listing.cases += 1
        _flatten_case(listing, path, path, source.entry, dict(source.env), dict(source.variables), read,
                      source)
    return listing


def _row_cases(source: YamlArgs, rows: list[RecipeRow], tree: set[str], read: Read,
               listing: CaseListing) -> None:
    enabled: dict[str, list[RecipeRow]] = {}
    off: dict[str, str] = {}
    left_out: set[str] = set()  # cases with a row in a scope CI runs (by its name) and the policy leaves out
    for row in rows:
        case_id, scope = _fill(source.id, row.fields), str(row.fields.get("scope"))
        if source.scopes and scope not in source.scopes:
            off.setdefault(case_id, f"{case_id} (scope {scope})")
            left_out |= {case_id} if not NOT_RUN_SCOPE.search(scope) else set()
            continue
        enabled.setdefault(case_id, []).append(row)
    for case_id, label in sorted(off.items()):
        if case_id not in enabled:
            (listing.not_considered if case_id in left_out else listing.disabled).append(label)
    for case_id, case_rows in sorted(enabled.items()):
        listing.cases += 1
        seen: set[tuple[Any, ...]] = set()
        for row in case_rows:
            variables = {**source.variables, **row.variables}  # the policy's are the runner's defaults
            config = repo_path(row.variables.get(source.config_variable, ""), source.checkout)
            entry = repo_path(row.variables.get(source.entry_variable, "") or source.entry, source.checkout)
            if not config or not entry:
                missing = source.config_variable if not config else source.entry_variable
                listing.no_entry.append((case_id, f"{row.recipe}: its script sets no {missing}"))
                break
            if config not in tree:
                listing.failed.append((case_id, f"{row.recipe}: {config} is not in the tree"))
                break
            env = {**source.env, **_products_env(source, {**variables, **row.fields})}
            key = (config, entry, tuple(sorted(env.items())), tuple(sorted(variables.items())))
            if key not in seen:  # the same case in several scopes or environments is one command line
                seen.add(key)
                _flatten_case(listing, case_id, config, entry, env, variables, read, source)


def _products_env(source: YamlArgs, fields: Mapping[str, Any]) -> dict[str, str]:
    env = {}
    for name, factors in source.env_products.items():
        product = 1
        for factor in factors:
            value = fields.get(factor)
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                break
            product *= value
        else:
            env[name] = str(product)
    return env


def _flatten_case(listing: CaseListing, case_id: str, config: str, entry: str, env: dict[str, str],
                  variables: dict[str, str], read: Read, source: YamlArgs) -> None:
    try:
        flat = flatten_file(read(config), source, variables)
    except (OSError, YamlError) as exc:
        listing.failed.append((case_id, f"{config}: {exc}"))
        return
    if not any(s.id == case_id for s in listing.suites):
        listing.captured += 1
    listing.suites += [_suite(case_id, config, one, entry, env) for one in flat]


def _suite(case_id: str, config: str, flat: FlatSuite, entry: str, env: dict[str, str]) -> CaseSuite:
    suite_id = case_id if flat.run == 1 else f"{case_id}#run{flat.run}"
    return CaseSuite(id=suite_id, case=config, argv=flat.argv, env={**env, **flat.env}, entry=entry)


def list_items(source: YamlArgs, tree: SourceTree, where: str) -> Listing:
    """A yaml_args source's cases, read on the host (the files are data: nothing of them runs)."""
    listing = list_cases(source, list(tree.paths()), tree.read)
    for note in listing.notes:
        log.warning("yaml args: %s", note)
    return Listing(suites=tuple(Suite(id=s.id, script=s.case, argv=s.argv, env=dict(s.env), entry=s.entry)
                                for s in listing.suites),
                   failed=tuple(CaptureFailure(case, reason) for case, reason in listing.failed),
                   no_entry=tuple(CaptureFailure(case, reason) for case, reason in listing.no_entry),
                   disabled=tuple(listing.disabled), not_considered=tuple(listing.not_considered),
                   cases=listing.cases, captured=listing.captured)


KIND = SourceKind(YamlArgs, list_items)
