"""Group commit for the intake: the deliveries that arrive together are stored and queued by one thread in
one transaction, so the database's single writer (SQLite) costs one commit per group, not one per
delivery, and no request waits in SQLite's busy handler. A delivery is answered once its group committed.

The store's `record_new_deliveries` (app/store/deliveries.py) is one INSERT … ON CONFLICT (guid) DO NOTHING
RETURNING guid for the whole group: the unique constraint still decides which delivery is new, also against
other processes.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

MAX_GROUP = 256


@dataclass
class _Waiting:
    item: Any
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


_STOP = object()


class GroupCommit:
    """One writer thread running WRITE on groups of the items submitted meanwhile (at most MAX_GROUP);
    WRITE returns one answer per item, in order."""

    def __init__(self, write: Callable[[Sequence[Any]], list[Any]], *, max_group: int = MAX_GROUP) -> None:
        self._write = write
        self._max_group = max_group
        self._inbox: queue.SimpleQueue[_Waiting | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()
        self.last_submitted = float("-inf")  # time.monotonic() of the latest submit

    def start(self) -> None:
        with self._guard:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="prtriage-intake-writer", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Answer what was submitted, then end the thread."""
        with self._guard:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._inbox.put(_STOP)
            thread.join()

    def busy(self, quiet: float = 0.05) -> bool:
        """Whether something was submitted within the last QUIET seconds."""
        return time.monotonic() - self.last_submitted < quiet

    async def submit(self, item: Any) -> Any:
        self.last_submitted = time.monotonic()
        self.start()
        loop = asyncio.get_running_loop()
        waiting = _Waiting(item, loop, loop.create_future())
        self._inbox.put(waiting)
        return await waiting.future

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._inbox.get()
            group: list[_Waiting] = []
            next_one: object = first
            while True:
                if next_one is _STOP:
                    stopping = True
                    break
                assert isinstance(next_one, _Waiting)
                group.append(next_one)
                if len(group) >= self._max_group:
                    break
                try:
                    next_one = self._inbox.get_nowait()
                except queue.Empty:
                    break
            if group:
                self._answer(group)

    def _answer(self, group: list[_Waiting]) -> None:
        try:
            answers = self._write([waiting.item for waiting in group])
        except BaseException as exc:  # the write decides its own answers; this is a bug: fail the group
            log.exception("intake writer: a group failed")
            for waiting in group:
                waiting.loop.call_soon_threadsafe(_set_exception, waiting.future, exc)
            return
        for waiting, answer in zip(group, answers, strict=True):
            waiting.loop.call_soon_threadsafe(_set_result, waiting.future, answer)


def _set_result(future: asyncio.Future[Any], answer: Any) -> None:
    if not future.done():
        future.set_result(answer)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)

