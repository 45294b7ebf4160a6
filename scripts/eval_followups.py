"""Evaluation of the follow-up classifier on references labelled by hand in real repositories.

    .venv/bin/python scripts/eval_followups.py [--split dev|test|all] [--mirror /work/.mirror] \
        [--labels benchmarks/followups/labels.jsonl] [--no-misses]

Each label points at one reference (repository, commit, path or null for the commit's message, line,
target) and says what it means (`benchmarks/followups/GUIDE.md`). The text is read from the fetched
repositories (MIRROR/owner+name/repo, a bare git directory or a clone): a commit message whole, as the
service reads one (the `(#N)` at the end of a squash-merged title is the PR's own number and is passed as
such); of a file line, the prose it belongs to (its comment block, its string, its docstring or docs
paragraph). The project's own finder and classifier read that text; the label's reference is the mention
of its target written on its line (the strongest role if the line writes it twice, as the service keeps
one per target). Prints precision and recall per kind, the confusion matrix and the
misses. Not run by CI: it needs the fetched repositories.

--split: labels are split in two by a hash of their pointer, so the split never changes when labels are
added: `dev` is what the classifier was tuned on, `test` was only ever measured.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from app.analysis.followups.followups import PRIORITY, ReferenceKind, classify
from app.analysis.followups.references import Mention, Text, find_mentions
from app.analysis.followups.series import title_position

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "benchmarks" / "followups" / "labels.jsonl"
MIRROR = Path("/work/.mirror")
KINDS: tuple[ReferenceKind, ...] = ("prerequisite", "followup", "revert", "closes", "mention")
NOT_FOUND = "not found"
DOCS = (".md", ".rst", ".txt", ".mdx")
_OWN = re.compile(r"\(#(\d+)\)\s*$")
_COMMENT = re.compile(r"(?:^|(?<=\s))(?:#+|//|--|<!--)(?=\s|$)|^\s*(?:\*|/\*\*?)(?=\s|$)")
_STRING = re.compile(r"[rfbu]{0,2}(?:\"\"\"(.*?)(?:\"\"\"|$)|'''(.*?)(?:'''|$)|\"((?:[^\"\\]|\\.)*)\""
                     r"|'((?:[^'\\]|\\.)*)')", re.I)
_QUOTE_MARK = re.compile(r"^\s{0,3}>\s?")
Split = Literal["dev", "test", "all"]


class MissingRepository(Exception):
    """A labelled repository is not fetched where the evaluation looks for it."""


@dataclass(frozen=True)
class Label:
    repository: str
    commit: str
    path: str | None
    line: int
    target: str  # owner/repo#N, or a reverted commit's sha
    kind: ReferenceKind

    @property
    def key(self) -> str:
        return f"{self.repository}|{self.commit}|{self.path or ''}|{self.line}|{self.target}"

    @property
    def split(self) -> Split:
        return "dev" if int(hashlib.sha256(self.key.encode()).hexdigest(), 16) % 2 == 0 else "test"


@dataclass(frozen=True)
class Outcome:
    label: Label
    predicted: str  # a ReferenceKind or NOT_FOUND
    sentence: str


def load_labels(path: Path) -> list[Label]:
    return [Label(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def git_dir(mirror: Path, repository: str) -> Path:
    path = mirror / repository.replace("/", "+") / "repo"
    if not (path / "HEAD").exists() and not (path / ".git").exists():
        raise MissingRepository(f"{repository} is not fetched: no git directory at {path} (clone "
                                f"https://github.com/{repository} there, or give --mirror)")
    return path


@cache
def git_show(repo: Path, what: str) -> str:
    """A commit's message, or a file as `commit:path`."""
    args = ["show", what] if ":" in what else ["show", "--no-patch", "--format=%B", what]
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, errors="replace",
                          check=True).stdout


def commit_text(repo: Path, label: Label) -> tuple[str, int, str]:
    """(the whole message, the PR's own number or 0, the labelled line)."""
    message = git_show(repo, label.commit).rstrip("\n")
    own = _OWN.search(message.split("\n", 1)[0])
    lines = message.split("\n")
    return message, int(own[1]) if own else 0, lines[label.line - 1] if label.line <= len(lines) else ""


def file_text(repo: Path, label: Label) -> tuple[str, str]:
    """(the prose the labelled line belongs to, the line's own prose)."""
    assert label.path is not None
    lines = git_show(repo, f"{label.commit}:{label.path}").split("\n")
    index = label.line - 1
    if label.path.lower().endswith(DOCS):
        block = _around(lines, index, lambda line: bool(line.strip()))
        return "\n".join(_QUOTE_MARK.sub("", line) for line in block), _QUOTE_MARK.sub("", lines[index])
    line = lines[index]
    comment = _COMMENT.search(line)
    if comment and not line[:comment.start()].strip():  # a comment line: its whole comment block
        block = _around(lines, index, _comment_line)
        return "\n".join(_comment_of(part) for part in block), _comment_of(line)
    if comment:  # code with a trailing comment, maybe strings too
        return _strings(line[:comment.start()]) + "\n\n" + _comment_of(line), line
    if _STRING.search(line):  # strings, maybe implicitly joined with those of the next lines
        block = _around(lines, index, lambda part: part.strip().startswith(("\"", "'", "f\"", "f'")))
        return "".join(_strings(part) for part in block) or _strings(line), _strings(line)
    block = _around(lines, index, lambda part: bool(part.strip()) and "\"\"\"" not in part)  # a docstring
    return "\n".join(block), line


def _around(lines: list[str], index: int, belongs: Callable[[str], bool]) -> list[str]:
    """The run of lines around INDEX that BELONGS accepts, the line itself always."""
    start, end = index, index
    while start > 0 and belongs(lines[start - 1]):
        start -= 1
    while end + 1 < len(lines) and belongs(lines[end + 1]):
        end += 1
    return lines[start:end + 1]


def _comment_line(line: str) -> bool:
    comment = _COMMENT.search(line)
    return comment is not None and not line[:comment.start()].strip() and bool(_comment_of(line))


def _comment_of(line: str) -> str:
    comment = _COMMENT.search(line)
    return line[comment.end():].strip() if comment else line.strip()


def _strings(code: str) -> str:
    return " ".join(next(group for group in match.groups() if group is not None)
                    for match in _STRING.finditer(code))


def _matches(mention: Mention, label: Label) -> bool:
    if mention.sha is not None:
        return label.target.lower().startswith(mention.sha) or mention.sha.startswith(label.target.lower())
    return mention.target.lower() == label.target.lower()


def _overlap(sentence: str, line: str) -> int:
    return len(set(sentence.lower().split()) & set(line.lower().split()))


def evaluate(label: Label, mirror: Path) -> Outcome:
    owner, name = label.repository.split("/")
    repo = git_dir(mirror, label.repository)
    if label.path is None:
        text, own, line = commit_text(repo, label)
        texts = [Text("commit", text)]
        series = title_position(text.split("\n", 1)[0])  # a squash-merged commit's title is its PR's
    else:
        text, line = file_text(repo, label)
        own, texts, series = 0, [Text("body", text)], None
    mentions = find_mentions(texts, owner=owner, repo=name, number=own)
    candidates = [m for m in mentions if _matches(m, label)]
    if not candidates:
        return Outcome(label, NOT_FOUND, " ".join(line.split()))
    best = max(_overlap(m.sentence, line) for m in candidates)
    kinds = [(classify(m, _same_sentence(m, mentions), series=series), m) for m in candidates
             if _overlap(m.sentence, line) == best]
    kind, mention = min(kinds, key=lambda pair: PRIORITY[pair[0]])  # as the service keeps one per target
    return Outcome(label, kind, mention.sentence)


def _same_sentence(mention: Mention, mentions: list[Mention]) -> list[Mention]:
    return sorted((m for m in mentions if (m.source, m.sentence) == (mention.source, mention.sentence)),
                  key=lambda m: m.start)


def report(outcomes: list[Outcome], *, misses: bool) -> str:
    pairs = Counter((o.label.kind, o.predicted) for o in outcomes)
    columns = [*KINDS, NOT_FOUND]
    out = [f"{len(outcomes)} labelled references", "",
           f"{'kind':<13}{'precision':>16}{'recall':>16}{'support':>9}"]
    for kind in KINDS:
        hit = pairs[kind, kind]
        said = sum(pairs[gold, kind] for gold in KINDS)
        gold = sum(pairs[kind, predicted] for predicted in columns)
        out.append(f"{kind:<13}{_ratio(hit, said):>16}{_ratio(hit, gold):>16}{gold:>9}")
    out += ["", "confusion (rows: label, columns: classifier)",
            f"{'':<13}" + "".join(f"{c[:9]:>10}" for c in columns)]
    out += [f"{gold:<13}" + "".join(f"{pairs[gold, c]:>10}" for c in columns) for gold in KINDS]
    wrong = [o for o in outcomes if o.predicted != o.label.kind]
    if misses and wrong:
        out += ["", f"misses ({len(wrong)})"]
        for o in sorted(wrong, key=lambda o: (o.label.kind, o.predicted)):
            where = f"{o.label.path}:{o.label.line}" if o.label.path else f"message line {o.label.line}"
            out.append(f"- {o.label.kind} -> {o.predicted}: {o.label.repository}@{o.label.commit[:12]} "
                       f"{where} {o.label.target}\n    {o.sentence[:300]}")
    return "\n".join(out)


def _ratio(hit: int, total: int) -> str:
    return f"{hit}/{total} {100 * hit / total:5.1f}%" if total else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["dev", "test", "all"], default="all")
    parser.add_argument("--mirror", type=Path, default=MIRROR)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--no-misses", dest="misses", action="store_false")
    args = parser.parse_args(argv)
    labels = [label for label in load_labels(args.labels) if args.split in ("all", label.split)]
    try:
        outcomes = [evaluate(label, args.mirror) for label in labels]
    except MissingRepository as error:
        print(f"eval_followups: {error}", file=sys.stderr)
        return 2
    print(f"split: {args.split}, labels: {args.labels}")
    print(report(outcomes, misses=args.misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
