"""Path globs as regexes: the one translation of the policy's repository globs (`app/analysis/core/policy.py`)
and of the harness's fixture paths (`vpaths`).

Runs INSIDE the sandbox too, where the harness imports it as `globs`: the standard library only, nothing of
`app`, so the app imports it as `app.sandbox.harness.globs` without importing any other harness module.
"""

from __future__ import annotations

import re


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: `*`, `?` and `[...]` match within one path segment, `**/` any directories
    (also none), a trailing `**` anything below."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")
