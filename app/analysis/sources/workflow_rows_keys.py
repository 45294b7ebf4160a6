"""The workflow_rows kind's policy keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.analysis.sources.source_keys import Recording


class WorkflowRows(Recording):
    """The rows of GitHub workflow matrices, each run as its CI script with the row's arguments and env."""

    kind: Literal["workflow_rows"] = Field(description="Source kind.")
    workflows: list[str] = Field(description="Repo-relative globs of the workflow files "
                                 "('.github/workflows/pr-test.yml').")
    jobs: list[str] = Field(default_factory=list, description="Job ids whose matrix rows are suites; "
                            "empty: every job with a matrix.")
    exclude_jobs: list[str] = Field(default_factory=list, description="Job ids left out.")
    script: str = Field(description="The matrix field that names a row's CI script, as a dotted path "
                                    "('info.test_file' for `matrix.info.test_file`). Split on whitespace as "
                                    "the run line's shell does: the first word is the script, the others "
                                    "its first arguments ('test_ckpt.py --async-save').")
    script_dir: str = Field("", description="Directory put before the script's path unless the path "
                            "already starts with it ('tests').")
    args: str | None = Field(None, description="The matrix field holding extra words after the script "
                             "('info.test_args'), split on whitespace.")
    env: dict[str, str] = Field(default_factory=dict, description="Variables the CI runner itself has, "
                                "beneath the workflow's and the job's `env:`.")
