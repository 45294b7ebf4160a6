"""`prtriage doctor`: one revision's health, and which policy keys would let the harness see more.

The hints are heuristics on the text of each error (the base's, grouped, and each failed CI script's):
they name the key and what to put in it; the real repository decides whether it helps.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from app.analysis.verdict.health import Health, describe, notes, summary_line

QUOTED_PATH = re.compile(r"""['"](/[^'"]+)['"]""")
# `FileNotFoundError: /root/models/GLM-5_4layer/config.json not found`: a path the code's own message names
BARE_PATH = re.compile(r"(?<![\w.])(/[\w.+-]+(?:/[\w.+*-]+)+)")
# a file of a CI host's (a suffix: `config.json`, not a directory) named in a check's own message
HOST_FILE = re.compile(r"(?<![\w.])(/(?!tmp/|repo/|proc/|usr/|dev/)[\w.+-]+(?:/[\w.+-]+)*"
                       r"/[\w+-][\w.+-]*\.[A-Za-z]\w*)\b")
UNDEFINED_FIXTURE = re.compile(r"names fixture '([^']+)', which harness.fixtures does not define")
# what a stubbed package's stand-in gave the code, by its repr (app/sandbox/harness/stubs.py)
STUB_VALUE = re.compile(r"<stub ([\w.]+)\.[\w.]+(?:\(\))?>")
MODULE = re.compile(r"""No module named ['"]?([\w.]+)""")
UNQUOTED_PATH = re.compile(r"(?<![\w.~:/'\"-])(/[\w.+-]+(?:/[\w.+-]+)*)")
# the machine's own directories: a path under them is not a CI host's
# the last part of a path that names a file, by its suffix (`config.json`), not a directory
FILE_NAME = re.compile(r"/[^/]*\.[A-Za-z]\w*$")
# a partial capture's error after the launches were recorded: the test's own checks of its outputs
AFTER_LAUNCHES = re.compile(r"\bafter \d+ launch\(es\)")
HOST_DIRS = frozenset({"tmp", "proc", "sys", "dev", "usr", "bin", "etc", "lib", "opt", "var", "run", "repo"})
ATTRIBUTE = re.compile(r"""object has no attribute ['"](\w+)['"]""")
# what a request to a server gives in the sandbox, which has no network (also read by the starter's refine
# round, app/analysis/starter/starter_offline.py)
NETWORK_CUES = ("Connection refused", "Failed to establish a new connection", "Name or service not known",
                "Temporary failure in name resolution", "Network is unreachable", "urlopen error",
                "Max retries exceeded", "NewConnectionError", "ConnectionError", "No route to host")
# `os.environ["http_proxy"]` in a CI script: a variable's name (upper case, or a proxy's lower-case one)
RUNNER_VARIABLE = re.compile(r"KeyError: '([A-Z][A-Z0-9_]*|\w*_proxy)'")
# a stubbed package's version looked up and found None (`vllm version None not supported`)
NO_VERSION = re.compile(r"\b([A-Za-z][\w.-]*) version None\b")
# the code's own refusal after an optional import took the absent branch (`try: import transformer_engine`
# ... `raise ImportError("Transformer Engine is not installed. ...")`): no "No module named" in it
NOT_INSTALLED = re.compile(r"ImportError: .*\b(?:is not installed|not available)", re.IGNORECASE)
# a stub lacks the dunder attribute a real class has (`BaseModel.__fields__` on a stubbed pydantic)
STUB_DUNDER = re.compile(r"AttributeError: (__\w+__)(?: at |$| \()")
# what a stubbed package's decorator gave back: the plain function (`@torch.library.custom_op` then
# `.register_fake`), or a parser built from a config typed with a stubbed class (tyro on grain's)
STUB_MADE = ("'function' object has no attribute", "Could not create CLI parser from the provided type")
UNREADABLE = ("PermissionError", "Permission denied", "IsADirectoryError", "NotADirectoryError")


@dataclass(frozen=True)
class Hint:
    """Policy keys that may help with one error, and what to put in them."""

    keys: tuple[str, ...]
    advice: str

    def to_json(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "advice": self.advice}


def hint_for(exception: str | None, message: str | None) -> Hint | None:
    """The policy keys that may help with an error; None when no heuristic knows it."""
    text = f"{exception or ''}: {message or ''}"
    for rule in (_matrix_not_computed, _undefined_fixture, _no_network, _runner_variable, _missing_host_path,
                 _missing_file, _unreadable_file, _empty_file, _not_installed, _missing_module,
                 _no_version, _stub_value, _stub_dunder, _stub_made, _upstream_attribute, _unknown_flags,
                 _out_of_time, _file_content):
        hint = rule(text)
        if hint is not None:
            return hint
    return None


def _matrix_not_computed(text: str) -> Hint | None:
    """A `computed_matrix` job whose producing steps gave no rows here: its `scripts` globs' scripts ran."""
    if not re.search(r"\bmatrix from \S+ not computed: ", text):
        return None
    return Hint(("matrix.sources[].github", "matrix.sources[].scripts"),
                "the producing job's step needs what the sandbox lacks (the network, a token, a tool) or "
                "another event: give it the `github` context under which it lists CI's rows, or make "
                "`scripts` name the scripts CI's rows run")


def _undefined_fixture(text: str) -> Hint | None:
    # the policy's own replacement (`fixture_namespace`) names a fixture it does not define
    name = UNDEFINED_FIXTURE.search(text)
    if name is None:
        return None
    return Hint(("harness.fixtures",), f"define the fixture the replacement names: `name: {name.group(1)}`, "
                                       "with the content it stands for (and the `path` CI hosts have it at)")


def _no_network(text: str) -> Hint | None:
    if not any(cue in text for cue in NETWORK_CUES):
        return None
    return Hint(("validation.replace",),
                "the sandbox has no network: replace the function of the tree that asks the server "
                "(`with: return_value`, what a server with no facts would answer: `{}`, `[]`)")


def _runner_variable(text: str) -> Hint | None:
    name = RUNNER_VARIABLE.search(text)
    if name is None:
        return None
    return Hint(("matrix.sources[].env",),
                f"where the code reads it from `os.environ`, {name.group(1)} is a variable CI's runner has: "
                f"set it in the source's `env` (`{name.group(1)}: ''`)")


def _missing_file(text: str) -> Hint | None:
    if not ("FileNotFoundError" in text or "No such file" in text):
        return None
    path = QUOTED_PATH.search(text)
    if path is None:  # named unquoted: a CI host's file, not one under the machine's own directories
        path = BARE_PATH.search(text)
        if path is None or path.group(1).split("/")[1] in HOST_DIRS:
            return None
    return Hint(("harness.fixtures",), f"serve the file CI hosts have: a fixture with path '{path.group(1)}' "
                                       f"(or a pattern such as '{_pattern(path.group(1))}')")


def _missing_host_path(text: str) -> Hint | None:
    """A path the repository's own check says is missing, named unquoted (radixark/miles: "ref_load
    /root/GLM-4.7-Flash_torch_dist does not exist"): a CI host's directory, which `check`'s refine round
    (and `init`'s) lists among the prefixes that exist. A file (`config.json`) is a fixture's to serve, with
    its content (`_missing_file`); a test's own check of what training would have written, after its
    launches were recorded, is nothing a policy can give."""
    path = UNQUOTED_PATH.search(text)
    if path is None or not any(cue in text for cue in ("does not exist", "not found", "No such file")) \
            or path.group(1).split("/")[1] in HOST_DIRS or FILE_NAME.search(path.group(1)) \
            or AFTER_LAUNCHES.search(text):
        return None
    prefix = "/" + path.group(1).strip("/").split("/")[0] + "/"
    return Hint(("harness.existing_path_prefixes", "harness.fixtures"),
                f"'{path.group(1)}' is on CI's hosts: list '{prefix}' in `harness.existing_path_prefixes` "
                "(it then exists, empty), or serve the file as a fixture")


def _unreadable_file(text: str) -> Hint | None:
    path = QUOTED_PATH.search(text)
    if path is None or not any(word in text for word in UNREADABLE):
        return None
    prefix = "/" + path.group(1).strip("/").split("/")[0] + "/"
    return Hint(("harness.fixtures", "harness.existing_path_prefixes"),
                f"'{path.group(1)}' looks present but cannot be read: serve it as a fixture, or check what "
                f"`harness.existing_path_prefixes` ('{prefix}') makes look present")


def _empty_file(text: str) -> Hint | None:
    # Under `harness.existing_path_prefixes` a file that CI hosts have exists here, empty: JSON or YAML
    # read from it fails on its first character.
    if "JSONDecodeError" not in text and "Expecting value: line 1 column 1" not in text:
        return None
    return Hint(("harness.fixtures",),
                "a file the harness serves empty (under `harness.existing_path_prefixes`) needs its content: "
                "a fixture with its path and the content CI hosts have")


def _not_installed(text: str) -> Hint | None:
    if NOT_INSTALLED.search(text) is None or MODULE.search(text):
        return None
    return Hint(("harness.ci_has", "harness.optional_imports"),
                "the code's own check after an optional import, which took the branch of a host without the "
                "package (`harness.optional_imports: absent`): list the package CI has in `harness.ci_has`, "
                "or set `harness.optional_imports: stubbed`")


def _missing_module(text: str) -> Hint | None:
    module = MODULE.search(text)
    if module is None and "ModuleNotFoundError" not in text and "ImportError" not in text:
        return None
    name = module.group(1).split(".")[0] if module else "the module"
    return Hint(("harness.stub_modules", "harness.real_packages"),
                f"stub {name} (`harness.stub_modules`), or make it real (`harness.real_packages`) when a "
                "stub cannot stand in for it")


def _no_version(text: str) -> Hint | None:
    name = NO_VERSION.search(text)
    if name is None:
        return None
    return Hint(("harness.stub_attributes",),
                f"the code asked {name.group(1)}'s installed version, which a stub lacks: give it the "
                f"version CI installs (`{name.group(1)}.__version__: X`, as the tree's lock or requirements "
                "pin it)")


def _stub_value(text: str) -> Hint | None:
    # `sys.exit(pytest.main(...))` with pytest stubbed exits with the stand-in's value: only the real
    # package does what the code needs from it
    stub = STUB_VALUE.search(text)
    if stub is None:
        return None
    name = stub.group(1).split(".")[0]
    return Hint(("harness.real_packages", "harness.requirements"),
                f"{name} is stubbed here and its stand-in reached this line: make it real "
                f"(`harness.real_packages: [{name}]`, with `{name}` among `harness.requirements`)")


def _stub_dunder(text: str) -> Hint | None:
    dunder = STUB_DUNDER.search(text)
    if dunder is None:
        return None
    return Hint(("harness.real_packages", "harness.requirements"),
                f"a stub has no `{dunder.group(1)}`, which the real class does: make the package the object "
                "at that line comes from real (`harness.real_packages`, its distribution among "
                "`harness.requirements`)")


def _stub_made(text: str) -> Hint | None:
    if not any(cue in text for cue in STUB_MADE):
        return None
    return Hint(("harness.real_packages", "harness.requirements"),
                "what a stubbed package made here (a decorator's function, a config field's type) lacks what "
                "the real one has: make that package real (`harness.real_packages`, its distribution among "
                "`harness.requirements`)")


def _upstream_attribute(text: str) -> Hint | None:
    attribute = ATTRIBUTE.search(text)
    if attribute is None or "AttributeError" not in text or "Namespace" not in text:
        return None
    return Hint(("validation.attribute_defaults",),
                f"give the upstream-owned option a value: `{attribute.group(1)}: <its default>`")


def _unknown_flags(text: str) -> Hint | None:
    if "unrecognized arguments" not in text:
        return None
    return Hint(("validation.unknown_flags", "validation.replace"),
                "flags an absent upstream parser defines: replace that parser (`validation.replace` with "
                "`argparse_with_provider`) or set `validation.unknown_flags: ignore`")


def _out_of_time(text: str) -> Hint | None:
    # a capture's pytest run, or a script, stopped by the time each may take (RLinf's unit-test steps
    # collect hundreds of tests in their share of it)
    if "ran out of its" not in text and "timed out after" not in text:
        return None
    return Hint(("harness.limits.suite_seconds",),
                "it ran out of the time a script or suite may take: raise `harness.limits.suite_seconds` "
                "(default 60) where the script does more than CI's launches")


def _file_content(text: str) -> Hint | None:
    # a check refusing what the harness served at a CI host's file (`/root/models/GLM-5_4layer/config.json
    # must use native GLM-5 config with model_type=glm_moe_dsa ...`): the file needs the content CI's has
    path = HOST_FILE.search(text)
    if path is None or not any(word in text for word in ("Error", "must", "expected", "nvalid")):
        return None
    return Hint(("harness.fixtures",), f"serve '{path.group(1)}' with the content the check asks for: a "
                                       "fixture with that path (before a general pattern matching it too)")


def _pattern(path: str) -> str:
    """The path with its second-to-last directory as '*' (one model's directory stands for every model's)."""
    parts = path.split("/")
    return "/".join([*parts[:-2], "*", parts[-1]]) if len(parts) > 3 else path


@dataclass(frozen=True)
class Diagnosis:
    """One error the harness met, how often, and the hint for it."""

    where: str  # "base" for a validation error group, else the capture kind ("failed", "partial" …)
    subject: str  # the error (base) or the CI script (capture)
    error: str
    count: int
    hint: Hint | None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "hint": self.hint.to_json() if self.hint else None}


def diagnose(health: Health) -> list[Diagnosis]:
    """Every base error group and every capture failure, each with its hint."""
    found = [Diagnosis("base", describe(group.example), describe(group.example), group.count,
                       hint_for(group.example.exception, group.example.message)) for group in health.errors]
    for kind, failures in (("failed", health.failed), ("partial", health.partial)):
        found += [Diagnosis(kind, failure.script, failure.reason, 1, hint_for(None, failure.reason))
                  for failure in failures]
    return found


def doctor_json(health: Health, revision: str | None) -> str:
    document = {"rev": revision, "health": health.to_json(),
                "diagnoses": [diagnosis.to_json() for diagnosis in diagnose(health)]}
    return json.dumps(document, indent=2) + "\n"


def doctor_text(health: Health, revision: str, policy: str | None = None) -> str:
    """POLICY: which policy, and why (policy_origin.PolicyOrigin.describe)."""
    lines = [f"doctor: {revision}", *([f"policy: {policy}"] if policy else []),
             f"health: {summary_line(health)}"]
    lines += notes(health)
    lines += _capture_lines(health)
    diagnoses = [d for d in diagnose(health) if d.where == "base"]
    if diagnoses:
        lines.append("base errors, most common first:")
    for diagnosis in diagnoses:
        lines.append(f"  x{diagnosis.count} {diagnosis.error}")
        lines += _hint_lines(diagnosis.hint)
    verdict = "healthy" if health.could_analyse else "could not analyse"
    lines.append(f"{verdict}: {health.reason}")
    return "\n".join(lines) + "\n"


def _capture_lines(health: Health) -> list[str]:
    lines = []
    for kind, failures in (("failed", health.failed), ("partial", health.partial),
                           ("launch no entry", health.no_entry)):
        for failure in failures:
            lines.append(f"  {kind}: {failure.script}: {failure.reason}")
            if kind == "failed":  # a partial one kept its suites; a pytest or server script is no problem
                lines += _hint_lines(hint_for(None, failure.reason))
    lines += [f"  disabled: {script}" for script in health.disabled]
    return lines


def _hint_lines(hint: Hint | None) -> list[str]:
    if hint is None:
        return ["      no policy key known to help: read the error where it happens"]
    return [f"      try {' or '.join(f'`{key}`' for key in hint.keys)}: {hint.advice}"]
