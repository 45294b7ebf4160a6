"""The static kind's policy keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.analysis.sources.source_keys import StrictModel


class StaticSuite(StrictModel):
    id: str = Field(description="Suite id.")
    argv: list[str] = Field(description="Arguments after the entry script.")
    env: dict[str, str] = Field(default_factory=dict, description="Job environment.")


class StaticSuites(StrictModel):
    """Suites written into the policy itself."""

    kind: Literal["static"] = Field(description="Source kind.")
    suites: list[StaticSuite] = Field(description="The suites.")
