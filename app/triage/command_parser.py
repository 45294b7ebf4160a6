"""The `/triage …` commands of a PR comment, parsed (pure): rerun, ack <reason>, close-window <#N|all>
<reason>, help.

A command is what the rendered comment shows as one: a line that starts with `/triage` in a top-level
paragraph of the comment parsed as CommonMark (GitHub's comments are GitHub Flavored Markdown, a superset:
tables and strikethrough are enabled too). Nothing in a quote (a lazy line continuing one included), a list,
a code block or span, HTML (a comment is invisible on the page, `<pre>` is code) or emphasis counts: a reply
that quotes someone's command must not run it again, and a command nobody can see must not run at all.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

Verb = Literal["rerun", "ack", "close-window", "help"]
PREFIX = "/triage"
MAX_COMMANDS = 5  # per comment: a pasted wall of commands must not become a wall of work
REASON_CHARS = 500

HELP = f"""Commands for this PR, one per line in a comment:

- `{PREFIX} rerun`: triage the PR's head again.
- `{PREFIX} ack <reason>`: accept the blocking findings of the latest triage, or let through a triage that
  could not conclude; the check turns to success, naming you and the reason (needs write permission).
- `{PREFIX} close-window <#N|all> <reason>`: close this PR's risk window awaiting #N (or window N), or all of
  them, with the reason (needs write permission).
- `{PREFIX} help`: this list."""

_COMMAND = re.compile(rf"\s{{0,3}}{re.escape(PREFIX)}(?:\s+(?P<rest>.*))?$", re.I)
_CANDIDATE = re.compile(rf"^[ \t]*{re.escape(PREFIX)}(?:\s|$)", re.I | re.M)  # every command line is one
_TARGET = re.compile(r"(?:#?(?P<number>\d{1,10})|(?P<all>all))(?=\s|$)", re.I)


@dataclass(frozen=True)
class Command:
    verb: Verb
    reason: str = ""
    window: int | None = None  # close-window: #N; None for all


@dataclass(frozen=True)
class Invalid:
    """A `/triage` line that is not a command: the reply says what is wrong."""

    line: str
    problem: str


def may_hold_commands(body: str) -> bool:
    """Whether some line starts like a command: the intake's cheap test. Parsing a hostile 64 KB comment
    takes up to a second, so the worker parses, not the process that answers GitHub."""
    return _CANDIDATE.search(body) is not None


def parse_commands(body: str) -> list[Command | Invalid]:
    """The commands of a comment, in order (at most MAX_COMMANDS)."""
    found: list[Command | Invalid] = []
    for line in _command_lines(body):
        found.append(parse_line(line))
        if len(found) == MAX_COMMANDS:
            break
    return found


def parse_line(line: str) -> Command | Invalid:
    """One `/triage …` line (the prefix included)."""
    match = _COMMAND.match(line)
    if match is None:
        return Invalid(line, f"not a `{PREFIX}` command")
    # any whitespace parts the verb from the rest, as the page shows a tab: `ack<TAB>reason` is an ack
    words = (match["rest"] or "").split() or ["help"]
    verb, rest = words[0].lower(), " ".join(words[1:])
    if verb == "help":
        return Command("help")
    if verb == "rerun":
        return Command("rerun")
    if verb == "ack":
        return Command("ack", reason=_reason(rest)) if rest else Invalid(line, _needs_reason("ack <reason>"))
    if verb == "close-window":
        return _close_window(line, rest)
    return Invalid(line, f"unknown command `{verb[:40]}`")


def _close_window(line: str, rest: str) -> Command | Invalid:
    target = _TARGET.match(rest)
    if target is None:
        return Invalid(line, f"say which window: `{PREFIX} close-window <#N|all> <reason>`")
    reason = rest[target.end():].strip()
    if not reason:
        return Invalid(line, _needs_reason("close-window <#N|all> <reason>"))
    window = None if target["all"] else int(target["number"])
    return Command("close-window", reason=_reason(reason), window=window)


def _needs_reason(usage: str) -> str:
    return f"a reason is required: `{PREFIX} {usage}`"


def _reason(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= REASON_CHARS else flat[:REASON_CHARS - 1] + "…"


@cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _command_lines(body: str) -> Iterator[str]:
    tokens = _markdown().parse(body)
    for opening, inline in itertools.pairwise(tokens):
        if opening.type == "paragraph_open" and opening.level == 0 and inline.type == "inline":
            for line in _rendered_lines(inline.children or []):
                if _COMMAND.match(line):
                    yield line.strip()


def _rendered_lines(children: Sequence[Token]) -> Iterator[str]:
    """The paragraph's lines that start with plain text (not emphasis, a link, code or HTML), as the page
    shows them: code spans keep their backticks, and HTML, which the page does not show, ends the line."""
    line: list[Token] = []
    for child in [*children, None]:
        if child is not None and child.type not in ("softbreak", "hardbreak"):
            # markdown-it puts an empty text token before `**`: the page shows nothing, the line starts after
            if child.type != "text" or child.content or line:
                line.append(child)
            continue
        if line and line[0].type == "text":
            shown = itertools.takewhile(lambda token: token.type != "html_inline", line)
            yield "".join(f"`{token.content}`" if token.type == "code_inline" else token.content
                          for token in shown)
        line = []
