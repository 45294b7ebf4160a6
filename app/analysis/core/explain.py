"""Pydantic's validation errors said in the words of whoever wrote the file or set the variable.

A policy author or an operator reads "unknown key `unknwon_flags`, did you mean `unknown_flags`?", not
"Extra inputs are not permitted". Values are never repeated: a setting may be a secret.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence

from pydantic import BaseModel
from pydantic_core import ErrorDetails

# What each kind of error means to a person, by pydantic's error type; {…} from the error's context.
PLAIN = {
    "missing": "required, missing",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected text",
    "list_type": "expected a list",
    "dict_type": "expected a mapping (key: value)",
    "model_type": "expected a mapping (key: value)",
    "model_attributes_type": "expected a mapping (key: value)",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "literal_error": "expected {expected}",
    "union_tag_invalid": "unknown {discriminator} `{tag}` (expected {expected_tags})",
    "union_tag_not_found": "needs {discriminator} (which kind of entry this is)",
}


def describe(error: ErrorDetails, model: type[BaseModel] | None = None) -> str:
    """What is wrong, in plain words: an unknown key of MODEL's tree names its nearest known key."""
    if error["type"] == "extra_forbidden" and error["loc"]:
        return _unknown_key(str(error["loc"][-1]), _keys_at(model, error["loc"][:-1]) if model else [])
    template = PLAIN.get(error["type"])
    if template is None:
        message = error["msg"]
        return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    context = {name: str(value).strip("'") if name == "discriminator" else value
               for name, value in error.get("ctx", {}).items()}
    try:
        return template.format(**context)
    except (KeyError, IndexError):
        return error["msg"]


def location(error: ErrorDetails, model: type[BaseModel] | None = None) -> str:
    """The dotted key an error is about (`matrix.sources[0].entry`); an unknown key's place is its parent's.
    The tags pydantic puts in the place of a tagged union's member (`record_launches`) are left out."""
    loc = error["loc"][:-1] if error["type"] == "extra_forbidden" else error["loc"]
    tags = _tags_in(model) if model else set()
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part not in tags:
            text += f".{part}" if text else part
    return text


def _unknown_key(key: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"unknown key `{key}`, did you mean `{close[0]}`?"
    if known:
        return f"unknown key `{key}` (known here: {', '.join(f'`{k}`' for k in sorted(known))})"
    return f"unknown key `{key}`"


def _keys_at(model: type[BaseModel], path: Sequence[int | str]) -> list[str]:
    """The keys the models at PATH in MODEL's tree accept (list indexes and union tags passed through)."""
    models = [model]
    for part in path:
        if isinstance(part, int):
            continue
        inner = [sub for candidate in models for name, field in candidate.model_fields.items()
                 if part in (name, field.alias) for sub in _models_in(field.annotation)]
        if inner:
            models = inner
        else:  # a tagged union's tag: keep the member whose tag it is, when one is
            tagged = [candidate for candidate in models if _tag_of(candidate) == part]
            models = tagged or models
    return sorted({field.alias or name for candidate in models
                   for name, field in candidate.model_fields.items()})


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated, list, dict):
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
    return found


def _tags_in(model: type[BaseModel]) -> set[str]:
    """Every tag of a tagged union in MODEL's tree (the values of a `kind` field that is a Literal)."""
    tags: set[str] = set()
    seen: set[type[BaseModel]] = set()
    pending = [model]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        tag = _tag_of(current)
        if tag is not None:
            tags.add(tag)
        pending += [sub for field in current.model_fields.values() for sub in _models_in(field.annotation)]
    return tags


def _tag_of(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("kind")
    if field is None or typing.get_origin(field.annotation) is not typing.Literal:
        return None
    [tag, *_] = typing.get_args(field.annotation)
    return str(tag)
