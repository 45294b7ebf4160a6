"""The result of one `prtriage check`: what ran, what each revision made of each suite, and the findings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from app.analysis.core.model import Finding, Matrix, Outcome, SuiteResult
from app.analysis.core.policy_origin import PolicyOrigin
from app.analysis.verdict.health import Health
from app.analysis.verdict.refinement import Refinement

EMPTY_MATRIX = Matrix(suites=(), scripts=0, captured=0)
NOT_VALIDATED = Outcome("error", message="not validated")
Revision = Literal["base", "head"]


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of each step."""

    capture_s: float = 0.0
    base_s: float = 0.0
    head_s: float = 0.0
    minimize_s: float = 0.0  # the search for the arguments each new rejection needs
    total_s: float = 0.0
    # CPU seconds of the processes the search ran (its sandbox): on a shared machine the wall time of a
    # step follows the load, and a sandbox's share of the CPU (one scheduling group a session), its CPU less
    minimize_cpu_s: float = 0.0


@dataclass(frozen=True)
class CheckReport:
    base_sha: str | None  # None when the trees did not come from git
    head_sha: str | None
    validation_changed: bool  # False: the fast path, no suite was run
    changed_paths: tuple[str, ...] = ()
    matrix: Matrix = EMPTY_MATRIX
    base: Mapping[str, SuiteResult] = field(default_factory=dict)
    head: Mapping[str, SuiteResult] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    capture_cached: bool = False
    base_cached: bool = False  # the base's results came from an earlier check of the same job
    sandboxed: bool = True  # False only when repository code ran outside the sandbox
    timing: Timing = Timing()
    health: Health | None = None  # None on the fast path: nothing was replayed, nothing to see
    policy: PolicyOrigin | None = None  # which policy judged, and why that one
    analysed_because: str | None = None  # which validation code the change touches (None on the fast path)
    learned_paths: frozenset[str] | None = None  # modules validation imported at the base; None: not known
    refinement: Refinement | None = None  # the policy refined for this run, the base unhealthy without it

    @property
    def could_analyse(self) -> bool:
        """False when the analysis was blind: its answer is then "could not analyse", never a pass."""
        return self.health is None or self.health.could_analyse

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "blocking"]

    @property
    def broken_suites(self) -> list[str]:
        """Suites some blocking finding names: the CI suites the head would break."""
        return sorted({s for f in self.blocking for s in f.suites})

    def outcome(self, revision: Revision, suite_id: str) -> Outcome:
        results = self.base if revision == "base" else self.head
        result = results.get(suite_id)
        return result.outcome if result is not None else NOT_VALIDATED

    def outcome_counts(self, revision: Revision) -> Counter[str]:
        return Counter(self.outcome(revision, s.id).outcome for s in self.matrix.suites)

    @property
    def errored_at_both(self) -> int:
        return sum(1 for s in self.matrix.suites
                   if self.outcome("base", s.id).outcome == self.outcome("head", s.id).outcome == "error")
