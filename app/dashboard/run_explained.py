"""A run's page beyond its stored rows: each finding with the arguments that make its suites fail (the
report's `minimal_args`) and a link to its line at the head, and the suites grouped by CI script."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from app.store.shapes import FindingOut, RunDetailOut, SuiteOut

FAILED = ("rejected", "error")


@dataclass(frozen=True)
class Explained:
    finding: FindingOut
    minimal: Mapping[str, Any] | None  # MINIMAL of the README: args, count, of, suite, complete, ...
    line_url: str | None  # the finding's line in the head revision on GitHub


@dataclass
class ScriptGroup:
    script: str
    suites: list[tuple[str, SuiteOut]] = field(default_factory=list)  # (the id without the script, suite)
    regressed: int = 0  # suites the base accepts and the head does not

    @property
    def head_failed(self) -> int:
        return sum(1 for _, suite in self.suites if suite["head"] and suite["head"]["outcome"] in FAILED)


def _key(finding: Mapping[str, Any]) -> tuple[Any, ...]:
    return (finding.get("kind"), finding.get("path"), finding.get("line"), finding.get("message"))


def explained_findings(run: RunDetailOut) -> list[Explained]:
    """The run's findings, blocking first, each with its minimal arguments when the stored report has them
    (a run stored before they were searched has none: the finding shows without)."""
    reported = (run["summary"] or {}).get("findings") or []
    minimal = {_key(item): item.get("minimal_args") for item in reported if isinstance(item, dict)}
    ordered = sorted(run["findings"], key=lambda finding: finding["severity"] != "blocking")
    return [Explained(finding, minimal.get(_key(finding)) or None, line_url(run, finding))
            for finding in ordered]


def line_url(run: RunDetailOut, finding: FindingOut) -> str | None:
    """The finding's line in the head revision, on the repository's site (its pull request's address
    without `/pull/N`, so GitHub Enterprise links work too)."""
    site, _, _ = run["pr"]["url"].rpartition("/pull/")
    if not site or not finding["path"]:
        return None
    anchor = f"#L{finding['line']}" if finding["line"] else ""
    return f"{site}/blob/{run['head_sha']}/{quote(finding['path'])}{anchor}"


def suites_by_script(suites: Sequence[SuiteOut]) -> list[ScriptGroup]:
    """Suites by CI script, scripts with a regression first, then by name; each suite named by what its id
    adds to the script's path (`#2`), since the group's heading says the script."""
    groups: dict[str, ScriptGroup] = {}
    for suite in suites:
        group = groups.setdefault(suite["script"], ScriptGroup(suite["script"]))
        short = suite["id"][len(suite["script"]):] if suite["id"].startswith(suite["script"]) else suite["id"]
        group.suites.append((short or suite["id"], suite))
        base, head = suite["base"], suite["head"]
        if base and head and base["outcome"] == "accepted" and head["outcome"] != "accepted":
            group.regressed += 1
    return sorted(groups.values(), key=lambda group: (not group.regressed, group.script))
