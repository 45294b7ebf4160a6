"""Why an analysis could not run (exit status 3), shared by the check's steps and its refined rerun."""

from __future__ import annotations

from app.analysis.core.model import Matrix
from app.analysis.verdict.health import Health


class AnalysisError(Exception):
    """The analysis could not run (no sandbox, repository code that cannot load...): exit status 3."""


class NothingCaptured(AnalysisError):
    """The policy's CI scripts yielded no suite at all: most often a policy that does not fit the
    repository."""


class Unloadable(AnalysisError):
    """Every suite errored at the base: nothing can be compared. It carries what the check saw, for the
    refine round that may make the base load (app/engine/refined_check.py); past it, a plain
    AnalysisError."""

    def __init__(self, message: str, matrix: Matrix, health: Health) -> None:
        super().__init__(message)
        self.matrix = matrix
        self.health = health
