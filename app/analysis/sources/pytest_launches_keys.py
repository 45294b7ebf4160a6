"""The pytest_launches kind's policy keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from app.analysis.sources.source_keys import GITHUB_CONTEXT, Recording, push_to_main


class PytestLaunches(Recording):
    """The launches CI's pytest test functions make: each workflow step that starts pytest (or each of
    `invocations`) runs in the recording sandbox with CI's selection, pytest for real, and every entry a
    test function starts (subprocess, exec) is one suite, named by the test."""

    kind: Literal["pytest_launches"] = Field(description="Source kind.")
    workflows: list[str] = Field(default_factory=list, description="Repo-relative globs of the workflow "
                                 "files whose `run:` steps start pytest ('.github/workflows/*.yml').")
    jobs: list[str] = Field(default_factory=list, description="Job ids whose pytest steps run; empty: every "
                            "job.")
    exclude_jobs: list[str] = Field(default_factory=list, description="Job ids left out.")
    invocations: list[list[str]] = Field(default_factory=list, description="pytest command lines run from "
                                         "the repository root besides the workflows' steps, as argument "
                                         "lists after `pytest` ([['-m', 'e2e', 'tests/']]).")
    env: dict[str, str] = Field(default_factory=dict, description="Variables the CI runner itself has, "
                                "beneath the workflow's, the job's and the step's `env:`.")
    github: dict[str, str] = Field(default_factory=push_to_main, description=GITHUB_CONTEXT)
    gpus: int = Field(0, ge=0, le=1024, description="GPUs CI's runner has: in the pytest run, a real torch's "
                      "`torch.cuda.is_available()` answers True and `device_count()` this number, so tests "
                      "CI gates on GPUs run up to their launch.")

    @model_validator(mode="after")
    def _somewhere(self) -> PytestLaunches:
        if not self.workflows and not self.invocations:
            raise ValueError("pytest_launches: name `workflows` whose steps run pytest, or `invocations`")
        return self
