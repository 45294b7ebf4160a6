"""Carrying out the `/triage` commands of a PR comment (parsed by commands.py) and answering each: a
reaction when it is done, a short reply when something needs saying (help, a refusal, nothing to do).

Who may do what: `ack` and `close-window` need write permission on the repository (GitHub says who has
it; the comment's author_association does not tell write from triage). `rerun` is for the PR's author
and writers: it costs a sandboxed analysis.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.github import (
    GitHubError,
    cancel_check_run,
    complete_check_run,
    create_check_run,
    post_reply,
)
from app.github.client import GitHubClient
from app.github.github_models import PullInfo
from app.service.services import Services
from app.store.models import Finding, PullRequest, TriageRun
from app.store.queries import (
    acknowledge_findings,
    acknowledge_run,
    close_window,
    has_installation,
    latest_run,
    pull_request_by_id,
    pull_request_of,
    start_run,
    upsert_installation,
    upsert_pull_request,
    upsert_repository,
    windows_of_pull_request,
)
from app.store.session import session_scope
from app.triage.command_parser import HELP, PREFIX, Command, Invalid, parse_commands
from app.triage.identity import check_identity
from app.triage.job_payloads import CommandJob, RepositoryRef
from app.triage.pr_report import RERUN_BUTTON, superseded_reason

log = logging.getLogger(__name__)

WRITERS = ("admin", "maintain", "write")  # GitHub's legacy permission reads maintain as write already
DONE, QUEUED, PUZZLED = "+1", "rocket", "confused"
_TITLE_CHARS = 200  # a check run's title is one line on the PR page


@dataclass(frozen=True)
class PullComment:
    """What carrying out a comment's commands needs of its `issue_comment` delivery."""

    installation_id: int
    repository: dict[str, Any]  # id, full_name, private
    number: int
    comment_id: int
    author: str
    body: str

    @classmethod
    def from_command(cls, job: CommandJob, installation_id: int) -> PullComment:
        """From the job of app/webhooks/comment_events.py, with its installation (asked of GitHub when the
        delivery named none)."""
        return cls(installation_id, job.repository.to_json(), job.number, job.comment_id, job.author,
                   job.body)

    @classmethod
    def from_job(cls, installation_id: int, data: dict[str, Any]) -> PullComment:
        """From the job's data as JSON (`Job.data`)."""
        return cls.from_command(CommandJob.from_data(installation_id, data), installation_id)

    @property
    def owner_repo(self) -> tuple[str, str]:
        owner, _, name = str(self.repository["full_name"]).partition("/")
        return owner, name


@dataclass
class Answer:
    reaction: str | None = None
    reply: str | None = None
    runs: list[int] = field(default_factory=list)  # triage runs to queue


def run_comment(services: Services, client: GitHubClient, comment: PullComment) -> list[int]:
    """Carry out and answer each command of the comment; the triage runs it started."""
    runs: list[int] = []
    for command in parse_commands(comment.body):
        answer = _carry_out(services, client, comment, command)
        _send(client, comment, answer)
        runs += answer.runs
    return runs


def _carry_out(services: Services, client: GitHubClient, comment: PullComment,
               command: Command | Invalid) -> Answer:
    if isinstance(command, Invalid):
        return Answer(PUZZLED, f"@{comment.author} {command.problem}. `{PREFIX} help` lists the commands.")
    if command.verb == "help":
        return Answer(reply=HELP)
    # names are labels: the PR GitHub has under this name must be in the repository the delivery's id names
    pull = client.get_pull(*comment.owner_repo, comment.number)
    check_identity(services, repository=RepositoryRef.from_json(comment.repository),
                   installation_id=comment.installation_id, pulls=[pull])
    permission = client.permission(*comment.owner_repo, comment.author)
    if command.verb == "rerun":
        return _rerun(services, client, comment, pull, permission)
    if permission not in WRITERS:
        return Answer(reply=f"Sorry @{comment.author}, `{PREFIX} {command.verb}` needs write permission on "
                            f"{comment.repository['full_name']}; please ask a maintainer to do it.")
    if command.verb == "ack":
        return _ack(services, client, comment, command.reason)
    return _close_windows(services, comment, command)


def _send(client: GitHubClient, comment: PullComment, answer: Answer) -> None:
    owner, name = comment.owner_repo
    if answer.reaction:
        client.add_reaction(owner, name, comment.comment_id, answer.reaction)
    if answer.reply:
        post_reply(client, owner, name, comment.number, answer.reply, in_reply_to=comment.comment_id,
                   app_login=client.app_login())


def _rerun(services: Services, client: GitHubClient, comment: PullComment, pull: PullInfo,
           permission: str) -> Answer:
    owner, name = comment.owner_repo
    if permission not in WRITERS and comment.author.lower() != pull.author.lower():
        return Answer(reply=f"Sorry @{comment.author}, only the PR's author and people with write "
                            f"permission can ask for a new triage.")
    if pull.state != "open":
        return Answer(reply=f"@{comment.author} this PR is closed: there is nothing to triage.")
    with services.writing() as session:
        pr = _record_pull(session, comment, pull)
        begun = start_run(session, pr=pr, head_sha=pull.head_sha, base_sha=pull.base_sha)
        run_id, older = begun.run.id, [run.check_run_id for run in begun.superseded if run.check_run_id]
    for check_run_id in older:  # as a new push does: the older check says what replaced it
        try:
            cancel_check_run(client, owner, name, check_run_id, reason=superseded_reason(pull.head_sha))
        except GitHubError as exc:  # its own job completes it when it sees it superseded
            log.warning("check run %d: could not cancel: %s", check_run_id, exc)
    return Answer(QUEUED, runs=[run_id])


def _record_pull(session: Session, comment: PullComment, pull: PullInfo) -> PullRequest:
    """The PR as GitHub describes it now (a PR commented on before any triage has no row yet)."""
    if not has_installation(session, installation_id=comment.installation_id):
        upsert_installation(session, installation_id=comment.installation_id,
                            account_login=comment.owner_repo[0])
    repository, repository_id = comment.repository, int(comment.repository["id"])
    upsert_repository(session, repository_id=repository_id, full_name=str(repository["full_name"]),
                      private=bool(repository.get("private")), installation_id=comment.installation_id)
    return upsert_pull_request(
        session, repository_id=repository_id, number=pull.number, title=pull.title, author=pull.author,
        url=pull.url, head_sha=pull.head_sha, base_sha=pull.base_sha, base_ref=pull.base_ref, state="open",
        draft=pull.draft, body=pull.body, github_id=pull.github_id)


def _stored_pull(services: Services, comment: PullComment) -> tuple[int | None, str]:
    """The comment's stored PR, by its repository's GitHub id (another repository may have had the name)."""
    with session_scope(services.sessions, read_only=True) as session:
        pr = pull_request_of(session, repository_id=int(comment.repository["id"]), number=comment.number)
        return (pr.id if pr else None), str(comment.repository["full_name"])


def _ack(services: Services, client: GitHubClient, comment: PullComment, reason: str) -> Answer:
    pr_id, _ = _stored_pull(services, comment)
    with services.writing() as session:
        run = latest_run(session, pr_id=pr_id) if pr_id is not None else None
        if run is None or run.status in ("queued", "running"):
            return Answer(reply=f"@{comment.author} there is no finished triage to acknowledge yet.")
        head_sha, unconcluded = run.head_sha, run.conclusion == "action_required"
        if unconcluded:  # recorded before GitHub is told: the command carried out again finds it done
            if not acknowledge_run(session, run_id=run.id, actor=comment.author, reason=reason):
                return Answer(reply=f"@{comment.author} the latest triage was acknowledged already, by "
                                    f"@{run.acknowledged_by}.")
            why = run.error or _health_reason(run) or "the analysis could not conclude"
        else:
            acknowledged = acknowledge_findings(session, run_id=run.id, actor=comment.author, reason=reason)
            findings = [f for f in run.findings if f.severity == "blocking"]
    if unconcluded:
        _post_acknowledged_unconcluded(services, client, comment, head_sha, reason, why)
        return Answer(DONE)
    if not acknowledged:
        return Answer(reply=f"@{comment.author} the latest triage has no unacknowledged blocking finding.")
    _post_acknowledged_check(services, client, comment, head_sha, reason, findings)
    return Answer(DONE)


def _post_acknowledged_unconcluded(services: Services, client: GitHubClient, comment: PullComment,
                                   head_sha: str, reason: str, why: str) -> None:
    """A run that could not conclude (could not analyse, internal error) blocks its required check until a
    writer lets it through: a new check run of the same name on the head says success, who and why."""
    owner, name = comment.owner_repo
    title = f"Not analysed; acknowledged by @{comment.author}: {reason}"[:_TITLE_CHARS]
    summary = (f"@{comment.author} let this head through without an analysis: {reason}\n\n"
               f"Why the triage could not conclude: {why}")
    check_run_id = create_check_run(client, owner, name, name=services.settings.check_name, head_sha=head_sha,
                                    external_id=f"prtriage-ack-{comment.comment_id}", title=title)
    complete_check_run(client, owner, name, check_run_id, conclusion="success", title=title, summary=summary,
                       actions=[RERUN_BUTTON])


def _health_reason(run: TriageRun) -> str | None:
    health = (run.summary or {}).get("health")
    return str(health["reason"]) if isinstance(health, dict) and health.get("reason") else None


def _post_acknowledged_check(services: Services, client: GitHubClient, comment: PullComment, head_sha: str,
                             reason: str, findings: list[Finding]) -> None:
    """A new completed check run of the same name on the head: GitHub judges a required check by the latest
    run of that name, and the original stays in the history."""
    owner, name = comment.owner_repo
    title = f"Blocking findings acknowledged by @{comment.author}"
    summary = "\n".join([f"@{comment.author} acknowledged {len(findings)} blocking "
                         f"finding{'s' * (len(findings) != 1)}: {reason}", "",
                         *[f"- {finding.message}" for finding in findings]])
    check_run_id = create_check_run(client, owner, name, name=services.settings.check_name, head_sha=head_sha,
                                    external_id=f"prtriage-ack-{comment.comment_id}", title=title)
    complete_check_run(client, owner, name, check_run_id, conclusion="success", title=title, summary=summary,
                       actions=[RERUN_BUTTON])


def _close_windows(services: Services, comment: PullComment, command: Command) -> Answer:
    pr_id, full_name = _stored_pull(services, comment)
    closed: list[int] = []
    with services.writing() as session:
        pr = pull_request_by_id(session, pr_id=pr_id) if pr_id is not None else None
        for window in windows_of_pull_request(session, pr_id=pr.id) if pr else []:
            numbers = {ref.target_number for ref in window.awaiting}
            if window.state == "open" and command.window in (None, window.id, *numbers):
                close_window(session, window_id=window.id, actor=comment.author, reason=command.reason)
                closed.append(window.id)
    if not closed:
        which = "" if command.window is None else f" matching #{command.window}"
        return Answer(reply=f"@{comment.author} this PR has no open risk window{which} in {full_name}.")
    return Answer(DONE)
