"""Which policy a command-line check uses, why that one, and what to do when it is the default one.

--policy FILE, else the base revision's own .github/pr-triage.yml (the head cannot change the policy that
judges it), else the built-in policy of the GitHub repository named by --repository, `origin`, or
GITHUB_REPOSITORY (in that order), else the default policy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from app.analysis.core.policy import POLICIES_DIR, Policy, PolicyError, load_policy, parse_policy
from app.analysis.core.policy_origin import (
    REPO_POLICY,
    PolicyOrigin,
    base_origin,
    builtin_for,
    option_origin,
)
from app.trees.gitrepo import github_slug

REPOSITORY = re.compile(r"[\w.-]+/[\w.-]+")


class RepositoryNameError(ValueError):
    """--repository or GITHUB_REPOSITORY is not owner/name: bad usage, exit status 2."""


def checked_repository(text: str | None, where: str) -> str | None:
    """owner/name as given (--repository, GITHUB_REPOSITORY), or a usage error naming WHERE."""
    if text is None or text == "":
        return None
    if not REPOSITORY.fullmatch(text):
        raise RepositoryNameError(f"{where}: expected owner/name (e.g. radixark/miles), got {text!r}")
    return text


def named_repository(option: str | None, repo: Path | None,
                     environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(owner/name, what named it): --repository, else `origin` of REPO, else GITHUB_REPOSITORY."""
    if option:
        return checked_repository(option, "--repository"), "--repository"
    slug = github_slug(repo) if repo is not None else None
    if slug is not None:
        return "/".join(slug), "origin"
    from_env = checked_repository(environ.get("GITHUB_REPOSITORY"), "GITHUB_REPOSITORY")
    return (from_env, "GITHUB_REPOSITORY") if from_env else (None, None)


def choose_policy(*, explicit: Path | None, base_tree: Path, base_label: str, repository: str | None,
                  named_by: str | None) -> tuple[Policy, PolicyOrigin]:
    """The policy that judges a change whose base revision is BASE_TREE, and where it came from."""
    if explicit is not None:
        return load_policy(explicit), option_origin(explicit, repository)
    own = base_tree / REPO_POLICY
    if own.is_file() and own.resolve().is_relative_to(base_tree.resolve()):
        source = f"{base_label}:{REPO_POLICY}"
        try:
            text = own.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(f"{source}: cannot read policy: {exc}") from None
        return parse_policy(text, source), base_origin(repository)
    path, origin = builtin_for(repository, named_by)
    return load_policy(path), origin


def uncommitted_policy(work_tree: Path | None, base_tree: Path, origin: PolicyOrigin) -> str | None:
    """A warning when the work tree holds a policy the base revision lacks: `prtriage init` writes one
    there, and a check reads the base's, so the file written is not the one used until it is committed."""
    if work_tree is None or origin.source == "option" or (base_tree / REPO_POLICY).is_file():
        return None
    written = work_tree / REPO_POLICY
    if not written.is_file():
        return None
    return (f"warning: {written} is in the work tree but not in the base revision, and the policy is read "
            f"from the base (a pull request cannot choose the policy that judges it): it was not used. "
            f"Commit it, or pass --policy {written}")


def builtin_repositories() -> list[str]:
    return sorted(path.relative_to(POLICIES_DIR).with_suffix("").as_posix()
                  for path in POLICIES_DIR.glob("*/*.yml"))


def why_default(origin: PolicyOrigin) -> str:
    """Why no built-in policy applied."""
    if origin.repository:
        return f"none is built in for {origin.repository} (named by {origin.named_by})"
    return "no GitHub repository was named (`origin` is not on github.com), so no built-in policy applies"


def next_steps(origin: PolicyOrigin, init_command: str) -> list[str]:
    """What to do when the default policy could not analyse: the three ways to a policy that fits."""
    if origin.source != "default":
        return []
    return [
        f"`{init_command}` detects the repository's shape and writes its own {REPO_POLICY} "
        "(commit it, or pass it with --policy)",
        "`--policy FILE` judges with a policy of your own (every key: docs/policy.md)",
        f"`--repository owner/name` picks a built-in policy ({', '.join(builtin_repositories())})",
    ]
