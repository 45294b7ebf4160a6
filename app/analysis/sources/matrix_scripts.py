"""`prtriage init`: CI scripts a workflow step starts through a matrix value (`bash t/${{ matrix.x }}.sh`).

NVIDIA-NeMo/RL's functional jobs run `bash tests/functional/${{ matrix.script }}.sh` (in the shared composite
action `test-template`, expanded here as workflow sources expand it), and their matrix comes from another
job's output (`fromJSON(needs.pre-flight.outputs...)`), which reading the workflow does not give. The step's
own text still says where the scripts are: the glob its expression stands for. Of the scripts it matches,
those another script of their directory runs are that script's parts (NeMo RL's L1 scripts each run several
`tests/functional/<test>.sh`), not matrix rows: the rest, the scripts nothing else there runs, are what the
matrix lists. They become a `record_launches` source run by bash. A job whose matrix a step of another job
computes is `computed_matrix`'s (it runs that step), which takes this reading of its glob for when the step
gives no matrix here. Reads files, runs nothing.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.analysis.core.policy import path_matches
from app.analysis.core.tree_reading import read_text
from app.analysis.sources.composite_actions import job_steps
from app.analysis.sources.needs_outputs import OutputStep, matrix_reference, output_step
from app.analysis.sources.workflow_rows import tree_workflows

_TEMPLATED = re.compile(r"(?<![\w./-])(?:\./)?([\w./-]*)\$\{\{\s*matrix\.[\w-]+\s*\}\}([\w.-]*\.sh)"
                        r"(?![\w.-])")
MAX_SCRIPTS = 1024  # scripts one glob may match before the detection stops reading them


def detect(root: Path, recording: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """One `record_launches` source per glob that workflow steps start through a matrix value (the source's
    keys, and why)."""
    for glob, where in sorted(_templated_globs(root).items()):
        matched, roots = outermost(root, glob)
        if not roots:
            continue
        scripts = as_globs(glob, matched, roots)
        source = {"kind": "record_launches", "scripts": scripts, "command": ["bash", "{script}"],
                  **copy.deepcopy(recording)}
        yield source, (f"{where} runs `{glob}` for each matrix row; of the {len(roots)} scripts there that "
                       "no other one of them runs, each is run by the recording bash")


def _templated_globs(root: Path) -> dict[str, str]:
    """Each glob a step's `<path>${{ matrix.x }}<name>.sh` stands for, and the first step naming it."""
    found: dict[str, str] = {}

    def read(path: str) -> str:
        if not (root / path).is_file():
            raise FileNotFoundError(path)
        return read_text(root / path)

    for path, jobs in tree_workflows(root):
        for name, job in jobs.items():
            reference = matrix_reference(job)
            if not isinstance(job, dict) or (reference is not None
                                             and isinstance(output_step(jobs, reference), OutputStep)):
                continue  # a computed matrix: computed_matrix's
            for job_step in job_steps(job.get("steps"), read, [], f"{path}:{name}"):
                run = job_step.step.get("run")
                for match in _TEMPLATED.finditer(run if isinstance(run, str) else ""):
                    found.setdefault(f"{match.group(1)}*{match.group(2)}", f"{path}:{name}")
    return found


def outermost(root: Path, glob: str) -> tuple[list[str], list[str]]:
    """The scripts GLOB matches, and those of them no other one names (by path or by file name)."""
    directory = os.path.dirname(glob)
    scripts = sorted(p.relative_to(root).as_posix() for p in (root / directory).glob("*.sh")
                     if path_matches(p.relative_to(root).as_posix(), glob))[:MAX_SCRIPTS]
    texts = {script: read_text(root / script) for script in scripts}
    return scripts, [script for script in scripts if not any(
        os.path.basename(script) in text for other, text in texts.items() if other != script)]


def as_globs(glob: str, matched: list[str], roots: list[str]) -> list[str]:
    """ROOTS as one glob when their names share a prefix that takes no other script (so that a script added
    later is found too), else as they are."""
    directory = os.path.dirname(glob)
    names = [os.path.basename(r) for r in roots]
    prefix = next((names[0][:n] for n in range(len(names[0]), 0, -1)
                   if all(name.startswith(names[0][:n]) for name in names)), "")
    suffix = glob.rsplit("*", 1)[1]
    narrowed = f"{directory}/{prefix}*{suffix}" if directory else f"{prefix}*{suffix}"
    taken = [script for script in matched if path_matches(script, narrowed)]
    if len(roots) > 1 and prefix and taken == roots:
        return [narrowed]
    return roots
