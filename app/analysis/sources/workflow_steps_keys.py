"""The workflow_steps kind's policy keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.analysis.sources.source_keys import GITHUB_CONTEXT, Recording, push_to_main


class WorkflowSteps(Recording):
    """The `run:` steps of GitHub workflow jobs that run a CI script, each run as CI runs it: its text in the
    recording bash with the workflow's, the job's and the step's environment."""

    kind: Literal["workflow_steps"] = Field(description="Source kind.")
    workflows: list[str] = Field(description="Repo-relative globs of the workflow files "
                                 "('.github/workflows/e2e_*.yml').")
    jobs: list[str] = Field(default_factory=list, description="Job ids whose steps are suites; empty: every "
                            "job.")
    exclude_jobs: list[str] = Field(default_factory=list, description="Job ids left out.")
    scripts: list[str] = Field(description="Repo-relative globs of the CI scripts: a step whose `run:` "
                               "names none of them (installs, dataset preparation) is left out.")
    env: dict[str, str] = Field(default_factory=dict, description="Variables the CI runner itself has, "
                                "beneath the workflow's, the job's and the step's `env:`.")
    github: dict[str, str] = Field(default_factory=push_to_main, description=GITHUB_CONTEXT)
