"""Environment reads: which variables went into the state a leader's forked children inherit.

Runs INSIDE the sandbox: imports nothing of `app`, only the standard library.
A module may read a variable at import time (miles reads an experimental-feature switch), and a warm-up run
may cache what it read: suites whose jobs set such a variable differently must not inherit that state. A
leader therefore notes every read of os.environ (and os.getenv) while it builds the state (the import, the
warm-up), and serves only the suites that agree with its own suite on every variable read; it declines the
others, which get a state of their own. Reads in a forked child die with the child and need no care: a
variable read at call time (the twin's switch) costs another warm-up, not another import.
"""

from __future__ import annotations

import _collections_abc
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

_HARNESS_DIR = os.path.dirname(os.path.abspath(__file__)) + "/"
# Where os.getenv, Mapping.get and MutableMapping.clear live (frozen modules: "<frozen os>"): the frame
# that asked is further out.
# A watcher's own frames are plumbing too: a watcher nested in another (`memo`) calls the outer one's hook.
_PLUMBING = frozenset({os.getenv.__code__.co_filename, _collections_abc.Mapping.get.__code__.co_filename,
                       sys._getframe().f_code.co_filename})


class EnvironmentWatcher:
    """Notes the variables code outside the harness reads through os.environ (and os.getenv)."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.everything = False  # code iterated or copied the whole environment

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Reads are noted inside the block only: the children forked afterwards run unwatched."""
        environ_class = type(os.environ)
        real_getitem, real_iter = environ_class.__getitem__, environ_class.__iter__
        watcher = self

        def getitem(environ: Any, key: Any) -> Any:
            if isinstance(key, str | bytes) and not _harness_asks():
                watcher.reads.add(os.fsdecode(key))  # os.environb shares the class, with bytes keys
            return real_getitem(environ, key)

        def iterate(environ: Any) -> Iterator[Any]:
            if not _harness_asks():
                watcher.everything = True
            return real_iter(environ)

        environ_class.__getitem__ = getitem  # type: ignore[method-assign]
        environ_class.__iter__ = iterate  # type: ignore[method-assign]
        try:
            yield
        finally:
            environ_class.__getitem__ = real_getitem  # type: ignore[method-assign]
            environ_class.__iter__ = real_iter  # type: ignore[method-assign]

    def split(self, suites: list[dict[str, Any]],
              own: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(the suites agreeing with `own` on every variable read, `own` among them; the others)."""
        key = self.key
        mine = key(own)
        agree: list[dict[str, Any]] = []
        other: list[dict[str, Any]] = []
        for suite in suites:
            (agree if suite is own or key(suite) == mine else other).append(suite)
        return agree, other

    @property
    def key(self) -> Callable[[dict[str, Any]], Any]:
        if self.everything:
            return whole_environment
        names = sorted(self.reads)
        return lambda suite: tuple((suite.get("env") or {}).get(n) for n in names)


def whole_environment(suite: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((suite.get("env") or {}).items()))


def _harness_asks() -> bool:
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in _PLUMBING:
        frame = frame.f_back  # type: ignore[assignment]
    return frame is None or frame.f_code.co_filename.startswith(_HARNESS_DIR)
