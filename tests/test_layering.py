"""The house's import rules, read from the source: each room of app/ imports only the rooms below it
(docs/architecture.md, "The rooms"), no module imports itself back through others (no cycle), analysis/ is
pure (no GitHub, no store, no web, no queue), PyGithub lives only in github/, and the sandbox harness, which
runs inside bubblewrap against repository code, imports nothing of the app but itself."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"


def _module(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[str]:
    """Every module PATH imports, anywhere in it (inside functions too), as an absolute name."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _runtime_imports(path: Path) -> Iterator[str]:
    """The modules of the app PATH imports when it runs (imports under `if TYPE_CHECKING:` are for the type
    checker alone): for `from X import Y`, X.Y when it is a module of the app, else X."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(node) for block in ast.walk(tree)
                   if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                   for stmt in block.body for node in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    yield f"{base}.{alias.name}"
                elif base in MODULES:
                    yield base


MODULES = {_module(path): path for path in APP.rglob("*.py")}


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    return {name: set(_runtime_imports(path)) - {name} for name, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a cycle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for other in sorted(graph.get(name, ())):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == name:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


# Each room of app/ (a package, or a module directly in app/) and the rooms it may import: only rooms below
# it, so that the rooms form layers (docs/architecture.md draws them).
BELOW: dict[str, frozenset[str]] = {
    "bundled": frozenset(),
    "logsetup": frozenset(),
    "trees": frozenset(),
    "harness": frozenset(),  # app/sandbox/harness/: runs in the sandbox, imports nothing of the app
    "analysis": frozenset({"bundled", "harness"}),
    "config": frozenset({"analysis", "trees"}),
    "store": frozenset({"bundled"}),
    "sandbox": frozenset({"analysis", "bundled", "harness"}),
    "github": frozenset({"analysis", "config", "trees"}),
    "engine": frozenset({"analysis", "bundled", "sandbox", "trees"}),
    "service": frozenset({"config", "github", "store"}),
    "triage": frozenset({"analysis", "bundled", "config", "engine", "github", "service", "store", "trees"}),
    "webhooks": frozenset({"config", "service", "store", "triage"}),
    "dashboard": frozenset({"bundled", "config", "service", "store"}),
    "processes": frozenset({"analysis", "bundled", "config", "dashboard", "github", "logsetup", "service",
                            "store", "trees", "triage", "webhooks"}),
    "demo": frozenset({"bundled", "config", "processes"}),
    "cli": frozenset({"analysis", "config", "demo", "engine", "logsetup", "processes", "sandbox", "trees",
                      "triage"}),
}
TOP_MODULES = {"__init__", "cli", "config", "logsetup"}  # at most five modules directly in app/

# The rooms inside analysis/, layered the same way: the policy keys of each kind of matrix source (`keys`:
# the `*_keys.py` modules beside their kinds in sources/) at the bottom, since the policy language is built on
# them; the policy language and the values every step passes (`core`) on them; matrix sources, follow-ups and
# the verdict each on core alone; the starter of `prtriage init` on top, since it detects sources and reads
# health.
ANALYSIS_BELOW: dict[str, frozenset[str]] = {
    "keys": frozenset(),
    "core": frozenset({"keys"}),
    "sources": frozenset({"core", "keys"}),
    "followups": frozenset({"core"}),
    "verdict": frozenset({"core"}),
    "starter": frozenset({"core", "sources", "verdict"}),
}


def room(module: str) -> str:
    parts = module.split(".")
    if parts[1:3] == ["sandbox", "harness"]:
        return "harness"  # a program of its own at the bottom: the sandbox mounts it; its globs are shared
    return parts[1] if len(parts) > 1 else "app"


def room_violations(graph: Mapping[str, set[str]], below: Mapping[str, frozenset[str]]) -> list[str]:
    """Every import of a room that is not in the room itself nor below it."""
    return sorted(f"{module} ({room(module)}) imports {imported} ({room(imported)})"
                  for module, imports in graph.items() for imported in imports
                  if room(imported) not in {room(module), "app", *below[room(module)]})


def analysis_room(module: str) -> str:
    """The room of analysis/ a module of it lives in (`app.analysis.sources.matrix` -> `sources`); a kind's
    keys module (`app.analysis.sources.yaml_args_keys`) is in `keys`."""
    parts = module.split(".")
    if parts[2:3] == ["sources"] and len(parts) > 3 and parts[3].endswith("_keys"):
        return "keys"
    return parts[2] if len(parts) > 2 else ""


def analysis_room_violations(graph: Mapping[str, set[str]], below: Mapping[str, frozenset[str]]) -> list[str]:
    """Every import between analysis/'s rooms that is not in the room itself nor below it."""
    return sorted(f"{module} imports {imported}"
                  for module, imports in graph.items() if room(module) == "analysis"
                  for imported in imports if room(imported) == "analysis"
                  and analysis_room(imported) not in {analysis_room(module), *below[analysis_room(module)]})


def _violations(where: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((APP / where).rglob("*.py")):
        for name in _imports(path):
            if any(name == bad or name.startswith(bad + ".") for bad in forbidden):
                found.append(f"{path.relative_to(APP.parent)} imports {name}")
    return sorted(set(found))


def test_analysis_is_pure() -> None:
    forbidden = ("app.github", "app.store", "app.dashboard", "app.webhooks", "app.demo.localgithub",
                 "fastapi", "starlette", "sqlalchemy", "huey", "github", "httpx", "requests")
    assert _violations("analysis", forbidden) == []


def test_pygithub_lives_only_in_github() -> None:
    outside = [line for line in _violations(".", ("github",)) if not line.startswith("app/github/")]
    assert outside == []


def test_the_harness_imports_nothing_of_the_app_but_itself() -> None:
    leaks = [line for line in _violations("sandbox/harness", ("app",))
             if not line.split(" imports ")[1].startswith("app.sandbox.harness")]
    assert leaks == []


def test_the_rules_see_imports() -> None:
    # the reader itself: a module known to import the store is seen doing so
    assert any(name.startswith("app.store") for name in _imports(APP / "processes" / "recovery.py"))


def test_no_import_cycle() -> None:
    assert cycles(import_graph(MODULES)) == []


def test_each_room_imports_only_the_rooms_below_it() -> None:
    assert room_violations(import_graph(MODULES), BELOW) == []


def test_the_rooms_are_layers() -> None:
    # what each room may import is itself free of cycles: no two rooms may import each other, even indirectly
    assert cycles({name: set(allowed) for name, allowed in BELOW.items()}) == []


def test_every_room_has_its_rule_and_app_holds_few_modules() -> None:
    rooms = {room(module) for module in MODULES if module != "app"}
    assert rooms == set(BELOW)
    assert {path.stem for path in APP.glob("*.py")} == TOP_MODULES and len(TOP_MODULES) <= 5


def test_every_module_name_is_found_once() -> None:
    names = [path.name for path in APP.rglob("*.py") if path.name != "__init__.py"]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_the_rules_see_a_cycle_and_a_bad_import() -> None:
    # the checks themselves: a made-up cycle and an import from a room above are both reported
    graph = {"app.store.repos": {"app.triage.pipeline"}, "app.triage.pipeline": {"app.store.repos"}}
    assert cycles(graph) == [["app.store.repos", "app.triage.pipeline"]]
    assert room_violations(graph, BELOW) == ["app.store.repos (store) imports app.triage.pipeline (triage)"]


def test_analysis_holds_only_its_rooms_each_with_its_rule() -> None:
    assert {path.name for path in (APP / "analysis").glob("*.py")} == {"__init__.py"}
    assert (APP / "analysis" / "__init__.py").read_text() == ""
    rooms = {analysis_room(module) for module in MODULES
             if room(module) == "analysis" and module != "app.analysis"}
    assert rooms == set(ANALYSIS_BELOW)


def test_each_analysis_room_imports_only_the_rooms_below_it() -> None:
    assert analysis_room_violations(import_graph(MODULES), ANALYSIS_BELOW) == []


def test_the_analysis_rooms_are_layers() -> None:
    assert cycles({name: set(allowed) for name, allowed in ANALYSIS_BELOW.items()}) == []


def test_the_analysis_rules_see_a_bad_import() -> None:
    graph = {"app.analysis.core.policy": {"app.analysis.sources.matrix",
                                          "app.analysis.sources.yaml_args_keys"},
             "app.analysis.sources.yaml_args_keys": {"app.analysis.core.model"}}
    assert analysis_room_violations(graph, ANALYSIS_BELOW) == [
        "app.analysis.core.policy imports app.analysis.sources.matrix",
        "app.analysis.sources.yaml_args_keys imports app.analysis.core.model"]
