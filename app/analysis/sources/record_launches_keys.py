"""The record_launches kind's policy keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.analysis.sources.source_keys import Recording


class RecordLaunches(Recording):
    """Run each CI script as CI does, with process launches intercepted and recorded."""

    kind: Literal["record_launches"] = Field(description="Source kind.")
    scripts: list[str] = Field(description="Repo-relative globs of the CI scripts ('**' spans directories).")
    exclude: list[str] = Field(default_factory=list, description="Globs of scripts to leave out.")
