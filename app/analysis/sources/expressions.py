"""GitHub Actions expressions over values known on the host: literals, named values, `!`, `==`, `!=`, `&&`,
`||`, parentheses and the pure functions `startsWith`, `endsWith`, `contains`, `fromJSON`, `toJSON`, with
GitHub's rules (`&&`/`||` give an operand, not a boolean; strings compare without regard to case; other mixed
types compare as numbers).

A name the caller does not know (`github.run_id`, `secrets.X`, `steps.x.outputs.y`) or any other function call
makes the whole expression unknown: nothing is guessed. A caller that knows a whole context is empty (a push
event has no `inputs`) names it in `empty`: its names are null there, as GitHub gives them. Pure.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

UNKNOWN: Any = object()  # what an expression evaluates to when it needs what the caller does not know
_TOKEN = re.compile(r"""\s*(?:('(?:[^']|'')*')|(-?\d+(?:\.\d+)?)\b|([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)"""
                    r"""|(==|!=|&&|\|\||!|\(|\)|,))""")
_KEYWORDS = {"true": True, "false": False, "null": None}


class _Unknown(Exception):
    """Raised inside the parser: the expression needs something not known, or is not understood."""


def evaluate(expression: str, names: Mapping[str, Any], empty: tuple[str, ...] = ()) -> Any:
    """The value of `expression` (the text inside `${{ }}`), its names read from `names` by their dotted
    path (`inputs.script`), a name of a context in `empty` null; UNKNOWN when it cannot be evaluated."""
    known = _Names(names, empty)
    try:
        tokens = _tokens(expression)
        value, position = _or(tokens, 0, known)
    except _Unknown:
        return UNKNOWN
    return value if position == len(tokens) else UNKNOWN


class _Names(dict[str, Any]):
    """The caller's names; those of an empty context are null."""

    def __init__(self, names: Mapping[str, Any], empty: tuple[str, ...]) -> None:
        super().__init__(names)
        self.empty = empty

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (isinstance(name, str) and name.split(".")[0] in self.empty)

    def __missing__(self, name: str) -> Any:
        return None


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, "") and not (isinstance(value, float) and math.isnan(value))


def _tokens(expression: str) -> list[tuple[str, Any]]:
    tokens: list[tuple[str, Any]] = []
    position = 0
    text = expression.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise _Unknown
        literal, number, name, operator = match.groups()
        if literal is not None:
            tokens.append(("value", literal[1:-1].replace("''", "'")))
        elif number is not None:
            tokens.append(("value", float(number) if "." in number else int(number)))
        elif name is not None:
            tokens.append(("value", _KEYWORDS[name]) if name in _KEYWORDS else ("name", name))
        else:
            tokens.append(("op", operator))
        position = match.end()
    return tokens


def _or(tokens: list[tuple[str, Any]], position: int, names: Mapping[str, Any]) -> tuple[Any, int]:
    value, position = _and(tokens, position, names)
    while position < len(tokens) and tokens[position] == ("op", "||"):
        right, position = _and(tokens, position + 1, names)
        value = value if truthy(value) else right
    return value, position


def _and(tokens: list[tuple[str, Any]], position: int, names: Mapping[str, Any]) -> tuple[Any, int]:
    value, position = _comparison(tokens, position, names)
    while position < len(tokens) and tokens[position] == ("op", "&&"):
        right, position = _comparison(tokens, position + 1, names)
        value = right if truthy(value) else value
    return value, position


def _comparison(tokens: list[tuple[str, Any]], position: int, names: Mapping[str, Any]) -> tuple[Any, int]:
    value, position = _unary(tokens, position, names)
    while position < len(tokens) and tokens[position] in (("op", "=="), ("op", "!=")):
        operator = tokens[position][1]
        right, position = _unary(tokens, position + 1, names)
        value = _equal(value, right) == (operator == "==")
    return value, position


def _unary(tokens: list[tuple[str, Any]], position: int, names: Mapping[str, Any]) -> tuple[Any, int]:
    if position >= len(tokens):
        raise _Unknown
    kind, token = tokens[position]
    if (kind, token) == ("op", "!"):
        value, position = _unary(tokens, position + 1, names)
        return not truthy(value), position
    if (kind, token) == ("op", "("):
        value, position = _or(tokens, position + 1, names)
        if position >= len(tokens) or tokens[position] != ("op", ")"):
            raise _Unknown
        return value, position + 1
    if kind == "value":
        return token, position + 1
    if kind == "name" and position + 1 < len(tokens) and tokens[position + 1] == ("op", "("):
        return _call(token, tokens, position + 2, names)
    if kind == "name" and token in names:
        return names[token], position + 1
    raise _Unknown  # an unknown name, a function call, a stray operator


def _call(function: str, tokens: list[tuple[str, Any]], position: int,
          names: Mapping[str, Any]) -> tuple[Any, int]:
    """One of the pure functions, its arguments from POSITION (past the parenthesis) to its closing one."""
    arguments: list[Any] = []
    while position < len(tokens) and tokens[position] != ("op", ")"):
        if arguments:
            if tokens[position] != ("op", ","):
                raise _Unknown
            position += 1
        value, position = _or(tokens, position, names)
        arguments.append(value)
    if position >= len(tokens):
        raise _Unknown
    try:
        return _FUNCTIONS.get(function.casefold(), _unknown_function)(*arguments), position + 1
    except TypeError:  # called with another number of arguments than it takes
        raise _Unknown from None


def _unknown_function(*arguments: Any) -> Any:
    raise _Unknown  # a status function (`always()`), `hashFiles`, `format`: not evaluated here


def _text_of(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value)


def _contains(search: Any, item: Any) -> bool:
    if isinstance(search, list):
        return any(_equal(element, item) for element in search)
    return _text_of(item).casefold() in _text_of(search).casefold()


def _from_json(text: Any) -> Any:
    try:
        return json.loads(_text_of(text))
    except ValueError:
        raise _Unknown from None


_FUNCTIONS: dict[str, Any] = {
    "startswith": lambda text, prefix: _text_of(text).casefold().startswith(_text_of(prefix).casefold()),
    "endswith": lambda text, suffix: _text_of(text).casefold().endswith(_text_of(suffix).casefold()),
    "contains": _contains,
    "fromjson": _from_json,
    "tojson": lambda value: json.dumps(value, indent=2),
}


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    if type(left) is type(right):
        return bool(left == right)
    return _number(left) == _number(right)


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip()) if value.strip() else 0.0
        except ValueError:
            return math.nan
    return math.nan
