"""Slow clients: uvicorn closes idle keep-alive connections but waits for a request's headers forever, so
200 connections sending a byte a second held 200 sockets for good. This protocol closes a connection whose
request headers have not all arrived HEADER_SECONDS after it opened, or after the request's first byte."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)


class HeaderDeadlineProtocol(HttpToolsProtocol):
    header_seconds: ClassVar[float] = 10.0  # GitHub sends its headers at once; it waits 10 s for the answer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.header_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _too_slow(self) -> None:
        self._header_deadline = None
        log.info("closed a connection whose request headers took over %.0f s", self.header_seconds)
        self.transport.close()
