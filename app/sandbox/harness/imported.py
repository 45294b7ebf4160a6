"""Which repository modules a suite's validation imported: the validation paths learned at a revision.

Runs INSIDE the sandbox, in the forked child that ran the suite: imports nothing of `app`. A module counts
when its file lies under the repository mount; what the leader imported before it forked counts too (the
child inherits it). The list is bounded and sorted; the host checks it again (model.checked_imports).
"""

from __future__ import annotations

import sys

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
