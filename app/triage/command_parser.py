"""The `/triage …` commands of a PR comment, parsed (pure): rerun, ack <reason>, close-window <#N|all>
<reason>, help. Only lines that start with `/triage` count, outside code blocks and quoted lines (a reply
that quotes someone's command must not run it again)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

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

_FENCE = re.compile(r"\s{0,3}(`{3,}|~{3,})")
_COMMAND = re.compile(rf"\s{{0,3}}{re.escape(PREFIX)}(?:\s+(?P<rest>.*))?$", re.I)
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
    verb, _, rest = (match["rest"] or "help").strip().partition(" ")
    verb, rest = verb.lower(), rest.strip()
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


def _command_lines(body: str) -> Iterator[str]:
    fence: str | None = None
    for line in body.replace("\r\n", "\n").split("\n"):
        opening = _FENCE.match(line)
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
        elif opening:
            fence = opening.group(1)
        elif _COMMAND.match(line):
            yield line.strip()
