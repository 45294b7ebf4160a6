"""Source lookups remembered for the run: `inspect.getsourcelines` of a class, function or module is read
from its file once per process tree.

Runs INSIDE the sandbox: the standard library only. The tree is read-only there, so a definition's source
cannot change during the run. Validation code that reads its own source at every call pays for it per suite:
Megatron-LM's argument groups take each option's help from its config dataclass's field docstrings
(`inspect.getsource` of the class, which in Python 3.11 parses the whole module to find it, then tokenizes
the class's block), some 28 classes per `parse_args`, twice per suite: most of a suite's time. Found once in
a warm leader, a forked child inherits the answer.
"""

from __future__ import annotations

import inspect
from typing import Any

_remembered: dict[int, tuple[Any, list[str], int]] = {}  # id -> (the object, kept alive; lines; first line)


def _cacheable(obj: Any) -> bool:
    """Definitions only: a frame or traceback is new every time and keeping it would keep its locals."""
    return inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismethod(obj) \
        or inspect.ismodule(obj) or inspect.iscode(obj)


def install() -> None:
    real = getattr(inspect.getsourcelines, "__wrapped__", inspect.getsourcelines)

    def getsourcelines(obj: Any) -> tuple[list[str], int]:
        if not _cacheable(obj):
            return real(obj)
        hit = _remembered.get(id(obj))
        if hit is None or hit[0] is not obj:
            lines, first = real(obj)  # an OSError or TypeError is raised again next time, not remembered
            hit = _remembered[id(obj)] = (obj, lines, first)
        return list(hit[1]), hit[2]

    getsourcelines.__wrapped__ = real  # type: ignore[attr-defined]
    getsourcelines.__doc__ = real.__doc__
    inspect.getsourcelines = getsourcelines  # type: ignore[assignment]
