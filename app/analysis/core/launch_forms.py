"""A source's launch as the revision at hand forms it: a policy written at one snapshot lists, under a
source's `forms`, how the CI runner launched the entry in an older layout (run_train.sh taking a TOML file
before the configs became Python functions), each with the text of the revision's own files that says the
form applies. The first that fits replaces the source's `args` and `defaults`; a note says so.

Pure: the revision's files come in through `read`; nothing here runs a process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.analysis.core.policy import Policy

MAX_READ_CHARS = 1 << 20  # a `when` file larger than this is read up to here


def fit_forms(policy: Policy, read: Callable[[str], str | None],
              revision: str) -> tuple[Policy, tuple[str, ...]]:
    """POLICY with each source's first fitting form in place of its `args` and `defaults`, and a note for
    each; POLICY itself when no source has a form that fits. READ gives a repo-relative file's text, None
    when the revision has no such file."""
    notes: list[str] = []
    sources = [_fitted(source, f"matrix.sources[{index}]", read, revision, notes.append)
               for index, source in enumerate(policy.matrix.sources)]
    if not notes:
        return policy, ()
    return policy.model_copy(update={"matrix": policy.matrix.model_copy(update={"sources": sources})}), \
        tuple(notes)


def _fitted(source: Any, where: str, read: Callable[[str], str | None], revision: str,
            note: Callable[[str], None]) -> Any:
    for number, form in enumerate(getattr(source, "forms", None) or (), start=1):
        if all(text in (read(path) or "")[:MAX_READ_CHARS] for path, text in form.when.items()):
            said = ", ".join(f"{path} contains {text!r}" for path, text in form.when.items())
            note(f"the policy's {where} launched as its forms[{number}] at {revision} ({said}): "
                 f"{' '.join(form.args)}")
            return source.model_copy(update={"args": form.args, "defaults": form.defaults})
    return source
