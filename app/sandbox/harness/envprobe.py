"""Environment groups: which variables the revision reads, so that suites differing in them import apart.

Runs INSIDE the sandbox: imports nothing of `app`, only the standard library and sibling harness modules.
A module may read a variable at import time (miles reads an experimental-feature switch): suites whose jobs
set it differently must not share one import. A probe child imports the entry and runs one suite while
every read of os.environ is noted; suites are then grouped by the values of the variables read.
"""

from __future__ import annotations

import _collections_abc
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import common, leader, suiterun
else:
    import common
    import leader
    import suiterun

GRACE_SECONDS = 10.0
_HARNESS_DIR = os.path.dirname(os.path.abspath(__file__)) + "/"
# Where os.getenv, Mapping.get and MutableMapping.clear live (frozen modules: "<frozen os>"): the frame
# that asked is further out.
_PLUMBING = frozenset({os.getenv.__code__.co_filename, _collections_abc.Mapping.get.__code__.co_filename})


def plan_groups(suites: list[dict[str, Any]], open_revision: leader.OpenRevision, *,
                suite_seconds: float) -> list[leader.Group]:
    """Suites grouped so that each group may share one import of the revision."""
    if len({_whole_environment(s) for s in suites}) <= 1:
        return [leader.Group(suites)] if suites else []
    found: list[dict[str, Any]] = []
    common.run_forked([suites[0]], lambda suite: _probe(suite, open_revision), workers=1,
                      timeout=2 * suite_seconds + GRACE_SECONDS,
                      on_result=lambda suite, result: found.append(result),
                      on_failure=lambda suite, reason: None)
    # Without the probe's answer (its suite crashed it, the entry does not import) every distinct
    # environment gets its own import: slower, never wrong.
    key: Callable[[dict[str, Any]], Any] = _whole_environment
    if found and not found[0]["everything"]:
        names = found[0]["reads"]
        key = lambda suite: tuple((suite.get("env") or {}).get(n) for n in names)  # noqa: E731
    groups: dict[Any, list[dict[str, Any]]] = {}
    for suite in suites:
        groups.setdefault(key(suite), []).append(suite)
    return [leader.Group(members) for members in groups.values()]


def _whole_environment(suite: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((suite.get("env") or {}).items()))


def _probe(suite: dict[str, Any], open_revision: leader.OpenRevision) -> dict[str, Any]:
    """In the probe child: import and run one suite with every environment read noted."""
    watcher = EnvironmentWatcher()
    watcher.start()
    suiterun.run_suite(open_revision(suite), suite)
    return {"reads": sorted(watcher.reads), "everything": watcher.everything}


class EnvironmentWatcher:
    """Notes the variables code outside the harness reads through os.environ (and os.getenv)."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.everything = False  # code iterated or copied the whole environment

    def start(self) -> None:
        environ_class = type(os.environ)
        real_getitem, real_iter = environ_class.__getitem__, environ_class.__iter__
        watcher = self

        def getitem(environ: Any, key: str) -> Any:
            if not _harness_asks():
                watcher.reads.add(key)
            return real_getitem(environ, key)

        def iterate(environ: Any) -> Iterator[str]:
            if not _harness_asks():
                watcher.everything = True
            return real_iter(environ)

        environ_class.__getitem__ = getitem  # type: ignore[method-assign]
        environ_class.__iter__ = iterate  # type: ignore[method-assign]


def _harness_asks() -> bool:
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in _PLUMBING:
        frame = frame.f_back  # type: ignore[assignment]
    return frame is None or frame.f_code.co_filename.startswith(_HARNESS_DIR)
