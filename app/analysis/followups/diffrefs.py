"""The prose in the lines a pull request adds, with path and line: where `# TODO(#N): ...`, a skip reason
("will be fixed in #N") or a docs page's "until #N merges" make their promises.

Pure: a unified diff (`git diff`, or the per-file `patch` GitHub's PR files API gives) in, `Text`s with
source "diff" out, for the finder and classifier of the PR's own texts (references.py, followups.py).

Only added lines count: a reference on a removed line is going away, so it neither opens nor closes
anything; context lines only keep track of fences, block comments and docstrings. What each kind of file
carries as prose:

- docs (`.md`, `.rst`, `.txt` ...): the whole line, outside code fences;
- code: its comments (`#`, `//`, `/* */`, `--`, by language) and its string literals (skip reasons,
  messages), and the lines of a block comment or docstring.

Bounds, so that a release PR or a vendored library costs no more than a normal one: at most MAX_FILES
files and MAX_ADDED_LINES added lines are read, a line longer than MAX_LINE_CHARS (minified or generated
code) is skipped, and so are binary files and generated or vendored paths (GENERATED).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath

from app.analysis.followups.references import Text

MAX_FILES = 3000  # as many as GitHub lists for one PR
MAX_ADDED_LINES = 50_000
MAX_LINE_CHARS = 1000
GENERATED = ("vendor/*", "*/vendor/*", "third_party/*", "*/third_party/*", "node_modules/*",
             "*/node_modules/*", "*.min.js", "*.min.css", "*.lock", "package-lock.json",
             "*/package-lock.json", "*_pb2.py", "*_pb2_grpc.py", "*.pb.go", "*.pb.h", "*.pb.cc",
             "*.generated.*", "*.svg", "*.ipynb")

DOCS = frozenset({".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc"})
HASH = frozenset({".py", ".pyi", ".sh", ".bash", ".zsh", ".yml", ".yaml", ".toml", ".cfg", ".ini", ".rb",
                  ".pl", ".r", ".cmake", ".mk", ".conf", ".dockerfile"})
SLASH = frozenset({".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cu", ".cuh", ".js", ".jsx", ".ts",
                   ".tsx", ".mjs", ".go", ".rs", ".java", ".kt", ".scala", ".swift", ".cs", ".proto",
                   ".php"})
DASH = frozenset({".sql", ".lua", ".hs"})
HASH_NAMES = frozenset({"dockerfile", "makefile", "containerfile", "cmakelists.txt", "justfile"})

_HUNK = re.compile(r"@@ -\d+(?:,(?P<old>\d+))? \+(?P<line>\d+)(?:,(?P<new>\d+))? @@")
_FENCE = re.compile(r"\s{0,3}(`{3,}|~{3,})")
_STRING = re.compile(r"""(?:[rRbBuUfF]{0,2})("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`\n]*`)""")
_TRIPLE = re.compile(r'"""|\'\'\'')
_LINK = re.compile(r"!?\[([^\]\n]*)\]\(([^)\s]+)\)")  # markdown: how `[PR #9](url)` reads on the page


def added_lines(diff: str) -> Iterator[tuple[str, str, int | None]]:
    """(path, raw line, new line number or None) of every hunk line of a whole `git diff`, file by file;
    the number is None for the old side's lines (removed, "\\ No newline at end of file")."""
    path: str | None = None
    hunk = _Hunk()
    for raw in diff.split("\n"):
        if hunk.open:
            number = hunk.take(raw)
            if path is not None:
                yield path, raw, number
        elif raw.startswith("diff --git "):
            path = None
        elif raw.startswith("+++ "):
            path = _diff_path(raw[4:])
        elif raw.startswith(("Binary files ", "GIT binary patch")):
            path = None
        else:
            hunk.start(raw)


def patch_lines(path: str, patch: str) -> Iterator[tuple[str, str, int | None]]:
    """The same for one file's `patch` from GitHub's PR files API (hunks only, no headers)."""
    hunk = _Hunk()
    for raw in patch.split("\n"):
        if hunk.open:
            yield path, raw, hunk.take(raw)
        else:
            hunk.start(raw)


class _Hunk:
    """Where a walk through hunks is: the lines each side has left by its `@@ -a,b +c,d @@` header (a line
    after the last is a header again, whatever it starts with), and the new side's next line number."""

    def __init__(self) -> None:
        self.old = self.new = self.line = 0

    @property
    def open(self) -> bool:
        return self.old > 0 or self.new > 0

    def start(self, raw: str) -> None:
        header = _HUNK.match(raw)
        if header:
            self.old, self.new = int(header["old"] or 1), int(header["new"] or 1)
            self.line = int(header["line"])

    def take(self, raw: str) -> int | None:
        """RAW's new-side number, None for an old-side or marker line."""
        if raw.startswith("\\"):
            return None
        if raw.startswith("-"):
            self.old -= 1
            return None
        if not raw.startswith("+"):
            self.old -= 1  # context (an empty line is a context line whose space was trimmed)
        self.new -= 1
        self.line += 1
        return self.line - 1


def _diff_path(header: str) -> str | None:
    """The new path of `+++ b/path` (None for /dev/null: a deleted file adds nothing)."""
    header = header.rstrip("\t")
    if header == "/dev/null":
        return None
    if header.startswith('"'):
        header = _unquote(header)
    return header[2:] if header.startswith("b/") else header


def _unquote(quoted: str) -> str:
    """A path git C-quoted (`"b/caf\\303\\251.md"`): its bytes, as UTF-8."""
    body = quoted[1:-1] if quoted.endswith('"') else quoted[1:]
    escapes = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b", "f": b"\f",
               "r": b"\r", "v": b"\v"}
    out, index = bytearray(), 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            octal = body[index + 1:index + 4]
            if re.fullmatch(r"[0-7]{3}", octal):
                out.append(int(octal, 8))
                index += 4
                continue
            out += escapes.get(body[index + 1], body[index + 1].encode())
            index += 2
            continue
        out += char.encode()
        index += 1
    return out.decode("utf-8", "replace")


def diff_texts(lines: Iterable[tuple[str, str, int | None]]) -> list[Text]:
    """The prose of the added lines among LINES (from added_lines or patch_lines), one Text per line
    that carries any, in order; within the bounds of the module's docstring."""
    texts: list[Text] = []
    files: set[str] = set()
    added = 0
    reader: _FileReader | None = None
    for path, raw, number in lines:
        if reader is None or reader.path != path:
            if path not in files and len(files) == MAX_FILES:
                break
            files.add(path)
            reader = _FileReader(path)
        if number is None:
            continue  # the old side's: a removed line promises nothing, nor does it open a fence
        prose = reader.feed(raw[1:])
        if raw.startswith("+"):
            added += 1
            if prose:
                texts.append(Text("diff", prose, path=path, line=number))
            if added == MAX_ADDED_LINES:
                break
    return texts


def skipped(path: str) -> bool:
    """Whether PATH is generated or vendored (its promises are someone else's), or of no known kind."""
    lowered = path.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in GENERATED) or _kind(path) is None


def _kind(path: str) -> str | None:
    name = PurePosixPath(path).name.lower()
    suffix = PurePosixPath(name).suffix
    if suffix in DOCS and name not in HASH_NAMES:
        return "docs"
    if suffix in HASH or name in HASH_NAMES or name.startswith("dockerfile"):
        return "python" if suffix in (".py", ".pyi") else "hash"
    if suffix in SLASH:
        return "slash"
    if suffix in DASH:
        return "dash"
    return None


class _FileReader:
    """The prose of one file's hunk lines, fed in order: keeps the state a line's meaning depends on (in
    a code fence, a block comment, a docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.kind = None if skipped(path) else _kind(path)
        self.fence: str | None = None
        self.block = False  # inside /* */
        self.docstring: str | None = None  # the quotes of the open docstring

    def feed(self, line: str) -> str:
        if self.kind is None or len(line) > MAX_LINE_CHARS:
            return ""
        if self.kind == "docs":
            return self._docs(line)
        if self.kind == "python":
            return self._python(line)
        if self.kind == "slash":
            return self._slash(line)
        return _code_prose(line, "#" if self.kind == "hash" else "--")

    def _docs(self, line: str) -> str:
        opening = _FENCE.match(line)
        if self.fence is not None:
            if line.strip().startswith(self.fence) and set(line.strip()) == {self.fence[0]}:
                self.fence = None
            return ""
        if opening:
            self.fence = opening.group(1)
            return ""
        return _LINK.sub(r"\1 (\2)", line.strip())

    def _python(self, line: str) -> str:
        if self.docstring is not None:
            end = line.find(self.docstring)
            if end < 0:
                return line.strip()
            self.docstring = None
            return _joined(line[:end].strip(), self._python(line[end + 3:]))
        opening = _TRIPLE.search(line)
        if opening and not _in_string_or_comment(line, opening.start()):
            quotes = opening.group()
            end = line.find(quotes, opening.end())
            before = _code_prose(line[:opening.start()], "#")
            if end < 0:
                self.docstring = quotes
                return _joined(before, line[opening.end():].strip())
            return _joined(before, line[opening.end():end].strip(), self._python(line[end + 3:]))
        return _code_prose(line, "#")

    def _slash(self, line: str) -> str:
        parts: list[str] = []
        rest = line
        while rest:
            if self.block:
                end = rest.find("*/")
                parts.append(rest[:end if end >= 0 else len(rest)].strip().lstrip("*").strip())
                if end < 0:
                    break
                self.block, rest = False, rest[end + 2:]
                continue
            start = _outside_strings(rest, "/*")
            line_comment = _outside_strings(rest, "//")
            if line_comment >= 0 and (start < 0 or line_comment < start):
                parts += [_strings(rest[:line_comment]), rest[line_comment + 2:].strip().lstrip("/").strip()]
                break
            if start < 0:
                parts.append(_strings(rest))
                break
            parts.append(_strings(rest[:start]))
            self.block, rest = True, rest[start + 2:]
        return _joined(*parts)


def _joined(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def _strings(code: str) -> str:
    """The contents of the string literals of a line of code, joined: "fix in #12" of a skip reason."""
    return _joined(*(match.group(1)[1:-1].strip() for match in _STRING.finditer(code)))


def _code_prose(code: str, marker: str) -> str:
    """The string literals of a line of code and its comment (after MARKER outside any string)."""
    found = _outside_strings(code, marker)
    if found < 0:
        return _strings(code)
    return _joined(_strings(code[:found]), code[found + len(marker):].strip().lstrip(marker[0]).strip())


def _outside_strings(code: str, marker: str) -> int:
    """Where MARKER first occurs in CODE outside string literals; -1 when it does not."""
    spans = [match.span() for match in _STRING.finditer(code)]
    start = code.find(marker)
    while start >= 0:
        if not any(low <= start < high for low, high in spans):
            return start
        start = code.find(marker, start + 1)
    return -1


def _in_string_or_comment(code: str, position: int) -> bool:
    comment = _outside_strings(code, "#")
    return 0 <= comment < position or any(low < position < high for low, high in
                                          (m.span() for m in _STRING.finditer(code)))
