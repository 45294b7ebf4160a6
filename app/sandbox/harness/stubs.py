"""Stand-ins for modules the sandbox lacks: an import hook, and stub objects that tolerate being used.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library
and a sibling harness module.
Repository code imports torch, megatron, sglang ... at module top; none of them is installed here, and none of
them matters for argument validation. A missing top-level module is stubbed only when repository code imports
it, so third-party code probing an optional dependency still sees its ImportError.
"""

from __future__ import annotations

import abc
import argparse
import ast
import builtins
import copy
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys
import types
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import starnames
else:
    import starnames

STUB_MARK = "__prtriage_stub__"
DEFAULT_VERSION = "0.0.0"

_repo_prefix = ""
_stub_attributes: dict[str, Any] = {}
_forced: frozenset[str] = frozenset()
_real: frozenset[str] = frozenset()
_optional_absent = False  # harness.optional_imports: absent
_ci_has: frozenset[str] = frozenset()
_guarded_lines: dict[str, frozenset[int]] = {}  # file -> lines inside a `try:` that catches ImportError
_importlib_dir = os.path.dirname(importlib.__file__) + "/"
_HERE = os.path.dirname(os.path.abspath(__file__))  # the harness directory
# Parsers handed to absent code (`ServerArgs.add_cli_args(parser)`): the options it would have added are
# missing, so a strict parse of them must tolerate what that code owns.
_fed_parsers: weakref.WeakSet[argparse.ArgumentParser] = weakref.WeakSet()


class MissingRealPackage(ImportError):
    """A package the policy says must be real inside the sandbox does not import."""


def install(repo: str, harness_policy: dict[str, Any]) -> None:
    """Stub missing modules imported by repository code, and the policy's `stub_modules` always.

    Raises MissingRealPackage when one of `harness.real_packages` does not import.
    """
    global _repo_prefix, _stub_attributes, _forced, _real, _optional_absent, _ci_has
    _repo_prefix = os.path.abspath(repo).rstrip("/") + "/"
    _stub_attributes = dict(harness_policy.get("stub_attributes") or {})
    _real = frozenset(harness_policy.get("real_packages") or ())
    _forced = frozenset(harness_policy.get("stub_modules") or ()) - _real
    _optional_absent = harness_policy.get("optional_imports", "absent") == "absent"
    _ci_has = frozenset(harness_policy.get("ci_has") or ())
    _import_real_packages(sorted(_real))
    install_backports(dict(harness_policy.get("backports") or {}))
    _forget_forced_modules()
    _install_stub_versions()
    setattr(builtins, "__build_class__", _build_class)  # noqa: B010  # typeshed types it narrower
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _StubFinder)]
    sys.meta_path.insert(0, _StubFinder(missing=False))
    if harness_policy.get("stub_missing_modules", True):
        sys.meta_path.append(_StubFinder(missing=True))


def _install_stub_versions() -> None:
    """`importlib.metadata.version(name)` of a package absent here answers the policy's `name.__version__`
    (`vllm.__version__: "0.12.0"`): code that checks a backend's installed version before importing it (verl's
    vllm_rollout) runs as on a CI host that has it. Any other name keeps the real lookup."""
    real_version = getattr(importlib.metadata.version, "__wrapped__", importlib.metadata.version)

    def version(distribution_name: str) -> str:
        try:
            return real_version(distribution_name)
        except importlib.metadata.PackageNotFoundError:
            key = f"{distribution_name.replace('-', '_')}.__version__"
            if key in _stub_attributes and is_missing(distribution_name.replace("-", "_")):
                return str(_stub_attributes[key])
            raise

    version.__wrapped__ = real_version  # type: ignore[attr-defined]
    importlib.metadata.version = version


def is_stub(thing: Any) -> bool:
    """A stubbed module, a stub class made by one, or an instance of such a class (not a subclass of it)."""
    if isinstance(thing, StubModule):
        return True
    owner = thing if isinstance(thing, StubMeta) else type(thing)
    return isinstance(owner, StubMeta) and owner.__dict__.get(STUB_MARK) is True


def is_missing(module_name: str) -> bool:
    """The top-level module of `module_name` is stubbed, or would be: absent here or forced by the policy."""
    top = module_name.partition(".")[0]
    if top in _real:
        return False
    if top in _forced or is_stub(sys.modules.get(top)):
        return True
    if top in sys.modules:
        return False
    return not any(f.find_spec(top, None) for f in sys.meta_path
                   if not isinstance(f, _StubFinder) and hasattr(f, "find_spec"))


def fed_absent_code(parser: argparse.ArgumentParser) -> bool:
    """`parser` was passed to a stub, which would have added options to it."""
    return parser in _fed_parsers


def _note_parsers(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, argparse.ArgumentParser):
            _fed_parsers.add(value)


def stub_module(module_name: str) -> types.ModuleType:
    """The stub module `module_name` (and its parents), made now whoever asks; its top must be missing."""
    if not is_missing(module_name):
        raise ImportError(f"{module_name} is installed here; it is not stubbed")
    parts = module_name.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        if name not in sys.modules:
            module = _new_stub_module(name)
            sys.modules[name] = module
            if depth > 1:
                setattr(sys.modules[".".join(parts[:depth - 1])], parts[depth - 1], module)
    return sys.modules[module_name]


def install_backports(backports: dict[str, str]) -> None:
    """`module.attr: other.module:attr`: set on a real module that lacks it (the sandbox's Python is older
    than the repository's: `typing.override` is 3.12's). An attribute already there stays; a backport
    whose source does not import is left out, and the repository's own import error says why."""
    for target, origin in backports.items():
        module_name, _, attr = target.rpartition(".")
        origin_module, _, origin_attr = origin.partition(":")
        try:
            module = importlib.import_module(module_name)
            if not hasattr(module, attr):
                setattr(module, attr, getattr(importlib.import_module(origin_module), origin_attr))
        except (ImportError, AttributeError):
            continue


def _import_real_packages(names: Sequence[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise MissingRealPackage(f"package {name!r} must be real inside the sandbox (policy "
                                     f"harness.real_packages) but does not import: "
                                     f"{type(exc).__name__}: {exc}") from None


def _forget_forced_modules() -> None:
    for name in [n for n in sys.modules if n.partition(".")[0] in _forced]:
        del sys.modules[name]


def _importing_frame() -> tuple[types.FrameType | None, bool]:
    """The innermost frame outside the import machinery (and the harness), and whether the import is a
    probe (`importlib.util.find_spec`) rather than an import."""
    frame = sys._getframe(2)
    probe = False
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith("<frozen importlib") or filename.startswith(_importlib_dir)
                or filename == __file__ or _harness_finder(frame)):
            return frame, probe
        # importlib.util.find_spec ("<frozen importlib.util>" on 3.11): a probe, unlike the import system's
        probe = probe or (frame.f_code.co_name == "find_spec" and filename.endswith(("importlib.util>",
                                                                                     "importlib/util.py")))
        frame = frame.f_back  # type: ignore[assignment]
    return None, probe


def _harness_finder(frame: types.FrameType) -> bool:
    """A meta path finder of the harness asking the others (boundary's import hook looks for the module
    whose loader it wraps): part of the import machinery, not the importer."""
    return frame.f_code.co_name == "find_spec" and os.path.dirname(frame.f_code.co_filename) == _HERE


def _stub_for_repository(top: str) -> bool:
    """Repository code imports `top`, absent here: stub it, unless the import is optional (a probe, or an
    import inside a `try:` that catches ImportError) and the policy says optional imports stay absent
    (`harness.optional_imports: absent`) for a package CI does not have (`harness.ci_has`)."""
    frame, probe = _importing_frame()
    if frame is None or not _repo_prefix or not frame.f_code.co_filename.startswith(_repo_prefix):
        return False
    if not _optional_absent or top in _ci_has:
        return True
    return not (probe or frame.f_lineno in _guarded(frame.f_code.co_filename))


def _guarded(filename: str) -> frozenset[int]:
    """Lines of `filename` inside the body of a `try:` with a handler of ImportError (or a wider one)."""
    if filename not in _guarded_lines:
        lines: set[int] = set()
        try:
            with open(filename, "rb") as handle:
                tree = ast.parse(handle.read(), filename)
        except (OSError, SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if isinstance(node, ast.Try | ast.TryStar) and any(_catches_import_error(h.type)
                                                                for h in node.handlers):
                for statement in node.body:
                    lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
        _guarded_lines[filename] = frozenset(lines)
    return _guarded_lines[filename]


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _catches_import_error(handler: ast.expr | None) -> bool:
    if handler is None:
        return True
    names = handler.elts if isinstance(handler, ast.Tuple) else [handler]
    return any((n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")) in _IMPORT_ERRORS for n in names)


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _new_stub_module(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


_LOADER = _StubLoader()


class _StubFinder(importlib.abc.MetaPathFinder):
    """First on the meta path: forced stubs and submodules of stubs. Last: missing top-level modules."""

    def __init__(self, *, missing: bool) -> None:
        self.missing = missing

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        top, dot, _ = fullname.partition(".")
        if top in _real:
            return None
        if dot:
            stubbed_parent = is_stub(sys.modules.get(fullname.rpartition(".")[0]))
            return self._spec(fullname) if stubbed_parent and not self.missing else None
        if not self.missing:
            return self._spec(fullname) if top in _forced else None
        return self._spec(fullname) if _stub_for_repository(top) else None

    @staticmethod
    def _spec(fullname: str) -> importlib.machinery.ModuleSpec:
        return importlib.machinery.ModuleSpec(fullname, _LOADER, is_package=True)


class StubModule(types.ModuleType):
    """A module that answers every attribute with a stub class (or the policy's `stub_attributes` value)."""

    def __getattr__(self, name: str) -> Any:
        key = f"{self.__name__}.{name}"
        if key in _stub_attributes or f"{key}()" in _stub_attributes:
            value = _policy_value(key)
        elif name == "__version__":
            value = DEFAULT_VERSION
        elif name == "__all__" and starnames.star_importing(sys._getframe(1)):
            # `from stubbed import *`: what the importer reads, asked again by each importer, so not kept
            return starnames.wanted_names(sys._getframe(1))
        elif _is_protocol_name(name):
            raise AttributeError(name)
        else:
            value = _new_stub_class(name, self.__name__, name)
        setattr(self, name, value)
        return value


def _new_stub_module(name: str) -> StubModule:
    module = StubModule(name)
    module.__path__ = []  # a package, so that `import torch.distributed` finds a submodule stub
    module.__spec__ = importlib.machinery.ModuleSpec(name, _LOADER, is_package=True)
    module.__loader__ = _LOADER
    setattr(module, STUB_MARK, True)
    return module


def _policy_value(key: str) -> Any:
    """`stub_attributes[key]`; with the key written 'module.function()', a function returning the value."""
    if key in _stub_attributes:
        return _stub_attributes[key]
    value = _stub_attributes[f"{key}()"]

    def returns_policy_value(*args: Any, **kwargs: Any) -> Any:
        return copy.deepcopy(value)

    returns_policy_value.__name__ = returns_policy_value.__qualname__ = key.rpartition(".")[2]
    return returns_policy_value


def _is_protocol_name(name: str) -> bool:
    """Dunder and sunder names are protocols (copy, pickle, numpy, enum ...): a stub must not claim them."""
    return len(name) > 2 and name.startswith("_") and name.endswith("_")


class StubMeta(abc.ABCMeta):
    """The class of stub classes: missing attributes are stub classes, calls return stub instances.

    Derived from ABCMeta so that repository classes may mix a stub base with `abc.ABC`.
    """

    def __getattr__(cls, name: str) -> Any:
        if _is_protocol_name(name):
            raise AttributeError(name)
        key = f"{cls.__module__}.{cls.__qualname__}.{name}"
        if key in _stub_attributes or f"{key}()" in _stub_attributes:
            value = _policy_value(key)
        else:
            value = _new_stub_class(name, cls.__module__, f"{cls.__qualname__}.{name}")
        setattr(cls, name, value)
        return value

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls.__dict__.get(STUB_MARK) is not True:
            return super().__call__(*args, **kwargs)  # a repository subclass: construct it for real
        _note_parsers(args, kwargs)
        if _is_decoration(args, kwargs):
            return args[0]
        return Stub.__new__(cast("type[Stub]", cls))

    def register(cls, *args: Any, **kwargs: Any) -> Any:
        """Registries of absent libraries accept anything (`AutoConfig.register("glm", C, exist_ok=True)`).

        ABCMeta's own `register(subclass)` would shadow the stub's attribute and reject those arguments;
        it still serves a repository ABC that derives from a stub and registers one class.
        """
        if not kwargs and len(args) == 1 and isinstance(args[0], type) and not _is_stub_class(cls):
            return super().register(args[0])
        return args[-1] if args and isinstance(args[-1], type) else None

    def __getitem__(cls, key: Any) -> Any:
        return cls  # Tensor["batch"], generic-looking hints

    def __iter__(cls) -> Iterator[Any]:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __enter__(cls) -> Any:
        return cls

    def __exit__(cls, *exc_info: object) -> None:
        return None

    def __repr__(cls) -> str:
        return f"<stub {cls.__module__}.{cls.__qualname__}>"

    def __fspath__(cls) -> str:
        return stub_path(cls)

    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """An absent package's class as a pydantic field's type (PrimeIntellect-ai/prime-rl's configs: `env:
        verifiers.v1.EnvConfig`): any value validates, as CI's config did against the real type; a real
        pydantic refuses a type it cannot build a schema for, and the whole config with it. A repository
        model deriving from a stub keeps pydantic's own (its class attribute comes first)."""
        from pydantic_core import core_schema  # only where pydantic is real and asks

        return core_schema.any_schema()

    def __int__(cls) -> int:
        return 0  # an absent package's constant as a number (`int(NUM_BINS)`), as its instances answer

    __index__ = __int__

    def __float__(cls) -> float:
        return 0.0

    def _same_class(cls, *_: Any) -> Any:
        return cls

    def _never_class(cls, other: Any) -> bool:
        return False

    # An absent package's attribute read off an instance is a stub class (`torch.finfo(dtype).max`), and
    # repository modules compute with it at import (`FP8_MIN = -FP8_MAX`, `scale * 2`): the class answers
    # as its instances do. `|` is left to `type` (`torch.Tensor | None` is a hint), equality too.
    __lt__ = __le__ = __gt__ = __ge__ = _never_class
    __neg__ = __pos__ = __abs__ = __invert__ = _same_class
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same_class
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _same_class
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = _same_class


_DECORATED = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type, staticmethod,
              classmethod, property, functools.partial)


def _is_decoration(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return (not kwargs and len(args) == 1
            and isinstance(args[0], _DECORATED))


def _is_stub_class(cls: type) -> bool:
    return cls.__dict__.get(STUB_MARK) is True


_real_build_class = builtins.__build_class__


def _build_class(body: Any, name: str, /, *bases: Any, **keywords: Any) -> Any:
    """A class statement, as Python runs it, but one that mixes a stub base with a base of another
    metaclass derived from ABCMeta (`typing.Protocol`'s: torch's `Stateful`) gets a metaclass derived from
    both. The real library's class (a plain `type`) would have allowed that mix; StubMeta, whatever it
    derives from, cannot be a subclass of every such metaclass. Python decides the metaclass before it runs
    the class body: on its conflict nothing of the body has run yet."""
    try:
        return _real_build_class(body, name, *bases, **keywords)
    except TypeError as exc:
        if "metaclass conflict" not in str(exc) or "metaclass" in keywords \
                or not any(isinstance(b, type) and _is_stub_class(b) for b in bases):
            raise
    return _real_build_class(body, name, *bases, metaclass=_joined_metaclass(bases), **keywords)


@functools.cache
def _joined(metaclasses: tuple[type, ...]) -> type:
    return type("+".join(m.__name__ for m in metaclasses), metaclasses, {})


def _joined_metaclass(bases: tuple[Any, ...]) -> type:
    """A metaclass derived from the most derived metaclasses of BASES, StubMeta's line first."""
    kinds = list(dict.fromkeys(type(b) for b in bases if isinstance(b, type)))
    leaves = [m for m in kinds if not any(o is not m and issubclass(o, m) for o in kinds)]
    leaves.sort(key=lambda m: not issubclass(m, StubMeta))
    return leaves[0] if len(leaves) == 1 else _joined(tuple(leaves))


def _new_stub_class(name: str, module: str, qualname: str) -> StubMeta:
    namespace = {STUB_MARK: True, "__module__": module, "__qualname__": qualname}
    return StubMeta(name, (Stub,), namespace)


STUB_PATHS = "/tmp/.prtriage-stub-paths"  # under the sandbox's scratch /tmp: absent, and writable


def stub_path(cls: type) -> str:
    """What an absent package's constant used as a path names (`Path(huggingface_hub.constants.HF_HOME)`):
    a directory of the sandbox's scratch that nothing made, one per constant, as a CI host's own would be."""
    return f"{STUB_PATHS}/{cls.__module__}.{cls.__qualname__}"


def _same(self: Stub, *_: Any) -> Stub:
    return self


def _never(self: Stub, other: Any) -> bool:
    return False


class Stub:
    """Base of every stub class: instances swallow calls, arithmetic, indexing and iteration."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if _is_protocol_name(name):
            raise AttributeError(name)
        return getattr(type(self), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _note_parsers(args, kwargs)
        return args[0] if _is_decoration(args, kwargs) else self

    def __bool__(self) -> bool:
        return not is_stub(self)  # `torch.cuda.is_available()` is false on a CPU; repository objects are not

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    __lt__ = __le__ = __gt__ = __ge__ = _never
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _same
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __and__ = __rand__ = __xor__ = __rxor__ = _same
    __or__ = __ror__ = __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _same
    __neg__ = __pos__ = __abs__ = __invert__ = __getitem__ = _same

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def __delitem__(self, key: Any) -> None:
        pass

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __float__(self) -> float:
        return 0.0

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __contains__(self, item: Any) -> bool:
        return False

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def __repr__(self) -> str:
        return f"<stub {type(self).__module__}.{type(self).__qualname__}()>"

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __fspath__(self) -> str:
        return stub_path(type(self))
