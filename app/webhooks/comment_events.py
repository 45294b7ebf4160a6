"""PR comments: a new comment with a line that starts like a `/triage` command queues its commands (the job
parses the comment as Markdown); the App's own comments, other bots', comments on issues and comments
without such a line are ignored here, before any work."""

from __future__ import annotations

from app.triage.command_parser import may_hold_commands
from app.triage.job_payloads import CommandJob
from app.webhooks.payloads import IssueCommentEvent
from app.webhooks.router import Decision, Ignored, Job, PayloadError, Router

router = Router()


@router.register("issue_comment", "created", model=IssueCommentEvent)
def queue_commands(event: IssueCommentEvent) -> Decision:
    comment = event.comment
    if not event.issue.pull_request:
        return Ignored("a comment on an issue, not on a pull request")
    if comment.user is not None and comment.user.type == "Bot":  # our own replies and other bots: no loop
        return Ignored("a bot's comment")
    body = comment.body or ""
    if not may_hold_commands(body):  # the worker parses it (app/triage/command_runner.py)
        return Ignored("no /triage command")
    if comment.user is None or comment.user.login is None:
        raise PayloadError("payload lacks comment.user.login")
    return Job.of(CommandJob(event.installation_id, event.repository.ref(), event.issue.number, comment.id,
                             comment.user.login, body))
