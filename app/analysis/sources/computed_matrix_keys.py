"""The computed_matrix kind's policy keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.analysis.sources.source_keys import GITHUB_CONTEXT, Recording, push_to_main


class ComputedMatrix(Recording):
    """The rows of a workflow job whose matrix another job computes (`fromJSON(needs.<job>.outputs.<x>)`):
    the producing job's `run:` steps run in the sandbox, and each row's CI script (the job's step `bash
    <dir>/${{ matrix.<x> }}.sh`) is run as CI runs it, its launches recorded."""

    kind: Literal["computed_matrix"] = Field(description="Source kind.")
    workflow: str = Field(description="Repo-relative path of the workflow file ('.github/workflows/ci.yml').")
    jobs: list[str] = Field(description="Ids of the jobs whose `strategy.matrix` reads another job's output; "
                            "the scripts of their rows, each once.")
    scripts: list[str] = Field(default_factory=list, description="Repo-relative globs of the scripts the "
                               "rows name: what runs when the producing job gives no matrix here (it needs "
                               "the network, a token, a tool the sandbox lacks), said in the health.")
    github: dict[str, str] = Field(default_factory=push_to_main, description=GITHUB_CONTEXT)
