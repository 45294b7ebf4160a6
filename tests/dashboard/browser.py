"""What the browser tests share: the dashboard served by uvicorn on a loopback port, and Debian's chromium
driven by Playwright.

Chromium or Playwright missing: a skip with the reason, except under CI=true, where it is a failure.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

CHROMIUM = Path(os.environ.get("PRTRIAGE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser test must run)", pytrace=False)
    pytest.skip(reason)


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """APP served by uvicorn on 127.0.0.1 and a port the kernel picked, in a thread: its base URL. The
    app's services are closed after the server stops."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()
        app.state.services.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    """A chromium for one test."""
    with chromium() as launched:
        yield launched


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched chromium (Playwright's Browser), closed afterwards."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the playwright package is not installed (pip install playwright)")
    if not CHROMIUM.exists():
        unavailable(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
