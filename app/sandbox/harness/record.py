"""Record mode: validation functions rewritten to record each assert, raise and error, and to go on.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
Both revisions fail early on harness noise (absent files, absent upstream code); recording every failure
and continuing lets base and head be compared statement by statement instead of by their first failure.
The rewritten function is compiled with the original filename and locations, so lines are the file's.
"""

from __future__ import annotations
import __future__

import ast
import copy
import gc
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE = 2000
MAX_TEXT = 500
RECORDER = "__prtriage_rec__"
CAUGHT = "__prtriage_catch__"
EXCEPTION = "__prtriage_exc__"
FACTORY = "__prtriage_factory__"
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag

# Statements that cannot fail by themselves, or that must stay outside a try (scope directives).
_LEFT_ALONE = (ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)
_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Recorder:
    """Events of the current record-mode run, deduplicated, in the order they happened."""

    def __init__(self) -> None:
        self.events: dict[tuple[Any, ...], dict[str, Any]] = {}

    def reset(self) -> None:
        self.events = {}

    def bound(self, path: str, function: str,
              texts: Callable[[int], str]) -> Callable[[str, int, int, Any], None]:
        """The callable a rewritten function reports to: `rec(kind, line, statement index, value)`."""

        def rec(kind: str, line: int, index: int, value: Any) -> None:
            exception, message = _describe(kind, value)
            event = {"kind": kind, "path": path, "line": line, "function": function, "text": texts(index),
                     "exception": exception, "message": message[:MAX_MESSAGE]}
            self.events.setdefault(tuple(event.values()), event)

        return rec

    def recorded(self) -> list[dict[str, Any]]:
        return list(self.events.values())


recorder = Recorder()


def _describe(kind: str, value: Any) -> tuple[str, str]:
    if kind == "assert":
        return "AssertionError", "" if value is None else _text_of(value)
    if kind == "raise":
        value = sys.exc_info()[1] if value is None else value
        if isinstance(value, type) and issubclass(value, BaseException):
            try:
                value = value()
            except Exception:
                return value.__name__, ""
        if value is None:
            return "RuntimeError", "No active exception to reraise"
    return type(value).__name__, _text_of(value)


def _text_of(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


@dataclass(frozen=True)
class Rewrite:
    """One validation function and its record-mode twin, ready to be bound in place of it."""

    original: types.FunctionType
    rewritten: types.FunctionType
    owner: type | None  # the class of a method, else None


def prepare(targets: list[str], repo: str) -> Rewrites:
    """Rewrite every 'module:function' (or 'module:Class.method') that exists at this revision."""
    # A 3,000-line validator makes some 100,000 AST nodes, enough to set off collections that walk the
    # whole imported heap; the nodes form no cycles, and refcounting frees what is not kept.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return Rewrites([r for r in (_prepared(target, repo) for target in targets) if r is not None])
    finally:
        if collecting:
            gc.enable()


def _prepared(target: str, repo: str) -> Rewrite | None:
    found = _resolve(target)
    if found is None:
        return None
    original, owner = found
    filename = original.__code__.co_filename
    prefix = repo.rstrip("/") + "/"
    if not filename.startswith(prefix) or original.__code__.co_freevars:
        return None  # a closure cannot be recompiled on its own
    try:
        rewritten = _rewrite(original, filename[len(prefix):])
    except Exception:  # a construct the rewrite does not handle: no record mode for it, outcomes stay
        return None
    return None if rewritten is None else Rewrite(original, rewritten, owner)


def _resolve(target: str) -> tuple[types.FunctionType, type | None] | None:
    module_name, _, path = target.partition(":")
    module = sys.modules.get(module_name)
    if module is None:
        return None
    owner: Any = module
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent, None)
    candidate = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
    if isinstance(candidate, types.FunctionType):
        return candidate, owner if isinstance(owner, type) else None
    return None


Binding = tuple[Any, str, types.FunctionType]  # (module namespace dict or class, name, original)


class Rewrites:
    """A revision's rewrites and the module globals their originals are bound to.

    Searching every module's namespace costs about 20 ms: a warm leader searches once after its warm-up,
    its forked children inherit what it found and only swap the bindings, after searching the modules
    they imported themselves (well under a millisecond). A namespace is searched once: an original that
    repository code binds at call time into a module searched before is not replaced there.
    """

    def __init__(self, rewrites: list[Rewrite]) -> None:
        self.rewrites = rewrites
        self._by_original = {id(r.original): r for r in rewrites}
        self._bound: list[tuple[dict[str, Any], str, Rewrite]] = []
        self._searched: dict[int, dict[str, Any]] = {}  # held, so that an id is never reused meanwhile

    def __bool__(self) -> bool:
        return bool(self.rewrites)

    def find_bindings(self) -> None:
        """Note where each original is bound in the globals of every module not searched yet."""
        if not self.rewrites:
            return
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict) or id(namespace) in self._searched:
                continue
            self._searched[id(namespace)] = namespace
            for name, value in list(namespace.items()):
                rewrite = self._by_original.get(id(value))
                if rewrite is not None and value is rewrite.original:
                    self._bound.append((namespace, name, rewrite))

    def install(self) -> list[Binding]:
        """Bind each rewritten function wherever its original is bound (module globals, its class).

        Returns the bindings replaced, for `restore`.
        """
        self.find_bindings()
        replaced: list[Binding] = []
        for namespace, name, rewrite in self._bound:
            if namespace.get(name) is rewrite.original:
                namespace[name] = rewrite.rewritten
                replaced.append((namespace, name, rewrite.original))
        for rewrite in self.rewrites:
            if rewrite.owner is not None:
                setattr(rewrite.owner, rewrite.original.__name__, rewrite.rewritten)
                replaced.append((rewrite.owner, rewrite.original.__name__, rewrite.original))
        return replaced


def restore(bindings: list[Binding]) -> None:
    for owner, name, original in bindings:
        if isinstance(owner, dict):
            owner[name] = original
        else:
            setattr(owner, name, original)


def _rewrite(original: types.FunctionType, path: str) -> types.FunctionType | None:
    code = original.__code__
    try:
        with open(code.co_filename, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), code.co_filename)
    except (OSError, SyntaxError, ValueError):
        return None
    node = _find_definition(tree, code)
    if node is None:
        return None
    rewriter = _Rewriter()
    definition = rewriter.rewrite_definition(node)  # in place: the tree is this call's own
    result = ast.Return(ast.Name(node.name, ast.Load()))
    factory = ast.FunctionDef(name=FACTORY, args=_parameters(RECORDER, CAUGHT), body=[definition, result],
                              decorator_list=[], returns=None, type_comment=None)
    module = ast.Module(body=[_located(factory, node)], type_ignores=[])
    compiled = compile(module, code.co_filename, "exec", flags=code.co_flags & _FUTURE_FLAGS,
                       dont_inherit=True)
    scope: dict[str, Any] = {}
    exec(compiled, original.__globals__, scope)
    rec = recorder.bound(path, original.__qualname__, _Texts(rewriter.statements))
    return _like(scope[FACTORY](rec, (Exception, SystemExit)), original)


def _located(node: ast.AST, like: ast.AST) -> Any:
    """`node` and the nodes the rewrite made under it, at `like`'s location; returns `node`.

    Parsed nodes have their locations (and so have their subtrees): the walk stops at them, where
    ast.fix_missing_locations would walk the whole function once more.
    """
    if "lineno" in node._attributes and getattr(node, "lineno", None) is None:
        ast.copy_location(node, like)
    for child in ast.iter_child_nodes(node):
        if getattr(child, "lineno", None) is None:
            _located(child, like)
    return node


class _Texts:
    """Each rewritten statement's text, made the first time an event needs it: unparsing every statement
    of a 3,000-line validator up front would cost more than the rest of its rewrite."""

    def __init__(self, statements: list[ast.stmt]) -> None:
        self.statements = statements
        self.made: dict[int, str] = {}

    def __call__(self, index: int) -> str:
        text = self.made.get(index)
        if text is None:
            text = self.made[index] = statement_text(self.statements[index])
        return text


def _find_definition(tree: ast.Module, code: types.CodeType) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            if code.co_firstlineno in (first, node.lineno):
                return node
    return None


def _parameters(*names: str) -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in names], vararg=None, kwonlyargs=[],
                         kw_defaults=[], kwarg=None, defaults=[])


def _like(rewritten: types.FunctionType, original: types.FunctionType) -> types.FunctionType:
    """Same defaults, annotations and names as the original: they are not evaluated a second time."""
    rewritten.__defaults__ = original.__defaults__
    rewritten.__kwdefaults__ = original.__kwdefaults__
    rewritten.__annotations__ = original.__annotations__
    rewritten.__dict__.update(original.__dict__)
    rewritten.__module__, rewritten.__qualname__ = original.__module__, original.__qualname__
    rewritten.__doc__ = original.__doc__
    return rewritten


def statement_text(statement: ast.stmt) -> str:
    """The statement as normalised source: compound statements by their header line only."""
    if isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
                              ast.TryStar, ast.Match, *_NESTED_SCOPES)):
        header = copy.copy(statement)
        for field in ("body", "orelse", "finalbody", "handlers", "cases", "decorator_list"):
            if hasattr(header, field):
                setattr(header, field, [])
        if isinstance(header, ast.Match):
            header.cases = [ast.match_case(pattern=ast.MatchAs(), body=[ast.Pass()])]
        else:
            header.body = [ast.Pass()]
        source = ast.unparse(header).splitlines()[0]
    else:
        source = ast.unparse(statement)
    text = " ".join(source.split())
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


class _Rewriter:
    """Turns a function body into its record-mode form (in place)."""

    def __init__(self) -> None:
        self.statements: list[ast.stmt] = []  # a recorded event names its statement by index here

    def rewrite_definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
        definition = node
        definition.decorator_list = []
        definition.returns = None
        _drop_annotations_and_defaults(definition.args)
        definition.body = self.body(definition.body)
        return definition

    def body(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        return [self.statement(s) for s in statements]

    def statement(self, statement: ast.stmt) -> ast.stmt:
        if isinstance(statement, _LEFT_ALONE):
            return statement
        index = len(self.statements)
        self.statements.append(statement)  # text made later: the rewrite keeps headers and simple statements
        if isinstance(statement, ast.Assert):
            inner: ast.stmt = self._assert(statement, index)
        elif isinstance(statement, ast.Raise):
            inner = _located(ast.Expr(self._record("raise", statement, index, statement.exc)), statement)
        else:
            inner = self._descend(statement)
        return self._guarded(inner, statement, index)

    def _descend(self, statement: ast.stmt) -> ast.stmt:
        if isinstance(statement, _NESTED_SCOPES):
            return statement  # its own scope: a failure inside surfaces at the call, which is recorded
        if isinstance(statement, (ast.Try, ast.TryStar)):
            # The try body stays as written: its handlers may expect to catch what it raises.
            if not statement.handlers:
                statement.body = self.body(statement.body)
            for handler in statement.handlers:
                handler.body = self.body(handler.body)
            statement.orelse = self.body(statement.orelse)
            statement.finalbody = self.body(statement.finalbody)
            return statement
        if isinstance(statement, ast.Match):
            for case in statement.cases:
                case.body = self.body(case.body)
            return statement
        for field in ("body", "orelse"):
            if isinstance(getattr(statement, field, None), list):
                setattr(statement, field, self.body(getattr(statement, field)))
        return statement

    def _assert(self, statement: ast.Assert, index: int) -> ast.stmt:
        failed = ast.UnaryOp(op=ast.Not(), operand=statement.test)
        record = ast.Expr(self._record("assert", statement, index, statement.msg))
        return _located(ast.If(test=failed, body=[record], orelse=[]), statement)

    @staticmethod
    def _record(kind: str, statement: ast.stmt, index: int, value: ast.expr | None) -> ast.Call:
        arguments: list[ast.expr] = [ast.Constant(kind), ast.Constant(statement.lineno), ast.Constant(index),
                                     value if value is not None else ast.Constant(None)]
        return ast.Call(func=ast.Name(RECORDER, ast.Load()), args=arguments, keywords=[])

    def _guarded(self, inner: ast.stmt, statement: ast.stmt, index: int) -> ast.stmt:
        record = ast.Expr(self._record("error", statement, index, ast.Name(EXCEPTION, ast.Load())))
        handler = ast.ExceptHandler(type=ast.Name(CAUGHT, ast.Load()), name=EXCEPTION, body=[record])
        return _located(ast.Try(body=[inner], handlers=[handler], orelse=[], finalbody=[]), statement)


def _drop_annotations_and_defaults(arguments: ast.arguments) -> None:
    """Annotations and defaults are copied from the original function object instead of re-evaluated."""
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                     *filter(None, (arguments.vararg, arguments.kwarg))]:
        argument.annotation = None
    arguments.defaults = [ast.copy_location(ast.Constant(None), d) for d in arguments.defaults]
    arguments.kw_defaults = [None if d is None else ast.copy_location(ast.Constant(None), d)
                             for d in arguments.kw_defaults]
