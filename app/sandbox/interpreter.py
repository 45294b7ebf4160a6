"""The Python a sandbox runs: an analysis environment's interpreter and the directories it needs, nothing of
the site-packages prtriage itself runs with (docs/sandbox.md, "The analysis environment")."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from app.sandbox.installation import facts


@dataclass(frozen=True)
class Interpreter:
    """What the sandbox runs its programs with.

    `python` is the executable; `binds` are the directories it needs (a virtual environment and the
    installation it was made from), bound read-only at their own paths; `hidden` are directories inside
    those binds that the sandbox must not see (the installation's own site-packages, whatever was
    installed there by hand); `digest` names the environment's content in every cache key.
    """

    python: str
    binds: tuple[str, ...]
    hidden: tuple[str, ...]
    digest: str
    version: str


def bare_interpreter() -> Interpreter:
    """The standard library alone, of the installation prtriage runs from, its site-packages hidden: what a
    harness run gets when no analysis environment is given."""
    found = facts()
    digest = hashlib.sha256(f"bare:{found['executable']}:{found['full']}".encode()).hexdigest()[:16]
    return Interpreter(python=found["executable"], binds=(found["base_prefix"],), hidden=tuple(found["site"]),
                       digest=digest, version=found["version"])
