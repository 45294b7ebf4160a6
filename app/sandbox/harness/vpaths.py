"""Which absent paths the harness makes exist, and as what: the policy's fixtures and CI-host prefixes.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
Pure decisions, no patching (fsfakes applies them to every file API). One rule makes them consistent: a
path that exists is a file that can be read or a directory that can be listed, never a name that only
`exists()`.
- A fixture is a file with its content; the directories above it exist.
- Under a CI-host prefix (`/root/`), a path whose name looks like a file (`x.txt`, `config.json`) is an
  empty file, any other path a directory: checkpoints and model directories are what CI hosts keep there.
- A real path always wins: nothing is made up where the sandbox has something.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.sandbox.harness.globs import glob_regex
else:
    from globs import glob_regex

FILE_SUFFIX = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,11}$")  # `.txt`, `.safetensors`; not `Qwen3-0.6B`


@dataclass(frozen=True)
class Node:
    """An absent path the harness makes exist: a file with `text`, or a directory with `children`."""

    kind: str  # "file" | "dir"
    text: str = ""
    children: tuple[str, ...] = ()


class VirtualPaths:
    """The policy's fixtures and prefixes, asked path by path."""

    def __init__(self, harness_policy: dict[str, Any]) -> None:
        fixtures = harness_policy.get("fixtures") or []
        self.fixtures = [(glob_regex(f["path"]), _fixture_text(f.get("content"))) for f in fixtures]
        self.fixture_dirs = [_parents(f["path"]) for f in fixtures]
        self.fixture_names = [posixpath.basename(f["path"]) for f in fixtures]
        self.prefixes = tuple(p.rstrip("/") for p in harness_policy.get("existing_path_prefixes") or ())

    def fixture_text(self, absolute: str) -> str | None:
        return next((text for regex, text in self.fixtures if regex.match(absolute)), None)

    def node(self, absolute: str) -> Node | None:
        """What an absent, normalised absolute path is made to be; None: it does not exist."""
        text = self.fixture_text(absolute)
        if text is not None:
            return Node("file", text)
        under = self._prefix_of(absolute)
        if under is not None and not _file_above(absolute, under):
            if absolute != under and FILE_SUFFIX.search(posixpath.basename(absolute)):
                return Node("file")
            return Node("dir", children=self._children(absolute))
        if any(regex.match(absolute) for parents in self.fixture_dirs for regex in parents):
            return Node("dir", children=self._children(absolute))
        return None

    def _prefix_of(self, absolute: str) -> str | None:
        return next((p for p in self.prefixes if absolute == p or absolute.startswith(p + "/")), None)

    def _children(self, directory: str) -> tuple[str, ...]:
        """The literal names fixtures put directly in `directory` (`config.json` in a model directory)."""
        names = [name for name, parents in zip(self.fixture_names, self.fixture_dirs, strict=True)
                 if parents and parents[-1].match(directory) and not any(c in name for c in "*?[")]
        return tuple(dict.fromkeys(names))


def _parents(pattern: str) -> list[re.Pattern[str]]:
    """Regexes of the directories above a fixture pattern, outermost first (`/root`, `/root/models/*`)."""
    parts = pattern.rstrip("/").split("/")
    return [glob_regex("/".join(parts[:depth])) for depth in range(2, len(parts))]


def _file_above(absolute: str, prefix: str) -> bool:
    """A component between the prefix and the name looks like a file: nothing can be under a file."""
    middle = absolute[len(prefix):].strip("/").split("/")[:-1]
    return any(FILE_SUFFIX.search(part) for part in middle)


def _fixture_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    import json  # only for non-string fixtures, i.e. rarely

    return json.dumps(content)


def normalised(path: str) -> str:
    return posixpath.normpath(os.path.join(os.getcwd(), path))
