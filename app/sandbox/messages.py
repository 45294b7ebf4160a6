"""Reading a harness run from the host: progress messages, and why a run stopped short."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from app.sandbox.runner import SandboxRun

log = logging.getLogger(__name__)

OnProgress = Callable[[int, int, str], None]
REASON_TAIL = 800


def progress_relay(on_progress: OnProgress | None) -> Callable[[dict[str, Any]], None] | None:
    """An `on_message` callback that hands the harness's progress messages to `on_progress`."""
    if on_progress is None:
        return None

    def relay(message: dict[str, Any]) -> None:
        if message.get("type") == "progress":
            try:
                on_progress(int(message["done"]), int(message["total"]), str(message.get("what", "")))
            except (KeyError, TypeError, ValueError, ArithmeticError):  # e.g. int(1e400)
                log.debug("malformed progress message: %r", message)

    return relay


def stopped_reason(run: SandboxRun, *, step: str, unit: str) -> str:
    """Why the harness never reported a `unit`: its fatal message, how the `step` run ended, its stderr."""
    parts = [f"the harness gave up: {str(m.get('reason'))[:REASON_TAIL]}"
             for m in run.messages if m.get("type") == "fatal"][:1]
    if run.ended:
        parts.append(f"the {step} run ended: {run.ended}")
    if run.stderr_tail:
        parts.append(f"stderr: {run.stderr_tail.strip()[-REASON_TAIL:]}")
    return "; ".join(parts) or f"the harness never reported this {unit} (exit status {run.returncode})"
