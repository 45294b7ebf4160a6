"""The yaml_args kind's policy keys."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from app.analysis.sources.source_keys import StrictModel

# A scope named so is one CI does not run (Megatron-LM's `mr-broken`): its rows are disabled, not left out
# by the policy. `init` leaves these scopes out of `scopes`; a case only in other scopes the policy does not
# list is "not considered" (recipes.py).
NOT_RUN_SCOPE = re.compile(r"broken|disabled|deprecated|flaky", re.I)


class MapEdit(StrictModel):
    """One assignment the CI runner makes to the map before flattening it, under conditions on the file."""

    key: str = Field(description="Map key assigned ('--exit-interval').")
    from_: str = Field(alias="from", description="Map key whose value it takes ('--train-iters'); absent: "
                       "null, as yq's `.a = .b` gives.")
    when: dict[str, list[Any]] = Field(default_factory=dict, description="Top-level fields of the file and "
                                       "the values for which the edit applies (an absent field is null).")


class YamlArgs(StrictModel):
    """Suites written as YAML maps flattened into argv (one file per CI test case), optionally scoped by
    recipe files that list which cases run, in which scope, with which entry script."""

    kind: Literal["yaml_args"] = Field(description="Source kind.")
    files: list[str] = Field(default_factory=list, description="Without recipes: repo-relative globs of "
                             "the YAML files, each one suite.")
    entry: str = Field("", description="Without recipes (or a recipe that names none): the entry script, "
                       "repo-relative.")
    recipes: list[str] = Field(default_factory=list, description="Repo-relative globs of recipe files "
                               "whose `products` list the cases; empty: `files` are the cases.")
    scopes: list[str] = Field(default_factory=list, description="Recipe rows of these `scope` values are "
                              "CI suites; the others are listed as disabled. Empty: every row.")
    recipe_variables: list[str] = Field(default_factory=list, description="`NAME=value` words of a "
                                        "recipe's `spec.script` read as variables of its rows.")
    fields: dict[str, str] = Field(default_factory=dict, description="Values of recipe template fields "
                                   "the CI system fills at run time ('{assets_dir}'), beneath the row's.")
    config_variable: str = Field("", description="The recipe variable naming a row's YAML file.")
    entry_variable: str = Field("", description="The recipe variable naming a row's entry script.")
    checkout: str = Field("", description="Where CI checks the repository out ('/opt/megatron-lm'): "
                          "absolute recipe paths under it are repo-relative.")
    id: str = Field("{model}/{test_case}", description="Suite id template over a recipe row's fields; "
                    "without recipes the id is the file's path.")
    map: str = Field(description="Top-level key of the map flattened into argv ('MODEL_ARGS').")
    numbered_maps: bool = Field(True, description="`<map>_2`, `<map>_3` ... (a resumed run's arguments) "
                                "each yield one more suite.")
    env_map: str | None = Field(None, description="Top-level key of a map exported as the job's "
                                "environment ('ENV_VARS').")
    variables: dict[str, str] = Field(default_factory=dict, description="The runner's own variables, "
                                      "beneath the recipe's (its defaults); a placeholder of no known "
                                      "variable becomes empty, as the launcher's shell expands it.")
    edits: list[MapEdit] = Field(default_factory=list, description="Assignments the CI runner makes to the "
                                 "map before flattening it.")
    env: dict[str, str] = Field(default_factory=dict, description="Job environment of every suite.")
    env_products: dict[str, list[str]] = Field(default_factory=dict, description="Job variables that are "
                                               "the product of numeric recipe fields or variables "
                                               "(WORLD_SIZE: [nodes, GPUS_PER_NODE]).")
