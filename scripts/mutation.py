"""Mutation testing of the decision modules: would their own tests catch a wrong verdict?

Each mutant is one small change to one module's syntax tree (a comparison swapped, a condition forced, a
statement dropped ...). It is compiled and run under the module's own test files in a forked pytest, the
mutated module substituted at import by a finder placed ahead of the real one, so the checkout is never
written to and an interrupted run leaves nothing behind. A mutant is killed when the tests fail or time out.
A driver rather than mutmut or cosmic-ray: mutmut 3 copies the tree into mutants/ and rewrites every
function into a trampoline (our tests import the modules by their package path and some read files beside
them), cosmic-ray needs a session database and a config per module; neither lists equivalent mutants with
a reason. The ast and a fork per mutant are all this needs.

The modules, their tests and the mutants known to be equivalent (no behaviour can tell them apart, each
with why) are data: scripts/mutation.toml. Too slow for CI; run it before resolving an issue that touches
one of these modules (README, "Mutation testing").
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import marshal
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "scripts" / "mutation.toml"

_COMPARISONS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_SYMBOLS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
            ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.And: "and",
            ast.Or: "or", ast.Add: "+", ast.Sub: "-"}

# The baseline run: the unmutated tests, and which modules from outside the checkout they import.
_PROBE = """
import json, sys, pytest
exit_code = int(pytest.main(sys.argv[4:]))
root, package = sys.argv[2:4]
def outside(name, module):
    places = [getattr(module, "__file__", None) or "", *(getattr(module, "__path__", None) or [])]
    ours = any(str(place).startswith(root) and not str(place).startswith(sys.prefix) for place in places)
    return not ours and name.split(".")[0] != package
names = sorted(name for name, module in list(sys.modules.items()) if outside(name, module))
with open(sys.argv[1], "w") as stream:
    json.dump({"exit": exit_code, "modules": names}, stream)
"""


@dataclass(frozen=True)
class Module:
    """A decision module, the test files that guard it, and its equivalent mutants {id: (change, why)}."""

    name: str
    path: str
    tests: tuple[str, ...]
    equivalent: dict[str, tuple[str, str]] = field(default_factory=dict)
    pending: str = ""  # why it is not run by default, when it is not
    functions: tuple[str, ...] = ()  # only these functions' mutants (and their nested ones); empty: all

    def covers(self, mutant: Mutant) -> bool:
        """Whether MUTANT is in the part of the module held to the score."""
        where = mutant.id.split(":", 1)[0]
        return not self.functions or any(where == f or where.startswith(f + ".") for f in self.functions)

    def excludes(self, mutant: Mutant) -> bool:
        """Listed as equivalent, and still the same change (an edit may give its id to another one)."""
        listed = self.equivalent.get(mutant.id)
        return listed is not None and listed[0] == mutant.change

    @property
    def dotted(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")


@dataclass(frozen=True)
class Mutant:
    """One change: `id` is "qualname:operator:n" (the n-th such change in that function), stable across
    edits elsewhere in the module; `original` and `mutated` show it."""

    id: str
    line: int
    operator: str
    original: str
    mutated: str

    @property
    def change(self) -> str:
        return f"{self.original} -> {self.mutated}"


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed | timeout | survived | equivalent | invalid
    seconds: float


@dataclass
class _Site:
    """Where a mutation applies: the node, how to put a replacement in its place, what replaces it."""

    node: ast.AST
    parent: ast.AST
    field_name: str
    index: int | None
    operator: str
    replacement: Callable[[ast.AST], ast.AST]
    qualname: str


def load_modules(config: Path = CONFIG) -> dict[str, Module]:
    raw = tomllib.loads(config.read_text())
    modules = {}
    for name, entry in raw["modules"].items():
        equivalent = {item["id"]: (item["change"], item["reason"]) for item in entry.get("equivalent", [])}
        modules[name] = Module(name, entry["path"], tuple(entry["tests"]), equivalent,
                               entry.get("pending", ""), tuple(entry.get("functions", ())))
    return modules


# --- finding mutation sites ---------------------------------------------------------------------------

def _skipped(node: ast.AST) -> bool:
    """Docstrings and typing-only code (Literal[...], TypeVar(...)): no behaviour to change."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "TypeVar"


# Annotations, and decorators (`@dataclass(frozen=True)`: immutability no caller relies on to behave).
_NOT_MUTATED = {"annotation", "returns", "decorator_list"}


def _children(node: ast.AST) -> Iterator[tuple[str, int | None, ast.AST]]:
    for name, value in ast.iter_fields(node):
        if name in _NOT_MUTATED:
            continue
        if isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield name, index, item
        elif isinstance(value, ast.AST):
            yield name, None, value


def _constant_change(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return 1 if value == 0 else 0 if value == 1 else value + 1
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, str):
        return "" if value else "mutant"
    return _NO_CHANGE


_NO_CHANGE = object()


def _compare_swaps(node: ast.Compare) -> Iterator[tuple[str, Callable[[ast.AST], ast.AST]]]:
    for position, op in enumerate(node.ops):
        swapped = _COMPARISONS.get(type(op))
        if swapped is None:
            continue

        def swap(old: ast.AST, position: int = position, swapped: type[ast.cmpop] = swapped) -> ast.AST:
            assert isinstance(old, ast.Compare)
            ops = list(old.ops)
            ops[position] = swapped()
            return ast.Compare(left=old.left, ops=ops, comparators=old.comparators)

        yield f"compare {_SYMBOLS[type(op)]} -> {_SYMBOLS[swapped]}", swap


def _operators(node: ast.AST, parent: ast.AST, field_name: str,
               in_function: bool) -> Iterator[tuple[str, Callable[[ast.AST], ast.AST]]]:
    """(operator, replacement) for every mutation of NODE."""
    if isinstance(node, ast.Compare):
        yield from _compare_swaps(node)
    elif isinstance(node, ast.BoolOp):
        junction: type[ast.boolop] = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield (f"boolean {_SYMBOLS[type(node.op)]} -> {_SYMBOLS[junction]}",
               lambda old: ast.BoolOp(op=junction(), values=old.values))  # type: ignore[attr-defined]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not removed", lambda old: old.operand  # type: ignore[attr-defined]
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub) and any(
            isinstance(side, ast.Constant) and type(side.value) is int for side in (node.left, node.right)):
        sign: type[ast.operator] = ast.Sub if isinstance(node.op, ast.Add) else ast.Add
        yield (f"arithmetic {_SYMBOLS[type(node.op)]} -> {_SYMBOLS[sign]}",
               lambda old: ast.BinOp(left=old.left, op=sign(), right=old.right))  # type: ignore[attr-defined]
    elif isinstance(node, ast.Constant) and not isinstance(parent, ast.JoinedStr):
        changed = _constant_change(node.value)
        if changed is not _NO_CHANGE:
            yield "constant", lambda old: ast.Constant(changed)  # type: ignore[arg-type]
    yield from _statement_operators(node, parent, field_name, in_function)


def _statement_operators(node: ast.AST, parent: ast.AST, field_name: str,
                         in_function: bool) -> Iterator[tuple[str, Callable[[ast.AST], ast.AST]]]:
    if field_name == "test" and isinstance(parent, ast.If | ast.IfExp):
        yield "condition forced true", lambda old: ast.Constant(True)
        yield "condition forced false", lambda old: ast.Constant(False)
    if field_name == "ifs" and isinstance(parent, ast.comprehension):
        yield "filter dropped", lambda old: ast.Constant(True)
    if field_name == "value" and isinstance(parent, ast.Return) \
            and not (isinstance(node, ast.Constant) and node.value is None):
        yield "return None", lambda old: ast.Constant(None)
    deletable = (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)) \
        or isinstance(node, ast.Assign | ast.AugAssign) \
        or (isinstance(node, ast.AnnAssign) and node.value is not None)
    if deletable and in_function:
        yield "statement deleted", lambda old: ast.Pass()


def _sites(tree: ast.Module) -> Iterator[_Site]:
    """Every mutation site of TREE, in source order (depth first, fields in their order)."""

    def visit(node: ast.AST, qualname: str, in_function: bool) -> Iterator[_Site]:
        for field_name, index, child in _children(node):
            if _skipped(child):
                continue
            name, function = qualname, in_function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{qualname}.{child.name}" if qualname else child.name
                function = function or not isinstance(child, ast.ClassDef)
            for operator, replacement in _operators(child, node, field_name, in_function):
                yield _Site(child, node, field_name, index, operator, replacement, qualname or "<module>")
            yield from visit(child, name, function)

    yield from visit(tree, "", False)


def _place(site: _Site, new: ast.AST) -> None:
    ast.copy_location(new, site.node)
    if site.index is None:
        setattr(site.parent, site.field_name, new)
    else:
        getattr(site.parent, site.field_name)[site.index] = new


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node).split("\n", 1)[0]
    return text if len(text) <= 100 else text[:99] + "…"


def mutants(source: str) -> list[tuple[Mutant, int]]:
    """(mutant, its index in source order) for every mutant of SOURCE, sorted by line and id."""
    tree = ast.parse(source)
    found: list[tuple[Mutant, int]] = []
    seen: Counter[tuple[str, str]] = Counter()
    for index, site in enumerate(_sites(tree)):
        seen[(site.qualname, site.operator)] += 1
        before = _shown(site.node)
        after = _shown(site.replacement(copy.deepcopy(site.node)))
        mutant_id = f"{site.qualname}:{site.operator}:{seen[(site.qualname, site.operator)]}"
        line = getattr(site.node, "lineno", 0)
        found.append((Mutant(mutant_id, line, site.operator, before, after), index))
    return sorted(found, key=lambda pair: (pair[0].line, pair[0].id))


def mutated_code(source: str, filename: str, index: int) -> bytes:
    """The marshalled code of SOURCE with its INDEX-th site mutated."""
    tree = ast.parse(source)
    for position, site in enumerate(_sites(tree)):
        if position == index:
            _place(site, site.replacement(site.node))
            break
    ast.fix_missing_locations(tree)
    return marshal.dumps(compile(tree, filename, "exec", dont_inherit=True))


# --- running ------------------------------------------------------------------------------------------

class _Substitute(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the module NAME as the code CODE, its file still ORIGIN (anything it reads beside it)."""

    def __init__(self, name: str, origin: str, code: bytes) -> None:
        self.name, self.origin, self.code = name, origin, code

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self, origin=self.origin) \
            if fullname == self.name else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__file__ = self.origin
        exec(marshal.loads(self.code), module.__dict__)


def _pytest_arguments(module: Module) -> list[str]:
    return ["-x", "-q", "-p", "no:cacheprovider", "--no-header", *module.tests]


def _baseline(module: Module) -> tuple[float, list[str]]:
    """The unmutated tests' time, and the modules from outside the checkout they import.

    Those are imported once here; every mutant's pytest is a fork of this process and imports only the
    checkout's modules again (ours among them, mutated): a fraction of a second instead of seconds.
    """
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", _PROBE, out.name, str(ROOT), module.dotted.split(".")[0],
                        *_pytest_arguments(module)],
                       cwd=ROOT, capture_output=True, timeout=600, check=False)
        seconds = time.monotonic() - started
        probe = json.loads(Path(out.name).read_text() or "{}")
    if probe.get("exit") != 0:
        raise SystemExit(f"{module.name}: its tests fail without any mutant ({' '.join(module.tests)})")
    return seconds, probe["modules"]


def _warm(names: list[str]) -> None:
    # Not the private accelerators (`_asyncio`): one imported before its package sets the package up half
    # pure Python, half C (asyncio's current_task() is then None inside a task); the package imports them.
    for name in (name for name in names if not name.startswith("_")):
        with contextlib.suppress(BaseException):  # one that cannot be imported alone is imported later
            importlib.import_module(name)


_NOT_IMPORTED = 3  # the tests passed without importing the module through _Substitute
# The tests passed: a status of its own, for a mutant can end the test process itself (the harness's leader
# calls os._exit(0) in what it takes for a forked child), and that is no pass.
_PASSED = 10


def _fork_pytest(module: Module, code: bytes) -> int:
    """A child running MODULE's tests with CODE as the module: its pid (and process group)."""
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        os.setpgid(0, 0)
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        sys.meta_path.insert(0, _Substitute(module.dotted, str(ROOT / module.path), code))
        import pytest

        # Plugins (hypothesis') were imported by _warm, before pytest could rewrite their asserts.
        arguments = ["-W", "ignore::pytest.PytestAssertRewriteWarning", *_pytest_arguments(module)]
        status = _PASSED if pytest.main(arguments) == 0 else 1
        loaded = getattr(sys.modules.get(module.dotted), "__spec__", None)
        if status == _PASSED and not isinstance(getattr(loaded, "loader", None), _Substitute):
            status = _NOT_IMPORTED
    finally:
        os._exit(status)


def _run(module: Module, source: str, chosen: list[tuple[Mutant, int]], *, jobs: int, timeout: float,
         report: Callable[[Result], None]) -> list[Result]:
    """Every chosen mutant, JOBS at a time, each child killed past TIMEOUT seconds."""
    results: dict[str, Result] = {}
    running: dict[int, tuple[Mutant, float]] = {}
    queue = list(chosen)
    while queue or running:
        while queue and len(running) < jobs:
            mutant, index = queue.pop(0)
            if module.excludes(mutant):
                results[mutant.id] = Result(mutant, "equivalent", 0.0)
                report(results[mutant.id])
                continue
            try:
                code = mutated_code(source, str(ROOT / module.path), index)
            except (SyntaxError, ValueError, TypeError):
                results[mutant.id] = Result(mutant, "invalid", 0.0)
                report(results[mutant.id])
                continue
            running[_fork_pytest(module, code)] = (mutant, time.monotonic())
        for pid, (mutant, started) in list(running.items()):
            status = _finished(pid, started, timeout)
            if status is not None:
                del running[pid]
                results[mutant.id] = Result(mutant, status, round(time.monotonic() - started, 2))
                report(results[mutant.id])
        time.sleep(0.01)
    return [results[mutant.id] for mutant, _ in chosen]


def _finished(pid: int, started: float, timeout: float) -> str | None:
    """"killed", "survived" or "timeout" once the child PID has ended (or was ended), else None."""
    done, wait_status = os.waitpid(pid, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(wait_status)
        return "survived" if code == _PASSED else "not imported" if code == _NOT_IMPORTED else "killed"
    if time.monotonic() - started <= timeout:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "timeout"


def _control(module: Module, source: str, *, timeout: float) -> float:
    """Seconds the unmutated module takes through the same fork and finder; it must pass, else every
    mutant would look killed."""
    code = marshal.dumps(compile(source, str(ROOT / module.path), "exec", dont_inherit=True))
    pid, started = _fork_pytest(module, code), time.monotonic()
    while (status := _finished(pid, started, timeout)) is None:
        time.sleep(0.01)
    if status != "survived":
        raise SystemExit(f"{module.name}: its tests fail in a forked run of the unmutated module ({status}); "
                         "scripts/mutation cannot judge mutants")
    return time.monotonic() - started


def run_module(module: Module, *, limit: int | None, only: set[str], jobs: int,
               report: Callable[[Result], None]) -> list[Result]:
    source = (ROOT / module.path).read_text()
    chosen = [(m, i) for m, i in mutants(source) if module.covers(m) and (not only or m.id in only)]
    chosen = chosen[:limit] if limit is not None else chosen
    seconds, outside = _baseline(module)
    _warm(outside)
    control = _control(module, source, timeout=max(10.0, 5 * seconds))
    # A mutant that loops (a loop's step dropped) is killed by the timeout: five times a normal run.
    return _run(module, source, chosen, jobs=jobs, timeout=max(10.0, 5 * control), report=report)


# --- reporting ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Score:
    tried: int
    killed: int
    survived: int
    equivalent: int

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.tried if self.tried else 100.0


def score(results: list[Result]) -> Score:
    """Equivalent mutants (and ones that do not compile) are not tried; a timeout is a kill."""
    statuses = Counter(r.status for r in results)
    killed = statuses["killed"] + statuses["timeout"]
    return Score(killed + statuses["survived"], killed, statuses["survived"], statuses["equivalent"])


# One character per mutant as it ends, in line order (with --jobs 1): killed ".", timed out "t".
_MARKS = {"survived": "S", "timeout": "t", "equivalent": "e", "invalid": "i"}


def _describe(mutant: Mutant) -> str:
    return f"line {mutant.line} {mutant.id}: {mutant.change}"


def _stale(module: Module, results: list[Result]) -> list[str]:
    excluded = {r.mutant.id for r in results if r.status == "equivalent"}
    return sorted(set(module.equivalent) - excluded)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    modules = load_modules()
    parser = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--module", action="append", choices=sorted(modules),
                        help="a module to mutate (repeatable); default: every one scripts/mutation.toml "
                             "does not mark pending")
    parser.add_argument("--limit", type=int, help="the first N mutants of each module, in line order")
    parser.add_argument("--only", action="append", default=[], metavar="ID", help="this mutant id only")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every result to FILE")
    parser.add_argument("--fail-under", type=float, default=85.0,
                        help="exit 1 when a module scores below this percentage (default 85)")
    args = parser.parse_args(argv)
    args.modules = [modules[name] for name in args.module] if args.module \
        else [module for module in modules.values() if not module.pending]
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.list:
        for module in args.modules:
            for mutant, _ in mutants((ROOT / module.path).read_text()):
                if not module.covers(mutant):
                    continue
                mark = "  (equivalent)" if module.excludes(mutant) else ""
                print(f"{module.name} {_describe(mutant)}{mark}")
        return 0
    scores: dict[str, Score] = {}
    everything: dict[str, list[Result]] = {}
    for module in args.modules:
        print(f"== {module.name} ({module.path}) against {' '.join(module.tests)}", flush=True)
        results = run_module(module, limit=args.limit, only=set(args.only), jobs=args.jobs,
                             report=lambda r: print(_MARKS.get(r.status, "."), end="", flush=True))
        print()
        everything[module.name], scores[module.name] = results, score(results)
        for result in results:
            if result.status == "survived":
                print(f"  survived {_describe(result.mutant)}")
        if args.limit is None and not args.only:
            for stale in _stale(module, results):
                print(f"  stale: scripts/mutation.toml lists {stale} as equivalent, but that mutant is now "
                      "another change or gone")
    print(f"\n{'module':<16}{'tried':>7}{'killed':>8}{'survived':>10}{'equivalent':>12}{'score':>8}")
    for name, figures in scores.items():
        print(f"{name:<16}{figures.tried:>7}{figures.killed:>8}{figures.survived:>10}{figures.equivalent:>12}"
              f"{figures.percent:>7.1f}%")
    if args.json:
        document = {name: {"score": asdict(scores[name]) | {"percent": round(scores[name].percent, 1)},
                           "results": [asdict(r) for r in results]} for name, results in everything.items()}
        args.json.write_text(json.dumps(document, indent=1) + "\n")
    return 1 if any(s.percent < args.fail_under for s in scores.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
