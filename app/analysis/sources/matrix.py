"""The CI flag matrix of all of a policy's sources: what each listed on the host and what the sandbox recorded
of its items, by the source's kind (`registry.py`).

Pure: the capture harness's reports come in as plain values; nothing here runs a process or reads a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from app.analysis.core.model import CaptureFailure, Matrix, Suite
from app.analysis.core.policy import Policy
from app.analysis.sources.registry import kind_of
from app.analysis.sources.source_kind import Listing, NoFiles, ScriptReport


def build_matrix(policy: Policy, reports: Mapping[int, Sequence[ScriptReport]], repo_mount: str,
                 listings: Mapping[int, Listing] | None = None) -> Matrix:
    """The matrix of all sources: `reports` holds the capture reports of each source whose items run in the
    sandbox, by index; `listings` what each source listed on the host (a kind whose items run in the sandbox
    lists what CI skips there, too), by default what it lists of no files."""
    suites: list[Suite] = []
    notes: dict[str, list[CaptureFailure]] = {"failed": [], "no_entry": [], "partial": []}
    disabled: list[str] = []
    not_considered: list[str] = []
    scripts = captured = 0
    for index, source in enumerate(policy.matrix.sources):
        kind = kind_of(source)
        where = f"matrix.sources[{index}]"
        listing = (listings or {}).get(index) or kind.list_items(source, NoFiles(), where)
        suites.extend(listing.suites)
        notes["failed"] += listing.failed
        notes["no_entry"] += listing.no_entry
        not_considered += listing.not_considered
        scripts, captured = scripts + listing.cases, captured + listing.captured
        if kind.recorded is None:
            disabled += listing.disabled
            continue
        skipped = [ScriptReport(label, "disabled") for label in listing.disabled]
        for report in sorted([*skipped, *reports.get(index, ())], key=lambda r: r.script):
            found = kind.recorded(report, source, repo_mount)
            disabled += found.disabled
            if not found.ran:
                continue
            scripts += 1
            if found.note is not None:
                notes[found.outcome].append(found.note)
            if found.suites:
                captured += 1
                suites.extend(found.suites)
    return Matrix(suites=tuple(_unique_ids(suites)), scripts=scripts, captured=captured,
                  failed=tuple(notes["failed"]), disabled=tuple(disabled), no_entry=tuple(notes["no_entry"]),
                  partial=tuple(notes["partial"]), not_considered=tuple(not_considered))


def _unique_ids(suites: Iterable[Suite]) -> list[Suite]:
    """Suite ids stay unique when two sources yield the same script or a static id repeats one."""
    taken: set[str] = set()
    unique: list[Suite] = []
    for suite in suites:
        suite_id, count = suite.id, 1
        while suite_id in taken:
            count += 1
            suite_id = f"{suite.id}#{count}"
        taken.add(suite_id)
        unique.append(suite if suite_id == suite.id else Suite(id=suite_id, script=suite.script,
                                                                argv=suite.argv, env=suite.env,
                                                                entry=suite.entry))
    return unique
