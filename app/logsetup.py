"""Logging of every prtriage process: the root handler on stderr, and the libraries that log each task,
request or migration step kept at WARNING unless DEBUG is asked for. Shared by the command line and the
service's processes, so neither imports the other for it."""

from __future__ import annotations

import logging
import sys

CHATTY = ("huey", "httpx", "alembic")  # log every task, request or migration step at INFO


def configure_logging(level: int) -> None:
    """Log records of LEVEL and above to stderr, one line each."""
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    quiet_libraries(level)


def quiet_libraries(level: int) -> None:
    for name in CHATTY:
        logging.getLogger(name).setLevel(level if level <= logging.DEBUG else max(level, logging.WARNING))
