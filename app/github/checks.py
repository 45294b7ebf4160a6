"""The check run a repository can require: created in progress (one per external id, never left open by a
POST whose answer was lost), completed with at most 50 annotations per call (GitHub appends annotations
across updates) and its action buttons, cancelled when a newer head supersedes it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from app.github.client import GitHubClient
from app.github.errors import GitHubError

log = logging.getLogger(__name__)

ANNOTATIONS_PER_CALL = 50
OUTPUT_LIMIT = 65_535  # characters of output.summary and output.text
ANNOTATION_TITLE_LIMIT = 255
# GitHub documents 64 KB for an annotation's message and raw_details: bytes, not characters, and the
# smaller reading of KB, so that neither reading refuses it
ANNOTATION_MESSAGE_BYTES = 64_000
ACTIONS_LIMIT = 3  # buttons on one check run

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
            "annotation_level": self.annotation_level,
            "message": cut_bytes(self.message, ANNOTATION_MESSAGE_BYTES)}
        if self.title:
            fields["title"] = self.title[:ANNOTATION_TITLE_LIMIT]
        if self.raw_details:
            fields["raw_details"] = cut_bytes(self.raw_details, ANNOTATION_MESSAGE_BYTES)
        return fields


class Button(Protocol):
    """A button GitHub shows on the completed check run (a CheckAction, or any object with these three
    fields, such as the report's ActionSpec); a click comes back as a `check_run` `requested_action`
    delivery carrying IDENTIFIER."""

    @property
    def label(self) -> str: ...  # at most 20 characters

    @property
    def description(self) -> str: ...  # at most 40

    @property
    def identifier(self) -> str: ...  # at most 20


def button_payload(button: Button) -> dict[str, str]:
    """The action as GitHub takes it; ValueError beyond GitHub's limits."""
    fields = {"label": button.label, "description": button.description, "identifier": button.identifier}
    for key, limit in (("label", 20), ("description", 40), ("identifier", 20)):
        if not 0 < len(fields[key]) <= limit:
            raise ValueError(f"a check run action's {key} has 1 to {limit} characters: {fields[key]!r}")
    return fields


@dataclass(frozen=True)
class CheckAction:
    label: str
    description: str
    identifier: str

    def payload(self) -> dict[str, str]:
        return button_payload(self)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cut_bytes(text: str, limit: int) -> str:
    """TEXT cut to at most LIMIT bytes of UTF-8, never inside a character."""
    encoded = text.encode()
    return text if len(encoded) <= limit else encoded[:limit].decode(errors="ignore")


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
    """The check run of EXTERNAL_ID on HEAD_SHA; its id.

    One open run per external id: a run of ours of that name and external id that is not completed (left
    by a job that died before recording it, or made by a POST whose answer was lost) is the one reported
    to, rather than a second that would leave it in progress for good, holding a required check. For the
    same reason the POST is never repeated blindly: after a 5xx or a lost connection the runs are listed
    again first (RetryPolicy.create).
    """
    body: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status, "external_id": external_id}
    if status == "in_progress":
        body["started_at"] = _now()
    if details_url:
        body["details_url"] = details_url
    body["output"] = {"title": title, "summary": fit_output(summary)}

    def look() -> int | None:
        return _open_run(client, owner, repo, name=name, head_sha=head_sha, external_id=external_id)

    def send() -> int:
        return int(client.post_check_run(owner, repo, body)["id"])

    found = look()
    return found if found is not None else client.policy.create("checks/create", send, look)


def _open_run(client: GitHubClient, owner: str, repo: str, *, name: str, head_sha: str, external_id: str,
              ) -> int | None:
    """Our open check run of EXTERNAL_ID, the newest (GitHub judges a required check by the latest run of
    its name); older open ones are duplicates, completed as such."""
    runs = sorted(run.id for run in client.list_check_runs(owner, repo, head_sha, check_name=name)
                  if run.external_id == external_id and run.status != "completed")
    if not runs:
        return None
    kept = runs.pop()
    for duplicate in runs:
        log.warning("check run %d: a duplicate of check run %d, cancelled", duplicate, kept)
        try:
            cancel_check_run(client, owner, repo, duplicate, reason=f"A duplicate of check run {kept}.")
        except GitHubError as exc:
            log.warning("check run %d: could not cancel: %s", duplicate, exc)
    return kept


def complete_check_run(client: GitHubClient, owner: str, repo: str, check_run_id: int, *,
                       conclusion: Conclusion, title: str, summary: str, text: str | None = None,
                       annotations: Sequence[Annotation] = (), actions: Sequence[Button] = ()) -> int:
    """Complete the run with CONCLUSION, every annotation and ACTIONS (buttons, at most 3); the number of
    annotations posted.

    Batches of 50 go through successive updates that keep the run in progress; the last one completes it.
    When an intermediate update fails for good, the rest of the annotations are dropped and the run is
    still completed, its summary saying so: a required check must never be left in progress.
    """
    if len(actions) > ACTIONS_LIMIT:
        raise ValueError(f"a check run has at most {ACTIONS_LIMIT} actions, not {len(actions)}")
    buttons = [button_payload(action) for action in actions]
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
    completion: dict[str, Any] = {"status": "completed", "conclusion": conclusion, "completed_at": _now(),
                                  "output": final}
    if buttons:  # GitHub shows them once the run is completed
        completion["actions"] = buttons
    client.patch_check_run(owner, repo, check_run_id, completion)
    return posted + len(last_batch)


def note_check_run(client: GitHubClient, owner: str, repo: str, check_run_id: int, *, title: str,
                   summary: str) -> None:
    """Show what an in-progress run is doing (its title and summary); a failure loses only the note."""
    output = {"title": title, "summary": fit_output(summary)}
    try:
        client.patch_check_run(owner, repo, check_run_id, {"status": "in_progress", "output": output})
    except GitHubError as exc:
        log.warning("check run %d: progress not shown: %s", check_run_id, exc)


def cancel_check_run(client: GitHubClient, owner: str, repo: str, check_run_id: int, *, reason: str) -> None:
    """Complete the run as `cancelled`, REASON (such as "superseded by <sha>") as its summary."""
    client.patch_check_run(owner, repo, check_run_id, {
        "status": "completed", "conclusion": "cancelled", "completed_at": _now(),
        "output": {"title": "Cancelled", "summary": fit_output(reason)}})
