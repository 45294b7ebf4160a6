"""A pull request's YAML read as plain values the way yq (YAML 1.2) reads it: scalars keep their text,
`true`/`false`/`null` are the only typed ones, aliases and merge keys are expanded, and nothing else is built.

PyYAML's own loaders follow YAML 1.1 (`yes` is a boolean, `1_000` a number, `1e-5` a string) and turn
`0.00015` into a float whose text is not the file's; a CI runner that prints values with yq passes the
file's text. The composed node tree is walked here with bounds on size, values and depth. Pure.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# libyaml's parser where PyYAML was built with it: the same nodes, some 5x faster (a plain scalar's style is
# "" there, None in the pure-Python parser). Megatron-LM's 281 case files and 45 recipes: 6.5 s -> about 1 s.
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_FILE_BYTES = 1_000_000
# Values once aliases are expanded: a few hundred bytes of nested anchors make a "billion laughs".
MAX_VALUES = 200_000
MERGE_TAG = "tag:yaml.org,2002:merge"
_NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")
_BOOLEANS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}


class YamlError(Exception):
    """A file that cannot be read as YAML within the bounds."""


def compose_plain(text: str) -> Any:
    """The document as dicts, lists and strings (plus True, False, None). Raises YamlError."""
    if len(text.encode()) > MAX_FILE_BYTES:
        raise YamlError(f"larger than {MAX_FILE_BYTES} bytes")
    try:
        node = yaml.compose(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise YamlError(f"not valid YAML: {exc}") from None
    except RecursionError:
        raise YamlError("nested too deeply") from None
    budget = [MAX_VALUES]
    try:
        return _plain(node, budget) if node is not None else None
    except RecursionError:
        raise YamlError("nested too deeply") from None


def _plain(node: yaml.Node, budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise YamlError(f"more than {MAX_VALUES} values once its aliases are expanded")
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, budget) for item in node.value]
    if isinstance(node, yaml.MappingNode):
        return _mapping(node, budget)
    raise YamlError(f"unexpected node {type(node).__name__}")


def _scalar(node: yaml.ScalarNode) -> Any:
    text = str(node.value)
    if node.style:  # quoted or block: a string, whatever it says
        return text
    if _NULL.match(text):
        return None
    return _BOOLEANS.get(text, text)


def _mapping(node: yaml.MappingNode, budget: list[int]) -> dict[str, Any]:
    """Keys in order; `<<` merges (a mapping or a list of them) give way to the keys written here."""
    merged: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == MERGE_TAG or (isinstance(key_node, yaml.ScalarNode) and key_node.value == "<<"
                                         and not key_node.style):
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in sources:
                value = _plain(source, budget)
                if isinstance(value, dict):
                    merged.update({k: v for k, v in value.items() if k not in merged})
            continue
        key = _plain(key_node, budget)
        own[str(key) if not isinstance(key, bool) else str(key).lower()] = _plain(value_node, budget)
    return {**merged, **own}
