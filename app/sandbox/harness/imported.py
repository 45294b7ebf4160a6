"""Which repository modules a suite's validation imported: the validation paths learned at a revision.

Runs INSIDE the sandbox, in the forked child that ran the suite: imports nothing of `app`. A module counts
when its file lies under the repository mount; what the leader imported before it forked counts too (the
child inherits it). The list is bounded and sorted; the host checks it again (model.checked_imports).
"""

from __future__ import annotations

import sys
from typing import Any

MAX_IMPORTED = 2000  # the host refuses more (model.MAX_IMPORTED)
MAX_PATH_CHARS = 300


def repo_modules(repo: str) -> list[str]:
    """Repo-relative paths of the loaded modules whose source file is under REPO, sorted."""
    prefix = repo.rstrip("/") + "/"
    found: set[str] = set()
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str) or not filename.startswith(prefix):
            continue
        relative = filename[len(prefix):]
        if relative.endswith(".py") and len(relative) <= MAX_PATH_CHARS and ".." not in relative.split("/"):
            found.add(relative)
    return sorted(found)[:MAX_IMPORTED]


class ModuleState:
    """The top-level names of the repository's loaded modules, put back as they were: a launch run to its
    training boundary sets module globals on its way there (Megatron's `set_global_variables`, which
    asserts that it runs once per process), and the next run in the same process (a warm leader's children,
    a learning retry) would otherwise start from a launch that had run already. Modules first loaded by the
    run keep what the run left (their state before it is not known)."""

    def __init__(self, repo: str) -> None:
        prefix = repo.rstrip("/") + "/"
        self.saved: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for module in list(sys.modules.values()):
            filename = getattr(module, "__file__", None)
            if isinstance(filename, str) and filename.startswith(prefix):
                self.saved.append((vars(module), dict(vars(module))))

    def restore(self) -> None:
        for namespace, before in self.saved:
            for name in [name for name in namespace if name not in before]:
                del namespace[name]
            for name, value in before.items():
                if namespace.get(name, _MISSING) is not value:
                    namespace[name] = value


_MISSING = object()
