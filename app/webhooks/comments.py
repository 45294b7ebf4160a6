"""PR comments: a new comment with a `/triage` command line queues its commands; the App's own comments,
other bots', comments on issues and comments without a command are ignored here, before any work."""

from __future__ import annotations

from app.commands import parse_commands
from app.webhooks.router import Decision, Ignored, Job, Payload, Router, installation_id, repository, require

router = Router()


@router.register("issue_comment", "created")
def queue_commands(payload: Payload) -> Decision:
    issue = require(payload, "issue")
    comment = require(payload, "comment")
    if not issue.get("pull_request"):
        return Ignored("a comment on an issue, not on a pull request")
    author = comment.get("user") or {}
    if author.get("type") == "Bot":  # our own replies and other bots: never a command, never a loop
        return Ignored("a bot's comment")
    body = str(comment.get("body") or "")
    if not parse_commands(body):
        return Ignored("no /triage command")
    return Job("command", installation_id(payload), {
        "repository": repository(payload), "number": int(require(payload, "issue", "number")),
        "comment_id": int(require(payload, "comment", "id")), "author": str(require(author, "login")),
        "body": body})
