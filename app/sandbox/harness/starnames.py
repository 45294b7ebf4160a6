"""The names a star import of a stubbed module gives: those the importing module reads and never binds.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
`from megatron.core.transformer.attention import *` with megatron absent: Python's star import copies the
module's `__all__`, or else its public `__dict__`, and never asks `__getattr__`, so a stub module gave
nothing and the importer's next line (`class Qwen2_5VLSelfAttention(SelfAttention)`) failed with a
NameError that CI, which has megatron, never sees. Which names the real module exports is unknown here; the
ones the importer needs are in its own code. So the stub's `__all__`, asked by a star import, is the
importer's global reads that nothing else gives it: not bound by the importer, not already among its
globals (an earlier import, a real module's star import), not a builtin, not private.
"""

from __future__ import annotations

import builtins
import dis
import types
from collections.abc import Iterator

_LOADS = frozenset({"LOAD_NAME", "LOAD_GLOBAL", "LOAD_FROM_DICT_OR_GLOBALS"})
_LOCAL_STORES = frozenset({"STORE_NAME", "DELETE_NAME"})  # the module's own names, or a class body's
_GLOBAL_STORES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})


def star_importing(frame: types.FrameType | None) -> bool:
    """FRAME is executing a star import (`IMPORT_STAR` to 3.11, an intrinsic call from 3.12): the one
    moment a module's `__all__` is the importer's to decide, unlike `hasattr(module, "__all__")`."""
    if frame is None:
        return False
    for instruction in dis.get_instructions(frame.f_code):
        if instruction.offset == frame.f_lasti:
            return instruction.opname == "IMPORT_STAR" or instruction.argrepr == "INTRINSIC_IMPORT_STAR"
    return False


def wanted_names(frame: types.FrameType) -> list[str]:
    """The global names FRAME's module code (its functions and class bodies too) reads and has no source
    for: what a star import of a module CI has would have had to give, sorted."""
    bound = set(frame.f_globals) | set(vars(builtins)) | _names(frame.f_code, _LOCAL_STORES)
    read: set[str] = set()
    for code in _code_objects(frame.f_code):
        bound.update(_names(code, _GLOBAL_STORES))  # `global X; X = ...` in a function
        read.update(_names(code, _LOADS) - _names(code, _LOCAL_STORES))  # a class body's own names
    return sorted(name for name in read - bound if not name.startswith("_"))


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def _names(code: types.CodeType, opnames: frozenset[str]) -> set[str]:
    """The names of CODE's own instructions among OPNAMES (not those of the code objects it holds)."""
    return {str(i.argval) for i in dis.get_instructions(code) if i.opname in opnames}
