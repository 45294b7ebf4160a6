"""The python_definitions kind: functions of the repository, called in the sandbox, return the suites."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.analysis.core.tree_reading import read_modules, read_text
from app.analysis.sources.python_definitions_keys import PythonDefinitions
from app.analysis.sources.recorded import from_definitions
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree

RUNNER_TEMP = "/home/runner/_work/_temp"  # $RUNNER_TEMP on GitHub's hosted and self-hosted runners
_SHELL_DEFAULT = re.compile(r"^\s*(\w+)=\$\{\1:-[\"']?([\w.-]+)[\"']?\}", re.M)
_SHELL_FLAG = re.compile(r"(--[\w.-]+)\s+\"?\$\{?(\w+)\}?\"?")
_ENV_FROM_ATTRIBUTE = re.compile(r"\b(\w+)=\{\w+\.(__module__|__name__)\}")


def list_items(source: PythonDefinitions, tree: SourceTree, where: str) -> Listing:
    """One item per function, called in the job's environment: CI's runner imports the definitions' module
    there, and a module may read it at import (`os.getenv("RUNNER_TEMP")` for an absolute load path)."""
    return Listing(items=tuple({"id": target, "script": target, "env": dict(source.env)}
                               for target in source.functions))


def detect(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """`prtriage init`: test modules that return lists of `...Definitions(...)`, run by a runner script CI
    calls (their suites are no launches: `recording` is not theirs)."""
    base = root / "tests"
    if not base.is_dir():
        return
    modules = read_modules(base, lambda text: "Definitions(" in text)
    functions = [f"tests.{m.name}:{name}" for m in sorted(modules.values(), key=lambda m: m.path)
                 for name, node in m.functions().items()
                 if "Definitions(" in (ast.get_source_segment(m.source, node) or "")]
    definition = _definition_class(base)
    if not functions or definition is None:
        return
    fields = set(definition)
    source: dict[str, Any] = {"kind": "python_definitions", "functions": functions,
                              "name": "test_name" if "test_name" in fields else "name"}
    if "disabled" in fields:
        source["disabled"] = "disabled"
    if "override_args" in fields:
        source["runs"], source["shell_words"] = "override_args", True
    source.update(_runner(root, fields))
    yield source, f"{len(functions)} functions of tests/ build the integration tests' definitions"


def _definition_class(base: Path) -> list[str] | None:
    for module in read_modules(base, lambda text: "class " in text and "Definitions" in text).values():
        for node in module.tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Definitions"):
                return [n.target.id for n in node.body
                        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    return None


def _runner(root: Path, fields: set[str]) -> dict[str, Any]:
    """The entry and the words a run gets from the runner script: `-m package.train`, and flags the shell
    launcher fills from variables the test runner sets from a per-run config (`MODULE={fn.__module__}`)."""
    shells = {p: read_text(p) for p in sorted(root.glob("*.sh"))}
    runner_text = "".join(read_text(p) for p in (root / "tests").rglob("run_tests.py"))
    found: dict[str, Any] = {}
    for _path, text in shells.items():
        module = re.search(r"-m\s+([\w.]+\.train)\b", text)
        if not module:
            continue
        found["entry"] = module.group(1).replace(".", "/") + ".py"
        variables = dict(_ENV_FROM_ATTRIBUTE.findall(runner_text))
        per_run = next((f for f in ("configs", "config") if f in fields), None)
        args: list[str] = []
        defaults: dict[str, str] = {}
        shell_defaults = dict(_SHELL_DEFAULT.findall(text))
        for flag, variable in _SHELL_FLAG.findall(text[module.end():].split("\n", 1)[0]):
            if variable in variables and per_run:
                placeholder = f"{per_run}.{variables[variable]}"
                args += [flag, f"{{{placeholder}}}"]
                if variable in shell_defaults:
                    defaults[placeholder] = shell_defaults[variable]
        if args and per_run:
            found.update(per_run=[per_run], args=args, defaults=defaults)
        found.update(_output_dir(root, runner_text, found.get("args", [])))
        break
    return found


def _output_dir(root: Path, runner_text: str, args: list[str]) -> dict[str, Any]:
    """The runner's output-directory flag (`f"--dump_folder {output_dir}/{test_name}"`) with the directory
    the workflows give it (`$RUNNER_TEMP/...`, GitHub's runner's own directory)."""
    flag = re.search(r"[\"'](--[\w.]+) \{output_dir\}/\{test_name\}", runner_text)
    workflows = "".join(read_text(p) for p in sorted((root / ".github" / "workflows").glob("*.y*ml")))
    given = re.search(r"-m\s+tests\.[\w.]*run_tests\b[^\n]*?\s\$\{?RUNNER_TEMP\}?(/[\w./-]+)", workflows)
    if flag is None or given is None:
        return {}
    output = f"{RUNNER_TEMP}{given.group(1).rstrip('/')}/{{definition.test_name}}"
    return {"args": [*args, flag.group(1), output], "env": {"RUNNER_TEMP": RUNNER_TEMP}}


KIND = SourceKind(PythonDefinitions, list_items, from_definitions, detect)
