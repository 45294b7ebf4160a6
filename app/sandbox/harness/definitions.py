"""Capture of Python-defined suites: call a repository function that returns definitions, one per CI test,
and turn each of their runs into the words of one suite.

Runs INSIDE the sandbox (the functions are the repository's code, a pull request's at the head): the
standard library only. What it returns is untrusted on the host too: bounded here, bounded again there.
"""

from __future__ import annotations

import importlib
import shlex
import string
from collections.abc import Iterable
from typing import Any

MAX_DEFINITIONS = 1024  # per function
MAX_RUNS = 16  # per definition
MAX_WORDS = 512  # per suite
MAX_WORD_CHARS = 4096


class DefinitionError(Exception):
    """A definition whose suite cannot be written (a missing field, a run that is no list of words)."""


def call_function(target: str) -> list[Any]:
    """The definitions `package.module:function` returns, imported as the CI runner imports it."""
    module_name, _, name = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    for part in name.split("."):
        owner = getattr(owner, part)
    found = owner()
    if isinstance(found, (str, bytes)) or not isinstance(found, Iterable):
        raise DefinitionError(f"{target} returned {type(found).__name__}, not a list of definitions")
    return list(_take(found, MAX_DEFINITIONS))


def suites_of(definition: Any, source: dict[str, Any]) -> tuple[str, bool, list[dict[str, Any]]]:
    """(name, disabled, [{"name", "argv"}]) of one definition: one item per run."""
    name = _word(getattr(definition, source["name"]))
    disabled_attr = source.get("disabled")
    if disabled_attr and getattr(definition, disabled_attr, False):
        return name, True, []
    runs = _runs(definition, source.get("runs"), bool(source.get("shell_words")))
    per_run = {attr: list(_take(getattr(definition, attr, ()) or (), MAX_RUNS))
               for attr in source.get("per_run") or ()}
    suites = []
    for index, words in enumerate(runs):
        fields: dict[str, Any] = {"definition": definition}
        for attr, items in per_run.items():
            fields[attr] = items[index] if index < len(items) else None
        defaults = dict(source.get("defaults") or {})
        rendered = (_render(template, fields, defaults) for template in source.get("args") or ())
        argv = [word for word in rendered if word is not None] + words
        suites.append({"name": name if len(runs) == 1 else f"{name}#{index + 1}", "argv": argv[:MAX_WORDS]})
    return name, False, suites


def _runs(definition: Any, attr: str | None, shell_words: bool) -> list[list[str]]:
    if not attr:
        return [[]]
    runs = []
    for run in _take(getattr(definition, attr) or (), MAX_RUNS):
        if isinstance(run, (str, bytes)) or not isinstance(run, Iterable):
            raise DefinitionError(f"a run of {attr} is {type(run).__name__}, not a list of words")
        words = [_word(w) for w in _take(run, MAX_WORDS)]
        if shell_words:  # the runner hands `" ".join(words)` to `sh -c`: the shell splits and unquotes
            try:
                words = shlex.split(" ".join(words))[:MAX_WORDS]
            except ValueError as exc:
                raise DefinitionError(f"a run of {attr} does not split as shell words: {exc}") from None
        runs.append(words)
    return runs or [[]]


def _render(template: str, fields: dict[str, Any], defaults: dict[str, Any]) -> str | None:
    """`template` with its fields. A field naming a per_run item this run lacks takes its `defaults` value
    (run_train.sh's `MODULE=${MODULE:-llama3}`), or, without one, the word is left out."""
    try:
        return _word(_Fields(defaults).format(template, **fields))
    except _Missing:
        return None
    except (AttributeError, IndexError, KeyError, ValueError, TypeError) as exc:
        raise DefinitionError(f"{template!r}: {type(exc).__name__}: {exc}") from None


class _Missing(Exception):
    """A field of a per_run item the run lacks, with no default."""


class _Fields(string.Formatter):
    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        root = field_name.split(".")[0].split("[")[0]
        if kwargs.get(root) is None:
            if field_name in self.defaults:
                return self.defaults[field_name], field_name
            raise _Missing(field_name)
        return super().get_field(field_name, args, kwargs)


def _word(value: Any) -> str:
    return str(value)[:MAX_WORD_CHARS]


def _take(items: Iterable[Any], limit: int) -> Iterable[Any]:
    for index, item in enumerate(items):
        if index >= limit:
            return
        yield item
