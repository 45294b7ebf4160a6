"""Tolerance for absent upstream code: replacements, generic flags, parse rejections, learned attributes.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library
and sibling harness modules. The repository's own parsers stay strict; only what an absent upstream parser
(Megatron's) would have defined is set generically and reported, so the verdict can tell a flag the
repository dropped from one it never owned.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import inspect
import json
import os
import re
import shutil
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import memo, neutral, repoline, stubs
else:
    import memo
    import neutral
    import repoline
    import stubs

_NUMBER = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
_ARGPARSE_FILE = argparse.__file__
_parsed: list[argparse.Namespace] = []  # what the stand-in parser returned last: the suite's arguments
skipped: list[str] = []  # replacement targets this revision lacks, left out (drift): every suite reports them


class ReplacementError(Exception):
    """A replacement the policy asks for cannot be installed (bad target, unknown fixture)."""


class Unreachable(ReplacementError):
    """A replacement's target does not exist at this revision (its module or attribute)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class Ledger:
    """What one suite's run made the harness tolerate or learn; reset before each suite."""

    def __init__(self) -> None:
        self.repo_prefix = ""
        self.attribute_defaults: dict[str, Any] = {}
        self.reset()

    def reset(self) -> None:
        self.defined_options: set[str] = set()
        self.tolerated_flags: dict[str, None] = {}  # ordered set
        self.learned: dict[str, Any] = {}
        # learned with the neutral value of its name's shape (no policy default), a stubbed or replaced
        # upstream parser having parsed: that parser would most likely have defined it (neutral.py)
        self.assumed: dict[str, Any] = {}
        self.learned_at: dict[str, tuple[str | None, int | None]] = {}
        # where the repository read each assumed option: (path, line, column or None)
        self.assumed_read_at: dict[str, set[tuple[str, int, int | None]]] = {}
        # an upstream parser stood in for (replaced, or fed to absent code) parsed in this run: what no
        # parser defined may be what it would have, so a read of it is blindness, not the repository's
        self.upstream_stood_in = False

    def known_flags(self, argv: Iterable[str]) -> list[str]:
        """Option words of `argv` (`--x=v` counts as `--x`) that some parser of this run defined."""
        words = (w.split("=", 1)[0] for w in argv if w.startswith("-") and not _NUMBER.match(w))
        return list(dict.fromkeys(w for w in words if w in self.defined_options))


ledger = Ledger()


def install_argparse_patches(repo: str, attribute_defaults: dict[str, Any]) -> None:
    """Record every parser's options, turn parse errors into exceptions, notice Namespace attribute misses."""
    ledger.repo_prefix = os.path.abspath(repo).rstrip("/") + "/"
    ledger.attribute_defaults = dict(attribute_defaults)
    real_parse_known_args = argparse.ArgumentParser.parse_known_args
    if getattr(real_parse_known_args, "__prtriage__", False):
        return

    def parse_known_args(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        ledger.defined_options.update(self._option_string_actions)
        if stubs.fed_absent_code(self):
            ledger.upstream_stood_in = True
        return real_parse_known_args(self, args, namespace)

    real_parse_args = argparse.ArgumentParser.parse_args

    def parse_args(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        if not stubs.fed_absent_code(self):
            return real_parse_args(self, args, namespace)
        # Absent code (SGLang's ServerArgs.add_cli_args) would have defined options here: tolerate them.
        parsed, unknown = self.parse_known_args(args, namespace)
        set_unknown_flags(parsed, unknown)
        return parsed

    parse_known_args.__prtriage__ = True  # type: ignore[attr-defined]
    argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign]
    argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign]
    argparse.ArgumentParser.error = _parser_error  # type: ignore[method-assign,assignment]
    argparse.ArgumentParser.exit = _parser_exit  # type: ignore[method-assign,assignment]
    argparse.Namespace.__getattr__ = _namespace_miss  # type: ignore[method-assign]
    _answer_terminal_size_without_asking()


def _answer_terminal_size_without_asking() -> None:
    """argparse asks shutil.get_terminal_size for every HelpFormatter, one per add_argument: half its cost.

    The answer never varies here: the harness's stdout is /dev/null (common.open_channel), so with neither
    COLUMNS nor LINES set the real function reads both from os.environ, fails an ioctl and returns
    `fallback`. The stand-in returns `fallback` at once, and asks the real function whenever the suite's
    environment sets either variable, so every answer is the one the real function would give. The
    environment itself is left exactly as the suite sets it.
    """
    real = shutil.get_terminal_size
    if getattr(real, "__prtriage__", False) or _stdout_is_terminal():
        return

    def get_terminal_size(fallback: tuple[int, int] = (80, 24)) -> os.terminal_size:
        variables = getattr(os.environ, "_data", None)  # os.environ's own bytes-keyed dict: no encoding
        if variables is None or b"COLUMNS" in variables or b"LINES" in variables:
            return real(fallback)
        return os.terminal_size(fallback)

    get_terminal_size.__prtriage__ = True  # type: ignore[attr-defined]
    get_terminal_size.__doc__ = real.__doc__
    shutil.get_terminal_size = get_terminal_size


def _stdout_is_terminal() -> bool:
    try:
        return os.isatty(sys.__stdout__.fileno())  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return False


def _parser_error(self: argparse.ArgumentParser, message: str) -> None:
    """argparse would print usage and exit(2): the message is the rejection, without the noise."""
    raise SystemExit(message)


def _parser_exit(self: argparse.ArgumentParser, status: int = 0, message: str | None = None) -> None:
    raise SystemExit((message or "").strip() or status)


def _namespace_miss(self: argparse.Namespace, name: str) -> Any:
    """A Namespace attribute miss: the learned default once learned, else an AttributeError saying where.

    argparse itself asks `hasattr(namespace, dest)` to decide whether to set a default: it must keep seeing
    the attribute as missing, or a learned None would hide the parser's default.
    """
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)  # protocols (copy, pickle) probe these: never learned, never located
    caller = sys._getframe(1)
    if caller.f_code.co_filename == _ARGPARSE_FILE:
        # argparse's own probe, once per option and parse (700 options, several parses a suite): hasattr
        # swallows the error, so it carries no location and costs no walk through the frames.
        raise AttributeError(name)
    if name in ledger.learned:
        if name in ledger.assumed:  # where the harness's guess is used: a rejection there rests on it
            read = repoline.repository_place(caller, ledger.repo_prefix)
            if read is not None:
                ledger.assumed_read_at.setdefault(name, set()).add(read)
        return ledger.learned[name]
    error = AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'", name=name, obj=self)
    error.__prtriage_where__ = repoline.repository_line(caller, ledger.repo_prefix)  # type: ignore[attr-defined]
    raise error


def learn_ahead(learned: Mapping[str, Any]) -> None:
    """LEARNED (names and the values `learn_from` gave them) learned before the entry runs."""
    for name, value in learned.items():
        ledger.learned[name] = copy.deepcopy(value)


def learn_from(exc: BaseException, fallback: tuple[str | None, int | None]) -> bool:
    """When `exc` is a miss of a Namespace attribute not yet learned, learn its default; True to retry."""
    if not isinstance(exc, AttributeError) or not isinstance(exc.obj, argparse.Namespace):
        return False
    name = exc.name
    if not isinstance(name, str) or name in ledger.learned:
        return False
    ledger.learned[name] = _default_of(name)
    where = getattr(exc, "__prtriage_where__", (None, None))
    ledger.learned_at[name] = where if where[0] is not None else fallback
    return True


def _default_of(name: str) -> Any:
    """The policy's default for NAME; else, where a stubbed or replaced upstream parser parsed in this run
    (it may define NAME: `sglang_data_parallel_size` read after ServerArgs.add_cli_args), the neutral value
    of its name's shape, assumed and reported; else None."""
    if name in ledger.attribute_defaults or not ledger.upstream_stood_in:
        return copy.deepcopy(ledger.attribute_defaults.get(name))
    ledger.assumed[name] = neutral.neutral_default(name)
    return ledger.assumed[name]


def set_unknown_flags(namespace: argparse.Namespace, unknown: list[str]) -> None:
    """Set flags no parser defined the way their owner most likely would, and report them as tolerated."""
    flag: str | None = None
    values: list[str] = []
    for word in [*unknown, "--"]:
        if word.startswith("-") and not _NUMBER.match(word):
            if flag is not None:
                _set_flag(namespace, flag, values)
            flag, values = word, []
            if "=" in word:
                flag, value = word.split("=", 1)
                values.append(value)
        elif flag is not None:
            values.append(word)


def _set_flag(namespace: argparse.Namespace, flag: str, values: list[str]) -> None:
    name = flag.lstrip("-").replace("-", "_")
    if not name:
        return
    ledger.tolerated_flags[flag] = None
    if not values and name.startswith("no_") and len(name) > 3:
        setattr(namespace, name[3:], False)
    elif not values:
        setattr(namespace, name, True)
    elif len(values) == 1:
        setattr(namespace, name, _coerce(values[0]))
    else:
        setattr(namespace, name, [_coerce(v) for v in values])


def _coerce(value: str) -> Any:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def install_replacements(repo: str, validation_policy: dict[str, Any],
                         harness_policy: dict[str, Any]) -> None:
    """Put the policy's `validation.replace` callables in place. Raises ReplacementError."""
    fixtures = {f["name"]: f.get("content") for f in harness_policy.get("fixtures") or () if f.get("name")}
    defaults = dict(validation_policy.get("attribute_defaults") or {})
    skipped.clear()
    for replacement in validation_policy.get("replace") or ():
        target = replacement["target"]
        try:
            if replacement.get("with") == "memoize":
                _memoize(target)
                continue
            owner, attribute = _owner_of(target, replacement.get("only_if_missing", True))
        except Unreachable as exc:
            if replacement.get("required"):
                raise ReplacementError(str(exc)) from None
            skipped.append(f"{target}: {exc.reason}")  # a revision before or after the target: drift
            continue
        if owner is None:
            continue
        stand_in = _make_stand_in(replacement, fixtures, defaults)
        stand_in.__name__ = stand_in.__qualname__ = attribute
        setattr(owner, attribute, staticmethod(stand_in) if isinstance(owner, type) else stand_in)


def _memoize(target: str) -> None:
    """Wrap the repository's own `target` so that it computes once per arguments (for a method, once per
    arguments after the instance) and answers a shallow copy after that.

    The warm-up fills it in the warm leader, so every suite forked from it inherits the answers (and the
    first warm leader hands them to its leader for the next ones: `memo`). For
    functions whose result depends on their arguments and the (read-only) tree alone, such as Megatron-LM's
    field docstrings read from its config classes' source, which every parse_args reads again."""
    owner, attribute = _owner_of(target, only_if_missing=False)
    real = inspect.getattr_static(owner, attribute, None)
    if real is None:
        reason = f"AttributeError: {getattr(owner, '__name__', owner)!s} has no attribute {attribute!r}"
        raise Unreachable(f"replacement target {target!r} cannot be reached: {reason}", reason)
    method = isinstance(owner, type) and isinstance(real, types.FunctionType)
    function = real if method else getattr(owner, attribute, None)
    if not callable(function) or isinstance(real, staticmethod | classmethod):
        raise ReplacementError(f"replacement {target!r} (memoize): not a function or a plain method")
    answers = memo.answers(target)

    def remembered(*args: Any, **kwargs: Any) -> Any:
        key_args = args[1:] if method else args
        try:
            key = (key_args, tuple(sorted(kwargs.items())))
            hit = answers.get(key, _MISSING)
        except TypeError:  # an unhashable argument: no memory for this call
            return function(*args, **kwargs)
        if hit is _MISSING:
            hit = memo.compute(target, key, function, *args, **kwargs)
        return copy.copy(hit)

    remembered.__name__, remembered.__qualname__ = function.__name__, function.__qualname__
    remembered.__wrapped__ = function  # type: ignore[attr-defined]
    setattr(owner, attribute, remembered)


_MISSING = object()


def _owner_of(target: str, only_if_missing: bool) -> tuple[Any, str]:
    """The object whose attribute `target` names (None when it is present and must stay), and the name."""
    module_name, _, path = target.partition(":")
    *parents, attribute = path.split(".")
    try:
        if stubs.is_missing(module_name):
            owner = stubs.stub_module(module_name)
        elif only_if_missing:
            return None, attribute
        else:
            owner = importlib.import_module(module_name)
        for parent in parents:
            owner = getattr(owner, parent)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise Unreachable(f"replacement target {target!r} cannot be reached: {reason}", reason) from None
    return owner, attribute


def _make_stand_in(replacement: dict[str, Any], fixtures: dict[str, Any],
                   defaults: dict[str, Any]) -> Callable[..., Any]:
    kind = replacement.get("with")
    if kind == "argparse_with_provider":
        return _argparse_with_provider(replacement.get("provider_kwarg") or "extra_args_provider", defaults)
    if kind == "fixture_namespace":
        name = replacement.get("fixture")
        if name not in fixtures:
            raise ReplacementError(f"replacement {replacement['target']!r} names fixture {name!r}, which "
                                   "harness.fixtures does not define")
        return _fixture_namespace(fixtures[name], replacement.get("fixture_file"),
                                  dict(replacement.get("from_args") or {}))
    if kind == "return_value":
        value = replacement.get("value")
        return lambda *args, **kwargs: copy.deepcopy(value)
    if kind == "identity_decorator":
        return _identity_decorator
    raise ReplacementError(f"replacement {replacement['target']!r}: unknown kind {kind!r}")


def _identity_decorator(*args: Any, **kwargs: Any) -> Any:
    """`@target` returns the function; `@target(...)` returns a decorator that does. For compilers and JIT
    decorators applied at import (`torch.compile`): validation never runs the compiled code, and the
    compiler's own import (torch._dynamo, torch._inductor) is seconds per leader and reads its switches from
    the environment, so suites that set them would each need another import."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return args[0]
    return lambda function: function


def _argparse_with_provider(provider_kwarg: str, defaults: dict[str, Any]) -> Callable[..., Any]:
    """Stands in for an absent upstream parse_args(extra_args_provider=...): the provider's options parse
    strictly, every other flag is set generically."""

    def parse_args(*args: Any, **kwargs: Any) -> argparse.Namespace:
        ledger.upstream_stood_in = True
        provider = kwargs.get(provider_kwarg)
        if provider is None and args and callable(args[0]):
            provider = args[0]
        parser = argparse.ArgumentParser(allow_abbrev=False)
        if provider is not None:
            parser = provider(parser) or parser
        namespace, unknown = parser.parse_known_args(sys.argv[1:])
        set_unknown_flags(namespace, unknown)
        present = vars(namespace)
        for name, value in defaults.items():
            if name not in present:
                setattr(namespace, name, copy.deepcopy(value))
        _parsed[:] = [namespace]
        return namespace

    return parse_args


def _fixture_namespace(content: Any, fixture_file: str | None,
                       from_args: dict[str, str]) -> Callable[..., Any]:
    default = _json_object(content)

    def load(*args: Any, **kwargs: Any) -> FixtureNamespace:
        served = _served_json(args[0], fixture_file) if fixture_file and args else None
        mapping = served if served is not None else copy.deepcopy(default)
        for key, source in from_args.items():
            present, value = _argument(source)
            if present:
                mapping[key] = value
        return FixtureNamespace(mapping)

    return load


def _json_object(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            content = {}
    return content if isinstance(content, dict) else {}


def _served_json(directory: Any, name: str) -> dict[str, Any] | None:
    """The JSON object the harness serves at `directory/name` (a real file or a fixture), if any."""
    try:
        with open(os.path.join(os.fspath(directory), name)) as handle:  # fsfakes serves fixtures here
            text = handle.read()
    except (OSError, TypeError):
        return None
    loaded = _json_object(text)
    return loaded or None


def _argument(source: str) -> tuple[bool, Any]:
    """(present, value) of `name` or `not name` in the namespace the stand-in parser last returned."""
    negate = source.startswith("not ")
    name = source[4:].strip() if negate else source.strip()
    if not _parsed or name not in vars(_parsed[0]):
        return False, None
    value = vars(_parsed[0])[name]
    return True, (not value if negate and value is not None else value)


class FixtureNamespace:
    """A fixture's JSON object seen as a config object: attributes, `to_dict()`, `get`, indexing."""

    def __init__(self, content: dict[str, Any]) -> None:
        for key, value in content.items():
            self.__dict__[key] = FixtureNamespace(value) if isinstance(value, dict) else value

    def to_dict(self) -> dict[str, Any]:
        return {k: v.to_dict() if isinstance(v, FixtureNamespace) else copy.deepcopy(v)
                for k, v in self.__dict__.items()}

    def get(self, key: str, default: Any = None) -> Any:
        return self.__dict__.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.__dict__[key]

    def __contains__(self, key: object) -> bool:
        return key in self.__dict__

    def __repr__(self) -> str:
        return f"FixtureNamespace({self.to_dict()!r})"
