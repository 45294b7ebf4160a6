"""Parsing `/triage …` comment commands (app/triage/command_parser.py): what counts, what is refused and
why."""

from __future__ import annotations

import pytest

from app.triage.command_parser import MAX_COMMANDS, Command, Invalid, parse_commands, parse_line


@pytest.mark.parametrize(("line", "expected"), [
    ("/triage rerun", Command("rerun")),
    ("/TRIAGE Rerun please", Command("rerun")),
    ("/triage help", Command("help")),
    ("/triage", Command("help")),
    ("/triage ack the GPU suites do not pass --colocate", Command("ack", reason="the GPU suites do not pass "
                                                                              "--colocate")),
    ("/triage ack   spaced    out  ", Command("ack", reason="spaced out")),
    ("/triage close-window #2204 superseded by #2223", Command("close-window", reason="superseded by #2223",
                                                               window=2204)),
    ("/triage close-window 12 done elsewhere", Command("close-window", reason="done elsewhere", window=12)),
    ("/triage close-window all the flag is gone", Command("close-window", reason="the flag is gone")),
    ("/triage close-window ALL gone", Command("close-window", reason="gone")),
])
def test_commands(line: str, expected: Command) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(("line", "problem"), [
    ("/triage ack", "a reason is required: `/triage ack <reason>`"),
    ("/triage close-window #12", "a reason is required: `/triage close-window <#N|all> <reason>`"),
    ("/triage close-window", "say which window: `/triage close-window <#N|all> <reason>`"),
    ("/triage close-window everything now", "say which window: `/triage close-window <#N|all> <reason>`"),
    ("/triage deploy", "unknown command `deploy`"),
])
def test_invalid_commands_say_what_is_wrong(line: str, problem: str) -> None:
    assert parse_line(line) == Invalid(line, problem)


def test_only_command_lines_outside_code_and_quotes_count() -> None:
    body = "\n".join([
        "Thanks! Running it again.",
        "/triage rerun",
        "> /triage ack quoted from someone else",
        "```",
        "/triage ack inside a code block",
        "```",
        "Mention /triage ack in a sentence does not count",
        "  /triage ack indented a little is fine",
    ])
    assert parse_commands(body) == [Command("rerun"), Command("ack", reason="indented a little is fine")]


def test_prose_that_only_starts_alike_is_no_command() -> None:
    assert parse_commands("/triaged this yesterday\n/triage-bot is great") == []


def test_at_most_a_few_commands_per_comment() -> None:
    assert len(parse_commands("/triage rerun\n" * 50)) == MAX_COMMANDS


def test_a_long_reason_is_cut() -> None:
    command = parse_line("/triage ack " + "why " * 400)
    assert isinstance(command, Command) and len(command.reason) == 500 and command.reason.endswith("…")
