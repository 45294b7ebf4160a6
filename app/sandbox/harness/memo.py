"""The answers of repository functions a policy memoizes (`replace` with `memoize`), kept per target.

Runs INSIDE the sandbox: the standard library and sibling harness modules only. A warm-up fills them and
the children forked after it inherit them. The first warm leader also hands its answers up to its leader,
so that the next warm leaders start with them instead of computing them again in each warm-up (Megatron-LM's
field docstrings: about half a second of each of some ten warm-ups). Only an answer whose computation read
no environment variable goes up: the later warm leaders serve suites whose environment differs, and a
memoized function is one whose answer depends on its arguments and the read-only tree alone.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import envprobe
else:
    import envprobe

_answers: dict[str, dict[Any, Any]] = {}  # target -> {arguments: answer}
_portable: dict[str, set[Any]] = {}  # target -> the arguments whose answer read no environment variable


def answers(target: str) -> dict[Any, Any]:
    """The table of `target`'s answers (created empty)."""
    return _answers.setdefault(target, {})


def compute(target: str, key: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`, remembered under `key`; a raise is not remembered."""
    watcher = envprobe.EnvironmentWatcher()
    with watcher.watching():
        answer = function(*args, **kwargs)
    answers(target)[key] = answer
    if not watcher.reads and not watcher.everything:
        _portable.setdefault(target, set()).add(key)
    return answer


def export() -> str:
    """The portable answers of this process as text for a JSON line ("" for none); an entry that does not
    pickle (an argument or answer holding a lambda, say) stays behind."""
    entries = []
    for target, keys in _portable.items():
        for key in keys:
            try:
                entries.append(pickle.dumps((target, key, _answers[target][key])))
            except Exception:  # pickle raises whatever the object's own __reduce__ raises
                continue
    return base64.b64encode(pickle.dumps(entries)).decode("ascii") if entries else ""


def adopt(text: str) -> int:
    """In a leader: add what a warm leader exported to this process's tables; returns how many answers.

    Both processes belong to one run of one revision, so the data is this run's own. An entry that does not
    unpickle here (a class the leader cannot reach) is skipped: the warm-ups compute it again.
    """
    try:
        entries = pickle.loads(base64.b64decode(text)) if text else []
    except Exception:
        return 0
    adopted = 0
    for entry in entries if isinstance(entries, list) else ():
        try:
            target, key, answer = pickle.loads(entry)
            answers(target).setdefault(key, answer)
        except Exception:
            continue
        _portable.setdefault(target, set()).add(key)
        adopted += 1
    return adopted
