"""Suites written as YAML maps flattened into argv: one file per CI test case (Megatron-LM's
`tests/functional_tests/test_cases/<model>/<case>/model_config.yaml`), flattened as the CI runner flattens it.

The runner (Megatron's `shell_test_utils/_run_training.sh`) does, in order: `envsubst` of the runner's
variables over the whole file; exports the `ENV_VARS` map; then has yq print the `MODEL_ARGS` map (aliases
and merge keys exploded) one `key: value` line per entry, `true` as the word `true`, an empty string dropped
and anything else `tostring` (false is `false`, null `null`); each value trimmed by `xargs`; `true` becomes
the bare key, `(...)` one quoted word, `[...]` its contents unquoted (several words), a value with a space,
`|`, `(` or `)` one quoted word, anything else unquoted; and the whole line goes through `eval` into an array,
which expands the `$VAR`s the envsubst left (the file's own ENV_VARS) and splits unquoted words.

The files are a pull request's content: read with `yaml.compose` (no Python objects), bounded in size and in
values once aliases are expanded, scalars kept as their text (as yq prints them) with YAML 1.2's booleans
and nulls. No shell runs: `$(...)` and backquotes stay as written. Pure: files come in as text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.analysis.sources.yaml_args_keys import MapEdit, YamlArgs
from app.analysis.sources.yaml_plain import MAX_FILE_BYTES, YamlError, compose_plain

_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_TRUE = "true"
# The runner's `grep -Eq` tests, in its order: `(...)` one word, `[...]` its contents as words.
_PARENTHESIZED = re.compile(r"\([^)]+\)\Z")
_BRACKETED = re.compile(r"\[[^]]+\]\Z")
_QUOTING = re.compile(r"[\x27\"\\]")  # what shlex (POSIX) treats specially beside blanks: quotes, backslash
_BLANKS = re.compile(r"[ \t\r\n]+")  # shlex's whitespace
MAX_WORDS = 4096  # of one suite
MAX_NUMBERED_MAPS = 9  # `<map>_2` ... `<map>_9`


@dataclass(frozen=True)
class FlatSuite:
    """One flattened map: its argv and the job environment the file adds."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    run: int = 1  # 2 for `<map>_2`, ...


def envsubst(text: str, variables: Mapping[str, str]) -> str:
    """`envsubst` with the list of the runner's variable names: only those are replaced, others stay."""
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return variables[name] if name in variables else match.group(0)
    return _VARIABLE.sub(replace, text)


def flatten_file(text: str, source: YamlArgs, variables: Mapping[str, str]) -> list[FlatSuite]:
    """The suites of one file: its map, then `<map>_2`... when `numbered_maps`. Raises YamlError."""
    if len(text.encode()) > MAX_FILE_BYTES:
        raise YamlError(f"larger than {MAX_FILE_BYTES} bytes")
    document = compose_plain(envsubst(text, variables))
    if not isinstance(document, dict):
        raise YamlError("not a mapping")
    env = {str(k): _text(v) for k, v in _mapping(document.get(source.env_map)).items()} \
        if source.env_map else {}
    shell_vars = {**variables, **env}  # what `eval` sees: the runner's variables and the exported ENV_VARS
    names = [source.map] + ([f"{source.map}_{n}" for n in range(2, MAX_NUMBERED_MAPS + 1)]
                            if source.numbered_maps else [])
    suites = []
    for run, name in enumerate(names, start=1):
        if name not in document:
            continue
        entries = apply_edits(_mapping(document.get(name)), source.edits, document)
        suites.append(FlatSuite(argv=tuple(flatten_map(entries, shell_vars)[:MAX_WORDS]), env=env, run=run))
    if not suites:
        raise YamlError(f"no `{source.map}` map")
    return suites


def apply_edits(entries: dict[str, Any], edits: list[MapEdit], document: Mapping[str, Any]) -> dict[str, Any]:
    """The runner's `yq -i '.MODEL_ARGS."--exit-interval" = .MODEL_ARGS."--train-iters"'` and the like."""
    edited = dict(entries)
    for edit in edits:
        if all(_field_text(document.get(name)) in [_field_text(v) for v in values]
               for name, values in edit.when.items()):
            edited[edit.key] = entries.get(edit.from_)
    return edited


def flatten_map(entries: Mapping[str, Any], shell_vars: Mapping[str, str]) -> list[str]:
    """argv of one map, word for word as `_run_training.sh` builds its PARAMS array."""
    words: list[str] = []
    for key, value in entries.items():
        if value == "":  # yq's `select(.value != "")`: the entry prints nothing
            continue
        if isinstance(value, list):  # a YAML list: nargs values, one word each
            words += [*_split(key, shell_vars), *(_expand(_text(item), shell_vars) for item in value)]
            continue
        text = _xargs_trim(_TRUE if value is True else _text(value))
        if text == _TRUE:
            words += _split(key, shell_vars)
        elif _PARENTHESIZED.match(text):
            words += [*_split(key, shell_vars), _expand(text, shell_vars)]  # `$key "$value"`
        elif _BRACKETED.match(text):
            words += [*_split(key, shell_vars), *_split(text[1:-1], shell_vars)]  # brackets stripped
        elif any(c in text for c in " |()"):
            words += [*_split(key, shell_vars), _expand(text, shell_vars)]
        else:
            words += [*_split(key, shell_vars), *_split(text, shell_vars)]
    return words


def _xargs_trim(text: str) -> str:
    """`echo "$value" | xargs`: words split as xargs splits them (its quotes removed), joined by a space;
    a value xargs cannot split (an unmatched quote) prints nothing."""
    if not _QUOTING.search(text):  # most values: shlex's answer without its per-character tokenizer
        return " ".join(word for word in _BLANKS.split(text) if word)
    try:
        return " ".join(shlex.split(text, posix=True))
    except ValueError:
        return ""


def _split(text: str, shell_vars: Mapping[str, str]) -> list[str]:
    """An unquoted word of `eval`: variables expanded, then split on whitespace (an empty result: none)."""
    return _expand(text, shell_vars).split()


def _expand(text: str, shell_vars: Mapping[str, str]) -> str:
    """`$VAR` / `${VAR}` as the shell expands them; an unset variable is empty."""
    return _VARIABLE.sub(lambda m: shell_vars.get(m.group(1) or m.group(2) or "", ""), text)


def _text(value: Any) -> str:
    """yq's `tostring`: a scalar's text as written, `true`/`false`/`null`, a list as its flow form."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _field_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _mapping(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}
