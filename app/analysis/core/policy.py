"""The policy language: where a repository's validation code and CI flag matrix live, and how to run them.

A policy is YAML validated by these pydantic models. Every field carries a description; `docs/policy.md`
documents every key and a test fails when one is missing there.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from app.analysis.core.explain import describe, location
from app.analysis.core.model import Severity
from app.analysis.sources.builtin_keys import BUILTIN_KEYS
from app.analysis.sources.source_keys import StrictModel, check_target
from app.bundled import bundled
from app.sandbox.harness.globs import glob_regex as translate_glob

POLICIES_DIR = bundled("policies")


class PolicyError(Exception):
    """A policy file that cannot be read or does not validate; the message names the key and the file."""


class Replacement(StrictModel):
    target: str = Field(description="Callable to replace, as 'package.module:attr' (dotted attrs allowed, "
                                    "e.g. 'transformers:AutoConfig.from_pretrained').")
    with_: Literal["argparse_with_provider", "fixture_namespace", "return_value", "memoize",
                   "identity_decorator"] = Field(
        alias="with",
        description="argparse_with_provider: an argparse parser fed by the extra-args provider the caller "
                    "passes, unknown flags set generically; fixture_namespace: returns a namespace built "
                    "from the named fixture's JSON content; return_value: returns `value`; memoize: the "
                    "repository's own function, computed once per arguments (for a method, per arguments "
                    "after the instance) and inherited by every suite; identity_decorator: `@target` and "
                    "`@target(...)` leave the function as it is (a compiler applied at import).")
    provider_kwarg: str = Field("extra_args_provider",
                                description="argparse_with_provider: keyword that carries the provider.")
    fixture: str | None = Field(None, description="fixture_namespace: `name` of a harness fixture.")
    fixture_file: str | None = Field(
        None, description="fixture_namespace: a file under the directory the call's first argument names "
                          "(`config.json`): when the harness serves it (a real file or a fixture of its own "
                          "path), its JSON is the namespace; else the named fixture's.")
    from_args: dict[str, str] = Field(
        default_factory=dict,
        description="fixture_namespace: namespace keys taken from the suite's parsed arguments when they are "
                    "set (`hidden_size: hidden_size`; `not NAME` negates), over the fixture's values: a CI "
                    "host's checkpoint matches the model arguments its scripts pass.")
    value: Any = Field(None, description="return_value: the JSON value returned.")
    only_if_missing: bool = Field(True, description="Replace only when the target's top-level module is "
                                                    "absent and stubbed (the usual case for upstream code).")
    required: bool = Field(False, description="A target this revision lacks (its module or attribute "
                           "does not exist yet, or no longer) fails the revision; default: it is skipped and "
                           "counted in the health as drift.")

    _target = field_validator("target")(check_target)


class Fixture(StrictModel):
    path: str = Field(description="Absolute path glob ('*' within one path segment, '**/' across "
                                  "directories) that scripts or validation read and that does not exist in "
                                  "the sandbox; the first fixture that matches serves the path.")
    content: Any = Field(description="Served when a matching path is opened: a string as is, anything else "
                                     "as JSON.")
    name: str | None = Field(None, description="Name by which a `fixture_namespace` replacement refers "
                                               "to it.")

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else json.dumps(self.content)


class Limits(StrictModel):
    memory_mb: int = Field(4096, ge=64, description="Address-space limit of each sandboxed process, MiB.")
    processes: int = Field(256, ge=8, description="Processes the sandbox may run at once.")
    file_mb: int = Field(64, ge=1, description="Largest file the sandbox may write, MiB.")
    tmp_mb: int = Field(256, ge=16, description="Size of the throwaway writable /tmp, MiB.")
    suite_seconds: float = Field(60, gt=0, description="Wall-clock limit for one suite (capture of one "
                                                       "script, or validation of one argv).")
    total_seconds: float = Field(900, gt=0, description="Wall-clock limit for one sandbox run.")
    output_mb: int = Field(16, ge=1, description="Output the sandbox may print before it is stopped, MiB.")


REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,\s-]*\])?\s*([<>=!~;@(].*)?")


def check_requirement(value: str) -> str:
    # Requirement specifiers only: a pip option ('--index-url', '-e', '-r') would let a policy line change
    # where pip looks or what it runs, which the analysis environment's key does not describe.
    if not REQUIREMENT.fullmatch(value.strip()) or "\n" in value:
        raise ValueError(f"expected a requirement specifier such as 'torch==2.13.0', got {value!r}")
    return value.strip()


class RequirementsFile(StrictModel):
    """Requirements read from a file of the analysed repository (at the revision whose policy is used)."""

    file: str = Field(description="Repo-relative path: a pip requirements file, a `pyproject.toml`, or a "
                      "`uv.lock`.")
    extra: str | None = Field(None, description="pyproject.toml: the `[project.optional-dependencies]` "
                              "extra to read; none: `[project].dependencies`.")
    packages: list[str] = Field(default_factory=list, description="uv.lock: the distributions to take from "
                                "it, each pinned at the version it locks (a lock file lists every package of "
                                "every platform: it is never installed whole).")
    exclude: list[str] = Field(default_factory=list, description="Distribution names left out (GPU-only "
                               "packages such as `flash-attn` or `transformer-engine`), case and `-`/`_` "
                               "insensitive.")


class Harness(StrictModel):
    python: list[str] = Field(default_factory=list, description="Python versions the analysis "
                              "environment may use, most wanted first ('3.12'; a single string is one "
                              "version): the first the host has (`pythonX.Y` on PATH, or the interpreter "
                              "prtriage runs on). Empty: the interpreter prtriage runs on.")
    requirements: list[str] = Field(default_factory=list, description="pip requirement specifiers the "
                                    "repository's validation needs ('torch==2.13.0', 'packaging'), "
                                    "installed by prtriage into a cached virtual environment that the "
                                    "sandbox runs (docs/policy.md, \"The analysis environment\").")
    requirements_from: list[RequirementsFile] = Field(default_factory=list, description="Files of the "
                                                      "repository to read more requirements from.")
    stub_missing_modules: bool = Field(True, description="Stub a missing top-level module when repository "
                                                         "code imports it.")
    stub_modules: list[str] = Field(default_factory=list, description="Top-level modules stubbed even when "
                                                                      "installed.")
    optional_imports: Literal["absent", "stubbed"] = Field("absent", description="An absent package that "
                                                           "repository code imports optionally (inside a "
                                                           "`try:` catching ImportError, or probed with "
                                                           "importlib.util.find_spec): 'absent' fails the "
                                                           "import as on a host without it; 'stubbed' "
                                                           "stubs it.")
    ci_has: list[str] = Field(default_factory=list, description="Top-level packages CI has: their optional "
                              "imports are stubbed even with optional_imports 'absent'.")
    real_packages: list[str] = Field(default_factory=list, description="Import names that must be real "
                                     "inside the sandbox (never stubbed); a missing one is an error.")
    backports: dict[str, str] = Field(default_factory=dict, description="Attributes set on real modules "
                                      "that lack them, 'module.attr' -> 'other.module:attr' (the sandbox's "
                                      "Python is older than the repository's: 'typing.override' -> "
                                      "'typing_extensions:override').")
    stub_attributes: dict[str, Any] = Field(default_factory=dict, description="Values of attributes of "
                                            "stubbed modules, as 'module.attr' -> JSON value "
                                            "(e.g. 'torch.__version__': '2.5.0').")
    fixtures: list[Fixture] = Field(default_factory=list, description="Files served to scripts and "
                                    "validation when absent from the sandbox.")
    existing_path_prefixes: list[str] = Field(default_factory=list, description="Paths under these "
                                              "prefixes count as existing (os.path.exists and friends).")
    limits: Limits = Field(default_factory=Limits, description="Resource limits of the sandbox.")

    _requirements = field_validator("requirements")(lambda values: [check_requirement(v) for v in values])

    @field_validator("python", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("python")
    @classmethod
    def _versions(cls, values: list[str]) -> list[str]:
        for value in values:
            if not re.fullmatch(r"3\.\d{1,2}", value):
                raise ValueError(f"expected a Python version such as '3.12', got {value!r}")
        return values


# The policy keys of each kind of matrix source by its name: the built-in kinds (app/analysis/sources/
# `*_keys.py`), and those a module of app/analysis/sources/ registers (`registry.register`), which
# `add_source_keys` adds to the policy language.
SOURCE_KEYS: dict[str, type[BaseModel]] = {
    str(typing.get_args(keys.model_fields["kind"].annotation)[0]): keys for keys in BUILTIN_KEYS}


class Matrix(StrictModel):
    # Each item is one kind's keys, told apart by `kind`: the annotation is the union of SOURCE_KEYS, set by
    # `_rebuild_sources` once the policy's models exist.
    sources: list[Any] = Field(description="Where suites come from; several kinds may be combined.")


def add_source_keys(name: str, keys: type[BaseModel]) -> None:
    """Lets policies name the source kind `name`, with `keys` (a model whose `kind` is the literal `name`)."""
    SOURCE_KEYS[name] = keys
    _rebuild_sources()


def remove_source_keys(name: str) -> None:
    SOURCE_KEYS.pop(name, None)
    _rebuild_sources()


def _rebuild_sources() -> None:
    kinds = functools.reduce(operator.or_, SOURCE_KEYS.values())
    annotation = list[Annotated[kinds, Field(discriminator="kind")]]  # type: ignore[valid-type]
    Matrix.model_fields["sources"] = FieldInfo.merge_field_infos(Matrix.model_fields["sources"],
                                                                 annotation=annotation)
    Matrix.model_rebuild(force=True)
    Policy.model_rebuild(force=True)


class HydraCheck(StrictModel):
    function: str = Field(description="'package.module:function' called with the composed config as its "
                                      "first argument; raising rejects the suite.")
    kwargs_from: dict[str, str] = Field(default_factory=dict, description="Keyword arguments, each the "
                                        "result of a 'package.module:function' called with the config.")

    _function = field_validator("function")(check_target)

    @field_validator("kwargs_from")
    @classmethod
    def _kwargs(cls, value: dict[str, str]) -> dict[str, str]:
        return {k: check_target(v) for k, v in value.items()}


class HydraValidation(StrictModel):
    """Validation of Hydra applications: the entry's @hydra.main config composed with the suite's overrides,
    then the repository's own checks on it."""

    resolve: bool = Field(True, description="Resolve the config's interpolations before the checks.")
    checks: list[HydraCheck] = Field(default_factory=list, description="The repository's start-up checks, "
                                     "called in order on the composed config.")


ANY_PYTHON_FILE = ("**/*.py",)


class Validation(StrictModel):
    paths: list[str] = Field(default_factory=list, description="Repo-relative globs of the validation "
                             "code; a PR touching none of them needs no analysis.")
    entry: str | list[str] = Field("", description="Callable that parses and validates one argv "
                                   "(sys.argv patched), as 'package.module:function', or a list of "
                                   "alternatives, the first that imports at a revision taken; empty: each "
                                   "suite's own launch runs until its training boundary.")
    mode: Literal["validator", "boundary"] | None = Field(None, description="'validator': call `entry`; "
                                                          "'boundary': run each suite's own launch (script "
                                                          "or module, argv, environment) until the first "
                                                          "call that needs CI's hardware or services. "
                                                          "Unset: 'boundary' when no entry is named.")
    run_entry_script: bool = Field(False, description="Reach `entry` by running the suite's entry script "
                                   "as `__main__`, stopping where `entry` returns (the script passes its "
                                   "own extra-args provider and defaults).")
    functions: list[str] = Field(default_factory=list, description="Validation functions rewritten for "
                                 "record mode, as 'package.module:function'.")
    unknown_flags: Literal["error", "ignore"] = Field("error", description="What the repository does with a "
                                                      "flag it does not define; 'error' makes a removed flag "
                                                      "a blocking finding.")
    attribute_defaults: dict[str, Any] = Field(default_factory=dict, description="Values of upstream-owned "
                                               "namespace attributes that validation reads.")
    replace: list[Replacement] = Field(default_factory=list, description="Callables replaced inside the "
                                       "sandbox.")
    hydra: HydraValidation | None = Field(None, description="The entry is a @hydra.main function: the "
                                          "suite's argv are Hydra overrides composed into its config.")

    @field_validator("entry")
    @classmethod
    def _entry(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            return [check_target(v) for v in value]
        return check_target(value) if value else value

    @model_validator(mode="after")
    def _validator_named(self) -> Validation:
        if not self.entry and (self.mode == "validator" or self.run_entry_script or self.hydra is not None):
            raise ValueError("entry: a validator must be named (`package.module:function`) unless each "
                             "launch runs to its training boundary (mode: boundary)")
        return self

    @property
    def to_boundary(self) -> bool:
        """Each suite's own launch runs until its training boundary (no validator is called)."""
        return self.mode == "boundary" or not self.entry

    @property
    def entries(self) -> list[str]:
        """The named validator's alternatives, newest first (none in boundary mode)."""
        return [self.entry] if isinstance(self.entry, str) and self.entry else list(self.entry or [])

    @property
    def path_globs(self) -> list[str]:
        """The validation paths; a launch run to its boundary with none listed may read any Python file
        of the repository before training starts, so any is one."""
        if not self.paths and self.to_boundary:
            return list(ANY_PYTHON_FILE)
        return list(self.paths)

    @field_validator("functions")
    @classmethod
    def _functions(cls, value: list[str]) -> list[str]:
        return [check_target(v) for v in value]


class Severities(StrictModel):
    new_rejection: Literal["blocking", "warning", "info"] = Field("blocking", description="Severity of a "
                                                                  "suite newly rejected.")
    new_error: Literal["blocking", "warning", "info"] = Field("blocking", description="Severity of a suite "
                                                              "base accepts and head crashes on.")


class Followups(StrictModel):
    """How much the promises and prerequisites in a PR's text weigh in its check."""

    prerequisite_unmerged: Severity = Field("blocking", description="Severity of a prerequisite the PR's "
                                            "text names (\"depends on #N\") that has not merged, or an "
                                            "issue it depends on that is still open.")
    followup_pending: Severity = Field("warning", description="Severity of a promised follow-up (\"#N "
                                       "will add the fail-fast\") that has not merged yet.")
    followup_abandoned: Severity = Field("warning", description="Severity of a promised follow-up that was "
                                         "closed without merging (an issue: closed as not planned).")


class HealthRules(StrictModel):
    """When the analysis counts as blind: then its answer is "could not analyse", never a pass."""

    max_base_failures: float = Field(0.10, ge=0, le=1, description="Largest share (0 to 1) of captured "
                                     "suites the base revision may reject or error on before the analysis "
                                     "could not analyse (CI runs every one, so the base accepts them).")
    fail_open: bool = Field(False, description="What the App's check run says when it could not analyse: "
                            "false, action_required (a required check blocks); true, neutral (passes).")


class Policy(StrictModel):
    version: Literal[1] = Field(1, description="Policy language version.")
    validation: Validation = Field(default_factory=Validation, description="The validation code and how "
                                   "to call it; absent: each suite's launch runs to its training boundary.")
    matrix: Matrix = Field(description="How the CI flag matrix is found.")
    harness: Harness = Field(default_factory=Harness, description="What the sandboxed harness provides.")
    severities: Severities = Field(default_factory=Severities, description="Severity per finding kind.")
    followups: Followups = Field(default_factory=Followups, description="Severity of unmerged "
                                 "prerequisites and promised follow-ups named in the PR's text.")
    health: HealthRules = Field(default_factory=HealthRules, description="When the analysis is too blind "
                                "to judge the change.")

    def capture_digest(self) -> str:
        """Hash of what capture depends on: a change to severities or validation keeps the matrix."""
        canonical = json.dumps(self.model_dump(mode="json", by_alias=True, include={"matrix", "harness"}),
                               sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def touches_validation(self, changed_paths: list[str]) -> bool:
        return any(path_matches(p, g) for p in changed_paths for g in self.validation.path_globs)


_rebuild_sources()


def path_matches(path: str, pattern: str) -> bool:
    """Glob match on repo-relative paths: `*` and `?` stay within one segment, `**/` spans directories."""
    return glob_regex(pattern).match(path) is not None


@functools.lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex (`app/sandbox/harness/globs.py`, which the sandbox harness imports too)."""
    return translate_glob(pattern)


def parse_policy(text: str, source: str) -> Policy:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:  # the YAML reader recurses per level: a policy is never nested this deep
        raise PolicyError(f"{source}: nested too deeply to be a policy") from None
    if not isinstance(raw, dict):
        raise PolicyError(f"{source}: a policy is a mapping of keys, got {type(raw).__name__}")
    try:
        return Policy.model_validate(raw)
    except RecursionError:
        raise PolicyError(f"{source}: nested too deeply to be a policy") from None
    except ValidationError as exc:
        raise PolicyError(policy_problems(source, exc)) from None


def policy_problems(source: str, error: ValidationError) -> str:
    """Every problem of a policy, one a line, unknown keys first: a misspelt key also makes the key it
    meant "missing", and the did-you-mean is what tells the author which of the two to fix."""
    said = [(f"{location(e, Policy) or '(top level)'}: {describe(e, Policy)}", e["type"])
            for e in error.errors()]
    lines = [line for line, kind in sorted(said, key=lambda pair: _typo_rank(*pair))]
    if len(lines) == 1:
        return f"{source}: {lines[0]}"
    return f"{source}: {len(lines)} problems:" + "".join(f"\n  {line}" for line in lines)


def _typo_rank(line: str, kind: str) -> int:
    """0 a misspelt key (it has a did-you-mean), 1 another unknown key, 2 any other problem."""
    if kind != "extra_forbidden":
        return 2
    return 0 if "did you mean" in line else 1


def load_policy(path: Path) -> Policy:
    try:
        text = path.read_text()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy: {exc.strerror}") from None
    return parse_policy(text, str(path))


def builtin_policy(owner: str | None = None, name: str | None = None) -> Path:
    """policies/<owner>/<name>.yml when it exists, else policies/default.yml."""
    if owner and name:
        specific = POLICIES_DIR / owner / f"{name}.yml"
        if specific.is_file():
            return specific
    return POLICIES_DIR / "default.yml"
