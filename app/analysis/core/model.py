"""The values analysis passes between its steps: suites, outcomes, record-mode events, findings.

Plain frozen dataclasses with `to_json`/`from_json`, so the harness protocol, the cache and the
`--format json` contract all speak the same shapes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

OutcomeKind = Literal["accepted", "rejected", "error"]
Severity = Literal["blocking", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"blocking": 0, "warning": 1, "info": 2}
MAX_IMPORTED = 2000  # repository modules one suite's validation may report (harness/imported.py)
MAX_IMPORTED_PATH = 300
MAX_LEARNED = 20000  # the union over a revision's suites; beyond it nothing is learned: all is analysed


@dataclass(frozen=True)
class Suite:
    """One CI command line: the entry script's argv and the environment the job would get."""

    id: str
    script: str  # repo-relative path of the CI script that produced it
    argv: tuple[str, ...]  # arguments after the entry script
    env: dict[str, str] = field(default_factory=dict)
    entry: str = ""  # the launched entry script, repo-relative when inside the repo (e.g. train.py)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "script": self.script, "argv": list(self.argv), "env": dict(self.env),
                "entry": self.entry}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Suite:
        return cls(id=raw["id"], script=raw["script"], argv=tuple(raw["argv"]),
                   env=dict(raw.get("env", {})), entry=raw.get("entry", ""))


@dataclass(frozen=True)
class CaptureFailure:
    script: str
    reason: str


@dataclass(frozen=True)
class Matrix:
    """The suites captured from one revision, and the scripts that yielded none."""

    suites: tuple[Suite, ...]
    scripts: int  # CI scripts considered (after excluding disabled ones)
    captured: int  # scripts that yielded at least one suite
    failed: tuple[CaptureFailure, ...] = ()  # scripts that died before launching the entry
    disabled: tuple[str, ...] = ()  # scripts CI does not run (registered with disabled=...)
    # Scripts that ran to their end without launching the entry (pytest, a server): not a capture failure.
    no_entry: tuple[CaptureFailure, ...] = ()
    # Scripts whose suites were recorded and which failed afterwards (checking their own side effects).
    partial: tuple[CaptureFailure, ...] = ()
    # What CI may run and the policy leaves out (recipe rows of scopes it does not list), by label: never
    # silent, but neither a suite nor a capture failure.
    not_considered: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"suites": [s.to_json() for s in self.suites], "scripts": self.scripts,
                "captured": self.captured, "failed": [asdict(f) for f in self.failed],
                "disabled": list(self.disabled), "no_entry": [asdict(f) for f in self.no_entry],
                "partial": [asdict(f) for f in self.partial], "not_considered": list(self.not_considered)}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Matrix:
        return cls(suites=tuple(Suite.from_json(s) for s in raw["suites"]), scripts=raw["scripts"],
                   captured=raw["captured"], failed=tuple(CaptureFailure(**f) for f in raw["failed"]),
                   disabled=tuple(raw.get("disabled", ())),
                   no_entry=tuple(CaptureFailure(**f) for f in raw.get("no_entry", ())),
                   partial=tuple(CaptureFailure(**f) for f in raw.get("partial", ())),
                   not_considered=tuple(str(n) for n in raw.get("not_considered", ())))


@dataclass(frozen=True)
class Outcome:
    """How one revision's validation ended for one suite (outcome mode, original code)."""

    outcome: OutcomeKind
    exception: str | None = None  # e.g. "AssertionError", "ValueError", "SystemExit"
    message: str | None = None
    path: str | None = None  # repo-relative file of the innermost repository frame
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Outcome:
        return cls(**raw)


@dataclass(frozen=True)
class Event:
    """One assert, raise or error recorded in record mode (execution continued past it)."""

    kind: Literal["assert", "raise", "error"]
    path: str  # repo-relative
    line: int
    function: str  # qualified name of the rewritten function
    text: str  # source text of the statement, whitespace-normalised
    exception: str  # AssertionError, ValueError, TypeError, ...
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Event:
        return cls(**raw)


@dataclass(frozen=True)
class LearnedAttribute:
    """An attribute no parser defined, which the harness set to a default and retried."""

    name: str
    path: str | None
    line: int | None
    upstream: bool = False  # a stubbed or replaced upstream parser ran: it may define the attribute
    assumed: bool = False  # so the harness gave it the neutral value of its name's shape (no policy default)
    value: Any = None  # the value assumed


@dataclass(frozen=True)
class SuiteResult:
    """Everything one revision's harness reports for one suite."""

    suite_id: str
    outcome: Outcome
    events: tuple[Event, ...] = ()
    known_flags: tuple[str, ...] = ()  # option strings the suite passes that the repository's parsers define
    tolerated_flags: tuple[str, ...] = ()  # passed, defined by no repository parser, set generically
    learned: tuple[LearnedAttribute, ...] = ()
    lines_hit: dict[str, tuple[int, ...]] = field(default_factory=dict)  # traced changed lines that ran
    imported: tuple[str, ...] = ()  # repository modules the validation imported (repo-relative, sorted)
    drift: tuple[str, ...] = ()  # replacement targets this revision lacks, skipped ("target: why")
    # assumed options (LearnedAttribute.assumed) the rejection rests on: read at its line, or another
    # neutral value of theirs ends the suite otherwise (harness/assumption.py)
    rejection_assumes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"suite_id": self.suite_id, "outcome": self.outcome.to_json(),
                "events": [e.to_json() for e in self.events], "known_flags": list(self.known_flags),
                "tolerated_flags": list(self.tolerated_flags), "learned": [asdict(a) for a in self.learned],
                "lines_hit": {p: list(ls) for p, ls in self.lines_hit.items()}, "drift": list(self.drift),
                "imported": list(self.imported), "rejection_assumes": list(self.rejection_assumes)}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SuiteResult:
        return cls(suite_id=raw["suite_id"], outcome=Outcome.from_json(raw["outcome"]),
                   events=tuple(Event.from_json(e) for e in raw.get("events", ())),
                   known_flags=tuple(raw.get("known_flags", ())),
                   tolerated_flags=tuple(raw.get("tolerated_flags", ())),
                   learned=tuple(LearnedAttribute(**a) for a in raw.get("learned", ())),
                   lines_hit={p: tuple(ls) for p, ls in raw.get("lines_hit", {}).items()},
                   drift=tuple(str(d) for d in raw.get("drift", ())),
                   imported=checked_imports(raw.get("imported", ())),
                   rejection_assumes=tuple(str(n) for n in raw.get("rejection_assumes", ())))


def checked_imports(raw: Any, limit: int = MAX_IMPORTED) -> tuple[str, ...]:
    """The harness's list of imported repository modules, believed only when it has the shape the harness
    sends (at most LIMIT repo-relative `.py` paths, none leaving the repository): the list decides
    which later pull requests are analysed, so a malformed one is refused whole."""
    if not isinstance(raw, (list, tuple)) or len(raw) > limit:
        raise ValueError(f"imported: not a list of at most {limit} paths")
    for path in raw:
        if not (isinstance(path, str) and 0 < len(path) <= MAX_IMPORTED_PATH and path.endswith(".py")
                and not path.startswith("/") and ".." not in path.split("/") and "\0" not in path):
            raise ValueError(f"imported: not a repo-relative module path: {str(path)[:100]!r}")
    return tuple(sorted(set(raw)))


FindingKind = Literal["new_rejection", "removed_flag", "newly_tolerated_flag", "fixed", "capture_failed",
                      "new_error", "not_exercised",
                      # from the PR's text (followup_findings.py)
                      "unmerged_prerequisite", "pending_followup", "abandoned_followup",
                      # a revert: what it fixes and re-opens (app/triage/pr_text_findings.py)
                      "revert_closes_window", "revert_reopens"]


@dataclass(frozen=True)
class MinimalArgs:
    """The smallest set of one suite's arguments the head still rejects at a finding's line (the base
    accepts the whole suite): why the suites break (app/analysis/verdict/minimal.py)."""

    args: tuple[str, ...]  # the arguments' words, in the suite's order
    count: int  # how many arguments (an option with its values is one) the set has
    of: int  # ... of how many the suite passes
    suite: str  # the suite it was searched on
    complete: bool  # False: the search was cut short, ARGS is the smallest set seen rejected
    every_suite_passes: bool  # every suite of the finding passes all of ARGS
    # what the search cost: the argument sets it tried, in how many rounds (a trip through the forks each);
    # how it searched, not what it found (two searches that find the same set are equal)
    sets: int = field(default=0, compare=False)
    rounds: int = field(default=0, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"args": list(self.args), "count": self.count, "of": self.of, "suite": self.suite,
                "complete": self.complete, "every_suite_passes": self.every_suite_passes, "sets": self.sets,
                "rounds": self.rounds}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> MinimalArgs:
        return cls(args=tuple(raw["args"]), count=int(raw["count"]), of=int(raw["of"]), suite=raw["suite"],
                   complete=bool(raw["complete"]), every_suite_passes=bool(raw["every_suite_passes"]),
                   sets=int(raw.get("sets", 0)), rounds=int(raw.get("rounds", 0)))


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    severity: Severity
    message: str
    scripts: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()
    path: str | None = None
    line: int | None = None
    in_diff: bool = False
    minimal_args: MinimalArgs | None = None  # a new rejection's cause among the suites' arguments

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "scripts": list(self.scripts),
                "suites": list(self.suites), "path": self.path, "line": self.line, "in_diff": self.in_diff,
                "message": self.message,
                "minimal_args": self.minimal_args.to_json() if self.minimal_args is not None else None}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Finding:
        minimal = raw.get("minimal_args")
        return cls(kind=raw["kind"], severity=raw["severity"], message=raw["message"],
                   scripts=tuple(raw.get("scripts", ())), suites=tuple(raw.get("suites", ())),
                   path=raw.get("path"), line=raw.get("line"), in_diff=bool(raw.get("in_diff")),
                   minimal_args=MinimalArgs.from_json(minimal) if minimal else None)
