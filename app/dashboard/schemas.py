"""The dashboard API's own models: its pages, the close request and errors. The windows and runs in them are
the store's JSON contract (app/store/shapes.py), defined once for the store and the API."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.store.shapes import RepositoryOut, RiskWindowOut, RunOut


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RiskWindowPage(Shape):
    items: list[RiskWindowOut]
    next: str | None = Field(description="Cursor of the next page; null on the last one.")


class CloseRequest(Shape):
    reason: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)] = Field(
        description="Why the window is closed, e.g. \"superseded by #2223\"; recorded in its timeline.")


class RunPage(Shape):
    items: list[RunOut]
    next: str | None = Field(description="Cursor of the next page; null on the last one.")


class RepositoryList(Shape):
    items: list[RepositoryOut]
    next: str | None = Field(description="Cursor of the next page; null on the last one.")


class ErrorOut(Shape):
    detail: str
