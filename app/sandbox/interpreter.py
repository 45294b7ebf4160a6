"""The Python a sandbox runs: an analysis environment's interpreter and the directories it needs, nothing of
the site-packages prtriage itself runs with (docs/sandbox.md, "The analysis environment")."""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from dataclasses import dataclass


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


def bare_interpreter(base_prefix: str | None = None, python: str | None = None) -> Interpreter:
    """The standard library alone: the installation prtriage runs from (or BASE_PREFIX's), its
    site-packages hidden. The environment of a policy that declares no requirements."""
    prefix = os.path.abspath(base_prefix or sys.base_prefix)
    executable = python or base_executable()
    version = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    return Interpreter(python=executable, binds=(prefix,), hidden=site_packages_of(prefix),
                       digest=hashlib.sha256(f"bare:{executable}:{sys.version}".encode()).hexdigest()[:16],
                       version=version)


def base_executable() -> str:
    """The installation's own interpreter, not a virtual environment's (whose site-packages it would add)."""
    candidate = getattr(sys, "_base_executable", "") or sys.executable
    if candidate and os.path.realpath(candidate).startswith(os.path.realpath(sys.base_prefix) + os.sep):
        return candidate
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return os.path.join(sys.base_prefix, "bin", name)


def site_packages_of(prefix: str) -> tuple[str, ...]:
    """An installation's site-packages directories (purelib and platlib), those that exist."""
    paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix, "installed_base": prefix,
                                      "installed_platbase": prefix})
    found = {os.path.abspath(paths[key]) for key in ("purelib", "platlib")}
    # Debian's Pythons also read dist-packages directories beside the scheme's own.
    found |= {os.path.join(prefix, "lib", "python3", "dist-packages"),
              os.path.join(prefix, "local", "lib", f"python{sys.version_info.major}.{sys.version_info.minor}",
                           "dist-packages")}
    return tuple(sorted(path for path in found if os.path.isdir(path)))
