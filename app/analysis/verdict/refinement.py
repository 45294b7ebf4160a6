"""A check refined for its run: the base was unhealthy, one refine round of its policy added keys, and the
check ran again with them. What was added, why, and the YAML to add to the policy to keep it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.analysis.core.policy_origin import REPO_POLICY, PolicyOrigin


@dataclass(frozen=True)
class Refinement:
    """One refine round applied to the base's policy for one check (`prtriage check`, the App's triage)."""

    keys: tuple[str, ...]  # the policy keys it set, dotted ("harness.existing_path_prefixes")
    changes: tuple[str, ...]  # what it did, one line each, as `prtriage init` prints its rounds
    why: tuple[tuple[str, str], ...]  # (key, reason) for the keys refine gave a reason
    yaml: str  # the change, as YAML to merge into the policy file
    before: str  # the health of the check with the policy as written: why it could not analyse
    # why the refined run was not taken (it could not run, or could not analyse either): the policy as
    # written judged, and the change is what was tried
    why_not: str | None = None

    @property
    def applied(self) -> bool:
        return self.why_not is None

    def to_json(self) -> dict[str, Any]:
        return {"applied": self.applied, "keys": list(self.keys), "changes": list(self.changes),
                "why": dict(self.why), "yaml": self.yaml, "before": self.before, "why_not": self.why_not}

    def summary(self) -> str:
        """'refined for this run: harness.existing_path_prefixes += ['/mnt/']; ...'."""
        if not self.applied:
            return f"a refinement was tried, not taken ({self.why_not}): {'; '.join(self.changes)}"
        return f"refined for this run: {'; '.join(self.changes)}"


YAML_CHARS = 6000  # a longer change is cut in a comment (the JSON has it whole)


def merge_into(origin: PolicyOrigin | None) -> str:
    """Where the suggested change goes: the policy file that judged, or, for a built-in or the default
    policy, the repository's own file (which replaces the built-in one whole, so it starts from a copy)."""
    if origin is None:
        return "the policy"
    if origin.source == "base":
        return f"{origin.path} at the base"
    if origin.source == "option":
        return origin.path
    return f"a copy of {origin.path} committed as {REPO_POLICY}"


def refinement_text(refinement: Refinement, origin: PolicyOrigin | None = None) -> list[str]:
    """The terminal's lines: what was added, why the policy as written could not see, the YAML to add."""
    lines = [refinement.summary(), f"  with the policy as written: {refinement.before}"]
    lines += [f"  why {key}: {reason}" for key, reason in refinement.why]
    if refinement.applied:
        lines.append(f"  to keep it, add to {merge_into(origin)}:")
    else:
        lines.append("  the change tried:")
    return lines + [f"    {line}" for line in refinement.yaml.rstrip("\n").split("\n")]


def refinement_markdown(refinement: Refinement, escape: Callable[[str], str],
                        origin: PolicyOrigin | None = None) -> str:
    """The "Refined for this run" section of a PR comment; ESCAPE makes untrusted text inert (the changes
    quote the base's errors and the suites' paths). The change is a fenced ```yaml block titled "suggested
    policy change", not a ```suggestion: GitHub applies a suggestion only in a review comment on a line of
    the diff, and the policy that judged is the base's, which the pull request usually does not touch (and
    must not: the head never chooses its own policy)."""
    if refinement.applied:
        lines = ["#### Refined for this run", "",
                 f"With the policy as written the analysis could not see: {escape(refinement.before)}. "
                 "One round of `prtriage init`'s refine rules added what the base's errors ask for, and "
                 "this report is the refined run's:", ""]
    else:
        lines = ["#### A refinement was tried", "",
                 f"With the policy as written the analysis could not see: {escape(refinement.before)}. "
                 "One round of `prtriage init`'s refine rules added what the base's errors ask for, but the "
                 f"refined run was not taken ({escape(refinement.why_not or '')}): this report is the "
                 "policy's as written.", ""]
    lines += [f"- {escape(change)}" for change in refinement.changes]
    text = refinement.yaml if len(refinement.yaml) <= YAML_CHARS \
        else refinement.yaml[:YAML_CHARS] + "# … cut here: the report's JSON has the whole change\n"
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    lines += ["", f"**Suggested policy change** (merge into {escape(merge_into(origin))}):", "",
              f"{fence}yaml", text.rstrip("\n"), fence]
    return "\n".join(lines)

