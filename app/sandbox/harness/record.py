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

    def bound(self, path: str, function: str) -> Callable[[str, int, str, Any], None]:
        """The callable a rewritten function reports to: `rec(kind, line, text, value)`."""

        def rec(kind: str, line: int, text: str, value: Any) -> None:
            exception, message = _describe(kind, value)
            event = {"kind": kind, "path": path, "line": line, "function": function, "text": text,
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


def prepare(targets: list[str], repo: str) -> list[Rewrite]:
    """Rewrite every 'module:function' (or 'module:Class.method') that exists at this revision."""
    prefix = repo.rstrip("/") + "/"
    rewrites = []
    for target in targets:
        found = _resolve(target)
        if found is None:
            continue
        original, owner = found
        filename = original.__code__.co_filename
        if not filename.startswith(prefix) or original.__code__.co_freevars:
            continue  # a closure cannot be recompiled on its own
        try:
            rewritten = _rewrite(original, filename[len(prefix):])
        except Exception:  # a construct the rewrite does not handle: no record mode for it, outcomes stay
            continue
        if rewritten is not None:
            rewrites.append(Rewrite(original, rewritten, owner))
    return rewrites


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


def install(rewrites: list[Rewrite]) -> list[Binding]:
    """Bind each rewritten function wherever its original is bound (module globals, its class).

    Returns the bindings replaced, for `restore`.
    """
    replacing = {id(r.original): r for r in rewrites}
    replaced: list[Binding] = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            rewrite = replacing.get(id(value))
            if rewrite is not None and value is rewrite.original:
                namespace[name] = rewrite.rewritten
                replaced.append((namespace, name, rewrite.original))
    for rewrite in rewrites:
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
    definition = _Rewriter().rewrite_definition(node)
    result = ast.Return(ast.Name(node.name, ast.Load()))
    factory = ast.FunctionDef(name=FACTORY, args=_parameters(RECORDER, CAUGHT), body=[definition, result],
                              decorator_list=[], returns=None, type_comment=None)
    module = ast.Module(body=[ast.copy_location(factory, node)], type_ignores=[])
    ast.fix_missing_locations(module)
    compiled = compile(module, code.co_filename, "exec", flags=code.co_flags & _FUTURE_FLAGS,
                       dont_inherit=True)
    scope: dict[str, Any] = {}
    exec(compiled, original.__globals__, scope)
    rewritten = scope[FACTORY](recorder.bound(path, original.__qualname__), (Exception, SystemExit))
    return _like(rewritten, original)


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
    """Turns a function body into its record-mode form."""

    def rewrite_definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
        definition = copy.deepcopy(node)
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
        text = statement_text(statement)
        if isinstance(statement, ast.Assert):
            inner: ast.stmt = self._assert(statement, text)
        elif isinstance(statement, ast.Raise):
            inner = ast.Expr(self._record("raise", statement, text, statement.exc))
        else:
            inner = self._descend(statement)
        return self._guarded(inner, statement, text)

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

    def _assert(self, statement: ast.Assert, text: str) -> ast.stmt:
        failed = ast.UnaryOp(op=ast.Not(), operand=statement.test)
        record = ast.Expr(self._record("assert", statement, text, statement.msg))
        return ast.If(test=failed, body=[record], orelse=[])

    @staticmethod
    def _record(kind: str, statement: ast.stmt, text: str, value: ast.expr | None) -> ast.Call:
        arguments: list[ast.expr] = [ast.Constant(kind), ast.Constant(statement.lineno), ast.Constant(text),
                                     value if value is not None else ast.Constant(None)]
        return ast.Call(func=ast.Name(RECORDER, ast.Load()), args=arguments, keywords=[])

    def _guarded(self, inner: ast.stmt, statement: ast.stmt, text: str) -> ast.stmt:
        record = ast.Expr(self._record("error", statement, text, ast.Name(EXCEPTION, ast.Load())))
        handler = ast.ExceptHandler(type=ast.Name(CAUGHT, ast.Load()), name=EXCEPTION, body=[record])
        guarded = ast.Try(body=[inner], handlers=[handler], orelse=[], finalbody=[])
        return ast.copy_location(guarded, statement)  # new nodes inside get it from fix_missing_locations


def _drop_annotations_and_defaults(arguments: ast.arguments) -> None:
    """Annotations and defaults are copied from the original function object instead of re-evaluated."""
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                     *filter(None, (arguments.vararg, arguments.kwarg))]:
        argument.annotation = None
    arguments.defaults = [ast.Constant(None) for _ in arguments.defaults]
    arguments.kw_defaults = [None if d is None else ast.Constant(None) for d in arguments.kw_defaults]
