"""GitHub Actions expressions over values known on the host: literals, named values, `!`, `==`, `!=`, `&&`,
`||` and parentheses, with GitHub's rules (`&&`/`||` give an operand, not a boolean; strings compare without
regard to case; other mixed types compare as numbers).

A name the caller does not know (`github.run_id`, `secrets.X`, `steps.x.outputs.y`) or any function call makes
the whole expression unknown: nothing is guessed. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

UNKNOWN: Any = object()  # what an expression evaluates to when it needs what the caller does not know
_TOKEN = re.compile(r"""\s*(?:('(?:[^']|'')*')|(-?\d+(?:\.\d+)?)\b|([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)"""
                    r"""|(==|!=|&&|\|\||!|\(|\)))""")
_KEYWORDS = {"true": True, "false": False, "null": None}


class _Unknown(Exception):
    """Raised inside the parser: the expression needs something not known, or is not understood."""


def evaluate(expression: str, names: Mapping[str, Any]) -> Any:
    """The value of `expression` (the text inside `${{ }}`), its names read from `names` by their dotted
    path (`inputs.script`); UNKNOWN when it cannot be evaluated."""
    try:
        tokens = _tokens(expression)
        value, position = _or(tokens, 0, names)
    except _Unknown:
        return UNKNOWN
    return value if position == len(tokens) else UNKNOWN


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
    if kind == "name" and token in names:
        return names[token], position + 1
    raise _Unknown  # an unknown name, a function call, a stray operator


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
