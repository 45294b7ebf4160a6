"""The host's reading of what a sandbox prints: hostile lines end the run with a reason, not an exception."""

from __future__ import annotations

import json

from app.sandbox.messages import progress_relay, stopped_reason
from app.sandbox.runner import SandboxRun
from app.sandbox.supervise import MESSAGE_MAX_BYTES, _Messages

MIB = 1024 * 1024


def nested(depth: int) -> bytes:
    return b'{"type": "suite", "v": ' + b"[" * depth + b"]" * depth + b"}\n"


def test_a_deeply_nested_line_is_a_reason_not_a_recursion_error() -> None:
    messages = _Messages(None, 16 * MIB)
    assert messages.feed(nested(100_000)) == "the sandboxed code wrote a message nested deeper than 64 levels"
    assert messages.messages == []


def test_nesting_the_parser_accepts_is_still_bounded() -> None:
    assert _Messages(None, 16 * MIB).feed(nested(64)) is not None
    messages = _Messages(None, 16 * MIB)
    assert messages.feed(nested(63)) is None  # 64 levels with the message itself
    assert len(messages.messages) == 1


def test_nothing_after_a_malformed_line_is_read() -> None:
    messages = _Messages(None, 16 * MIB)
    assert messages.feed(nested(100) + b'{"type": "after"}\n') is not None
    assert messages.feed(b'{"type": "later"}\n') is not None
    assert messages.finish() is not None
    assert messages.messages == []


def test_a_line_without_end_is_refused_once_it_passes_the_bound() -> None:
    messages = _Messages(None, 64 * MIB)
    reason = None
    fed = 0
    while reason is None and fed < 2 * MESSAGE_MAX_BYTES:
        reason = messages.feed(b"x" * 65536)
        fed += 65536
    assert reason == "the sandboxed code wrote a message line longer than 4 MiB"
    assert fed <= MESSAGE_MAX_BYTES + 65536


def test_a_last_line_without_newline_is_checked_too() -> None:
    messages = _Messages(None, 16 * MIB)
    assert messages.feed(nested(100_000).rstrip(b"\n")) is None
    assert messages.finish() == "the sandboxed code wrote a message nested deeper than 64 levels"


def test_noise_is_still_dropped_quietly() -> None:
    messages = _Messages(None, 16 * MIB)
    assert messages.feed(b"not json\n[1, 2]\n" + json.dumps({"type": "ok"}).encode() + b"\n") is None
    assert messages.messages == [{"type": "ok"}]


def test_progress_with_absurd_numbers_is_ignored() -> None:
    seen: list[tuple[int, int, str]] = []
    relay = progress_relay(lambda done, total, what: seen.append((done, total, what)))
    assert relay is not None
    relay(json.loads('{"type": "progress", "done": 1e400, "total": 2}'))
    relay({"type": "progress", "done": "1" * 5000, "total": 2})
    relay({"type": "progress", "done": 1, "total": 2, "what": "x"})
    assert seen == [(1, 2, "x")]


def test_a_fatal_reason_is_cut_to_a_readable_length() -> None:
    run = SandboxRun(messages=[{"type": "fatal", "reason": "x" * 100_000}], returncode=1, ended=None,
                     stderr_tail="", sandboxed=True)
    assert len(stopped_reason(run, step="validation", unit="suite")) < 1000
