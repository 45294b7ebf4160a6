"""What every kind's policy keys are made of: a strict model, a callable named as 'package.module:attr', and
how a CI script's launches are recorded (shared by the kinds that run scripts).

The keys modules of app/analysis/sources/ (`*_keys.py`) import nothing of the app but each other: the policy
language (`core/policy.py`) is built on them, below the kinds that list and record.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_target(value: str) -> str:
    module, sep, attr = value.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected 'package.module:attribute', got {value!r}")
    return value


def push_to_main() -> dict[str, str]:
    """The `github` context of a push to main: what CI runs on the default branch."""
    return {"event_name": "push", "ref": "refs/heads/main", "base_ref": "main"}


GITHUB_CONTEXT = ("The `github` context the steps of a job that computes a matrix read (`event_name`, "
                  "`ref`, `base_ref`, `head_ref` ...), also as their GITHUB_* variables; any other name of "
                  "it is unknown, and a step whose text needs one is left out.")


class Registration(StrictModel):
    function: str = Field(description="Callable each CI script calls at import to register itself, "
                                      "as 'package.module:function'.")
    disabled_kwarg: str = Field("disabled", description="Keyword whose truthy value means CI skips the "
                                                        "script.")
    suite_kwarg: str | None = Field("suite", description="Keyword naming the CI stage; reported "
                                                        "with the script's registration.")

    _function = field_validator("function")(check_target)


class Recording(StrictModel):
    """How a CI script's launches are recorded: shared by the sources that run scripts."""

    command: list[str] = Field(["python3", "{script}"], description="How CI invokes one script, from the "
                               "repository root; '{script}' is its path.")
    entry: str = Field(description="Regex on a launched command's words: the first word it matches is the "
                                   "validated entry script; the words after it are the suite's argv.")
    launchers: list[str] = Field(["python", "python3", "torchrun", "ray", "deepspeed", "accelerate"],
                                 description="Commands the recording bash records instead of running.")
    env_from: list[Literal["runtime_env_json", "exported"]] = Field(
        ["runtime_env_json"], description="Where the job's environment comes from: the env_vars of a "
        "'--runtime-env-json' option before the entry, and/or variables bash exported.")
    env_keep: list[str] = Field(default_factory=list, description="Exported variables kept in the suite "
                                "environment (with env_from: exported); empty keeps all.")
    registration: Registration | None = Field(None, description="How scripts register with CI, if they do.")
