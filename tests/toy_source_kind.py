"""A toy kind of matrix source, written as a new CI shape would be: CI scripts listed one per line in a text
file of the repository (`# off: <script>` marks one CI skips), each run as CI runs it, launches recorded."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.analysis.sources.recorded import from_launches
from app.analysis.sources.source_keys import Recording
from app.analysis.sources.source_kind import Listing, SourceKind, SourceTree

MAX_LIST_BYTES = 64_000
OFF = "# off: "


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


KIND = SourceKind(ScriptList, list_items, from_launches)
