"""Which policy judged a change, and why that one: every report says it, since a silent choice of the
default policy reads as "the repository has nothing to check"."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.analysis.core.policy import POLICIES_DIR, builtin_policy

REPO_POLICY = ".github/pr-triage.yml"
Source = Literal["option", "base", "builtin", "default"]


@dataclass(frozen=True)
class PolicyOrigin:
    """SOURCE: option (--policy FILE), base (the base revision's own file), builtin (policies/owner/name.yml),
    default (policies/default.yml); REPOSITORY: owner/name when known; NAMED_BY: how it became known."""

    source: Source
    path: str
    repository: str | None = None
    named_by: str | None = None  # "origin", "--repository", "GITHUB_REPOSITORY", "the pull request"
    # the policy's globs followed to the analysed revision's older layout (app/analysis/core/layout.py)
    followed: tuple[str, ...] = ()

    def describe(self) -> str:
        """`policies/radixark/miles.yml (built-in for radixark/miles, from origin)`, then what of it was
        followed to the revision's older layout, one note a line."""
        return self._named() + "".join(f"\n  {note}" for note in self.followed)

    def _named(self) -> str:
        if self.source == "option":
            return f"{self.path} (--policy)"
        if self.source == "base":
            return f"{self.path} at the base"
        if self.source == "builtin":
            named = f", from {self.named_by}" if self.named_by else ""
            return f"{self.path} (built-in for {self.repository}{named})"
        if self.repository:
            return f"default (no policy for {self.repository})"
        return "default (no policy for this repository)"

    def to_json(self) -> dict[str, Any]:
        # `followed` only when something was: an extension of INTERFACES.md's `policy` object
        followed = {"followed": list(self.followed)} if self.followed else {}
        return {"source": self.source, "path": self.path, "repository": self.repository, **followed}


def bundled_name(path: Path) -> str:
    """`policies/radixark/miles.yml`: a built-in policy by its place in the project, not the install's."""
    return f"policies/{path.relative_to(POLICIES_DIR).as_posix()}"


def builtin_for(repository: str | None, named_by: str | None) -> tuple[Path, PolicyOrigin]:
    """The built-in policy of REPOSITORY (owner/name), else the default one; with where it came from."""
    owner, _, name = (repository or "").partition("/")
    path = builtin_policy(owner, name) if owner and name else builtin_policy()
    source: Source = "default" if path == builtin_policy() else "builtin"
    return path, PolicyOrigin(source, bundled_name(path), repository, named_by)


def base_origin(repository: str | None = None) -> PolicyOrigin:
    return PolicyOrigin("base", REPO_POLICY, repository)


def option_origin(path: Path, repository: str | None = None) -> PolicyOrigin:
    return PolicyOrigin("option", str(path), repository, "--policy")
