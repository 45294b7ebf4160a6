"""Keeps credentials out of the libraries' logs, at any level a deployment may turn on.

PyGithub logs response bodies at DEBUG (an installation token is one), httpcore logs response headers at
DEBUG (a tarball redirect's Location carries a signed download token), httpx logs request URLs at INFO (the
same download URL). Filters sit on the very loggers that emit, since a logger's filters do not see its
children's records.
"""

from __future__ import annotations

import logging

import httpx

DEBUG_ONLY_LEAKS = ("github.Requester", "httpcore.connection", "httpcore.http11", "httpcore.http2",
                    "httpcore.proxy", "httpcore.socks")


class DropDebug(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


class RedactQuery(logging.Filter):
    """URLs in a record's arguments lose their query string."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(arg.copy_with(query=None) if isinstance(arg, httpx.URL) and arg.query else arg
                                for arg in record.args)
        return True


def install() -> None:
    """Idempotent: each filter is added once per logger."""
    for name in DEBUG_ONLY_LEAKS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, DropDebug) for existing in logger.filters):
            logger.addFilter(DropDebug())
    httpx_logger = logging.getLogger("httpx")
    if not any(isinstance(existing, RedactQuery) for existing in httpx_logger.filters):
        httpx_logger.addFilter(RedactQuery())

