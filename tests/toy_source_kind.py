"""A toy kind of matrix source, written as a new CI shape would be: CI scripts listed one per line in a text
file of the repository (`# off: <script>` marks one CI skips), each run as CI runs it, launches recorded.
Everything of the kind is here: its keys, its listing, its recording, how `prtriage init` detects it, and
what it adds to the matrix cache key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from app.analysis.sources.recorded import from_launches
from app.analysis.sources.source_keys import Recording
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree, listed_ids

MAX_LIST_BYTES = 64_000
OFF = "# off: "
LIST_FILE = "ci/suites.txt"
# The image CI's runner runs the listed scripts in, named by no file of the tree: a new image, a new matrix.
RUNNER_IMAGE = "toy-runner:1"


class ScriptList(Recording):
    """The CI scripts a text file lists."""

    kind: Literal["script_list"] = Field(description="Source kind.")
    list_file: str = Field(description="Repo-relative path of the list, one CI script a line.")


def list_items(source: ScriptList, tree: SourceTree, where: str) -> Listing:
    try:
        if tree.size(source.list_file) > MAX_LIST_BYTES:
            return Listing()
        lines = [line.strip() for line in tree.read(source.list_file).splitlines()]
    except OSError:
        return Listing()
    files = set(tree.paths())
    scripts = [line for line in dict.fromkeys(lines) if line in files]
    off = [line.removeprefix(OFF) for line in lines if line.startswith(OFF)]
    return Listing(items=tuple({"id": script, "script": script} for script in scripts), disabled=tuple(off))


def detect(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """`prtriage init`: a list file naming at least one script of the tree."""
    path = root / LIST_FILE
    if not path.is_file() or path.stat().st_size > MAX_LIST_BYTES:
        return
    named = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    scripts = [line for line in named if line and not line.startswith("#") and (root / line).is_file()]
    if scripts:
        yield ({"kind": "script_list", "list_file": LIST_FILE, **recording},
               f"{LIST_FILE} lists {len(scripts)} CI scripts")


def cache_key(source: ScriptList, listing: Listing) -> tuple[str, ...]:
    return (*listed_ids(source, listing), RUNNER_IMAGE)


KIND = SourceKind(ScriptList, list_items, from_launches, detect, cache_key=cache_key)
