"""A job matrix another job computes: `strategy.matrix` (or one of its axes) is
`${{ fromJSON(needs.<job>.outputs.<x>) }}`, and that job's output `<x>` is `${{ steps.<id>.outputs.<y> }}`,
what its step `<id>` wrote to $GITHUB_OUTPUT. Reading the workflow says which job, step and output; only
running the step gives the rows. Pure: reads parsed workflow values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_FROM_JSON = re.compile(r"\$\{\{\s*fromJSON\(\s*needs\.([\w-]+)\.outputs\.([\w-]+)\s*\)\s*\}\}", re.I)
_STEP_OUTPUT = re.compile(r"\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}")


@dataclass(frozen=True)
class MatrixReference:
    """What a job's matrix reads: the producing job's output, for one axis or (axis None) the whole matrix."""

    job: str
    output: str
    axis: str | None


@dataclass(frozen=True)
class OutputStep:
    """The producing job's step whose $GITHUB_OUTPUT entry is the output."""

    step: str
    output: str


def matrix_reference(job: Any) -> MatrixReference | None:
    """The output a job's matrix reads, if it reads one."""
    strategy = job.get("strategy") if isinstance(job, dict) else None
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    if isinstance(matrix, str):
        found = _FROM_JSON.fullmatch(matrix.strip())
        return MatrixReference(found.group(1), found.group(2), None) if found else None
    for axis, values in matrix.items() if isinstance(matrix, dict) else ():
        found = _FROM_JSON.fullmatch(values.strip()) if isinstance(values, str) else None
        if found is not None:
            return MatrixReference(found.group(1), found.group(2), str(axis))
    return None


def output_step(jobs: dict[str, Any], reference: MatrixReference) -> OutputStep | str:
    """The step behind the output a matrix reads, or why there is none to run."""
    producer = jobs.get(reference.job)
    if not isinstance(producer, dict):
        return f"no job {reference.job} in the workflow"
    if "uses" in producer:
        return f"{reference.job} is a reusable workflow ({producer['uses']}), not run here"
    outputs = producer.get("outputs")
    value = outputs.get(reference.output) if isinstance(outputs, dict) else None
    found = _STEP_OUTPUT.fullmatch(value.strip()) if isinstance(value, str) else None
    if found is None:
        return f"{reference.job}'s output {reference.output} is not one step's output"
    return OutputStep(found.group(1), found.group(2))
