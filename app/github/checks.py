"""The check run a repository can require: created in progress, completed with at most 50 annotations per
call (GitHub appends annotations across updates), cancelled when a newer head supersedes it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from app.github.client import GitHubClient
from app.github.errors import GitHubError

log = logging.getLogger(__name__)

ANNOTATIONS_PER_CALL = 50
OUTPUT_LIMIT = 65_535  # characters of output.summary and output.text
ANNOTATION_TITLE_LIMIT = 255
ANNOTATION_MESSAGE_LIMIT = 64 * 1024

Level = Literal["failure", "warning", "notice"]
Conclusion = Literal["success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"]
LEVELS = ("failure", "warning", "notice")


@dataclass(frozen=True)
class Annotation:
    """A remark on lines of a file in the head revision, in the REST description's terms."""

    path: str
    start_line: int
    end_line: int
    annotation_level: Level
    message: str
    title: str | None = None
    raw_details: str | None = None

    def payload(self) -> dict[str, Any]:
        if self.annotation_level not in LEVELS:
            raise ValueError(f"annotation_level must be one of {LEVELS}, not {self.annotation_level!r}")
        start = max(self.start_line, 1)
        fields: dict[str, Any] = {
            "path": self.path, "start_line": start, "end_line": max(self.end_line, start),
            "annotation_level": self.annotation_level, "message": self.message[:ANNOTATION_MESSAGE_LIMIT]}
        if self.title:
            fields["title"] = self.title[:ANNOTATION_TITLE_LIMIT]
        if self.raw_details:
            fields["raw_details"] = self.raw_details[:ANNOTATION_MESSAGE_LIMIT]
        return fields


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fit_output(text: str, *, limit: int = OUTPUT_LIMIT) -> str:
    """TEXT within GitHub's limit for a check run's summary or text, saying so when cut."""
    if len(text) <= limit:
        return text
    notice = f"\n\n*… cut: {len(text) - limit + 100:,} more characters did not fit.*"
    return text[: limit - 100] + notice[:100]


def create_check_run(client: GitHubClient, owner: str, repo: str, *, name: str, head_sha: str,
                     status: Literal["queued", "in_progress"] = "in_progress", external_id: str,
                     title: str = "Triage in progress", summary: str = "", details_url: str | None = None,
                     ) -> int:
    """A new check run on HEAD_SHA; its id."""
    body: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status, "external_id": external_id}
    if status == "in_progress":
        body["started_at"] = _now()
    if details_url:
        body["details_url"] = details_url
    body["output"] = {"title": title, "summary": fit_output(summary)}
    created = client.post_check_run(owner, repo, body)
    return int(created["id"])


def complete_check_run(client: GitHubClient, owner: str, repo: str, check_run_id: int, *,
                       conclusion: Conclusion, title: str, summary: str, text: str | None = None,
                       annotations: Sequence[Annotation] = ()) -> int:
    """Complete the run with CONCLUSION and every annotation; the number of annotations posted.

    Batches of 50 go through successive updates that keep the run in progress; the last one completes it.
    When an intermediate update fails for good, the rest of the annotations are dropped and the run is
    still completed, its summary saying so: a required check must never be left in progress.
    """
    payloads = [annotation.payload() for annotation in annotations]
    batches = [payloads[i:i + ANNOTATIONS_PER_CALL] for i in range(0, len(payloads), ANNOTATIONS_PER_CALL)]
    last_batch = batches.pop() if batches else []
    summary = fit_output(summary)
    posted = 0
    for batch in batches:
        try:
            output = {"title": title, "summary": summary, "annotations": batch}
            client.patch_check_run(owner, repo, check_run_id, {"status": "in_progress", "output": output})
        except GitHubError as exc:
            log.warning("check run %d: annotations stopped after %d: %s", check_run_id, posted, exc)
            summary = fit_output(f"{summary}\n\n*{len(payloads) - posted} annotations could not be posted.*")
            last_batch = []
            break
        posted += len(batch)
    final: dict[str, Any] = {"title": title, "summary": summary}
    if text:
        final["text"] = fit_output(text)
    if last_batch:
        final["annotations"] = last_batch
    client.patch_check_run(owner, repo, check_run_id, {"status": "completed", "conclusion": conclusion,
                                                        "completed_at": _now(), "output": final})
    return posted + len(last_batch)


def cancel_check_run(client: GitHubClient, owner: str, repo: str, check_run_id: int, *, reason: str) -> None:
    """Complete the run as `cancelled`, REASON (such as "superseded by <sha>") as its summary."""
    client.patch_check_run(owner, repo, check_run_id, {
        "status": "completed", "conclusion": "cancelled", "completed_at": _now(),
        "output": {"title": "Cancelled", "summary": fit_output(reason)}})
