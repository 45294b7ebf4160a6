"""One pull request's triage, as plain calls between the rooms: GitHub adapter, analysis engine, store and
report. Two queue jobs make it:

- `process_delivery(guid)`: the delivery's job. For a triage it reads the PR, records it and starts a run
  for its head, which supersedes the PR's older runs (their check runs are completed `cancelled`); it
  returns the runs to triage.
- `triage_run(run_id)`: under the PR's lock, the check run in progress, then the policy from the BASE sha,
  the file list (no validation path touched: success from the list alone), the two source trees, the
  sandboxed analysis, and the results stored and posted. Whatever fails, the check run is completed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from app.analysis.core.model import MAX_LEARNED, Finding, checked_imports
from app.analysis.core.policy import Policy, PolicyError
from app.analysis.verdict.render import report_json
from app.analysis.verdict.report import CheckReport
from app.engine.check_steps import AnalysisError, Progress, analysed_because, run_check
from app.github import (
    Annotation,
    GitHubClient,
    GitHubError,
    PullInfo,
    TarballRefused,
    cancel_check_run,
    complete_check_run,
    create_check_run,
    download_tree,
    note_check_run,
    upsert_sticky_comment,
)
from app.github.comments import find_sticky_comment, sticky_body
from app.service.services import Services
from app.store.models import Conclusion, PullRequest
from app.store.queries import (
    fail_run,
    finish_run,
    get_delivery,
    get_run,
    has_installation,
    is_current,
    last_validation_imports,
    latest_run,
    mark_delivery,
    mark_repository_removed,
    mark_running,
    open_pull_numbers_at,
    pull_request_head,
    pull_request_of_run,
    run_for_check_run,
    start_run,
    upsert_installation,
    upsert_pull_request,
    upsert_repository,
)
from app.store.session import session_scope
from app.store.windows import SYSTEM_ACTOR
from app.triage import main_health, risk_windows
from app.triage.base_policy import REPO_POLICY as REPO_POLICY  # where tests and tools look for it
from app.triage.base_policy import policy_applied, policy_at_base
from app.triage.command_runner import PullComment, run_comment
from app.triage.identity import IdentityRefused, check_identity, check_installation
from app.triage.job_payloads import (
    ClosedJob,
    CommandJob,
    InstallationJob,
    JobPayload,
    MainHealthJob,
    RepositoryRef,
    TriageJob,
    from_summary,
)
from app.triage.pr_report import (
    COMMENT_MARKER,
    CheckOutput,
    check_output,
    clear_comment,
    comment_markdown,
    error_output,
    superseded_reason,
)
from app.triage.pr_text_findings import pull_followups, revert_findings, with_findings

log = logging.getLogger(__name__)


class DeliveryNotVisible(Exception):
    """The delivery's row is not committed (yet): the intake's transaction is still open or rolled back."""


class PullRequestBusy(Exception):
    """Another worker is triaging this pull request; the job is to be tried again shortly."""


class CheckNotClosed(Exception):
    """A check run could not be completed (GitHub unreachable): it must be closed later, not left hanging."""

    def __init__(self, installation_id: int, owner: str, repo: str, check_run_id: int, reason: str) -> None:
        super().__init__(f"check run {check_run_id} of {owner}/{repo} left open: {reason}")
        self.installation_id, self.owner, self.repo = installation_id, owner, repo
        self.check_run_id, self.reason = check_run_id, reason


@dataclass(frozen=True)
class RunTarget:
    """What a triage job needs to know of its run, read from the store."""

    run_id: int
    pr_id: int
    installation_id: int
    owner: str
    repo: str
    number: int
    head_sha: str
    base_sha: str
    check_run_id: int | None


# The delivery's job


def process_delivery(services: Services, guid: str, *, final: bool = True) -> list[int]:
    """Run the delivery's job once; the triage runs it started. A delivery already handled is left alone.

    A failure marks the delivery failed when FINAL, else it is raised for the queue to try again.
    """
    with session_scope(services.sessions, read_only=True) as session:
        delivery = get_delivery(session, guid=guid)
        if delivery is None:
            raise DeliveryNotVisible(guid)
        if delivery.status != "queued":
            return []
        stored = dict(delivery.payload_summary)
    with services.leases.delivery(services.writing, guid) as claimed:
        if not claimed:  # done meanwhile, or a live job has it (a second message for one delivery)
            return []
        return _run_job(services, guid, stored, final=final)


def _run_job(services: Services, guid: str, stored: dict[str, Any], *, final: bool) -> list[int]:
    try:
        return _dispatch(services, guid, from_summary(stored))
    except IdentityRefused as exc:  # not retried: the ids will disagree again
        with services.writing() as session:
            mark_delivery(session, guid=guid, status="failed", error=f"refused: {exc}")
        return []
    except Exception as exc:
        if not final:
            raise
        log.exception("delivery %s: %s job failed", guid, stored.get("job"))
        with services.writing() as session:
            mark_delivery(session, guid=guid, status="failed", error=describe(exc))
        return []


def _dispatch(services: Services, guid: str, job: JobPayload) -> list[int]:
    match job:
        case TriageJob():
            return _triage_job(services, guid, job)
        case ClosedJob():
            return _closed_job(services, guid, job)
        case CommandJob():
            return _command_job(services, guid, job)
        case InstallationJob():
            return _installation_job(services, guid, job)
        case MainHealthJob():
            return _main_health_job(services, guid, job)


def _record_repository(session: Session, repository: RepositoryRef, installation_id: int) -> None:
    if not has_installation(session, installation_id=installation_id):
        upsert_installation(session, installation_id=installation_id, account_login=repository.owner_repo[0])
    upsert_repository(session, repository_id=repository.id, full_name=repository.full_name,
                      private=repository.private, installation_id=installation_id)


def _record_pull(session: Session, repository_id: int, pull: PullInfo) -> PullRequest:
    return upsert_pull_request(
        session, repository_id=repository_id, number=pull.number, title=pull.title, author=pull.author,
        url=pull.url, head_sha=pull.head_sha, base_sha=pull.base_sha, base_ref=pull.base_ref,
        state="open" if pull.state == "open" else "closed", draft=pull.draft, merged_at=pull.merged_at,
        body=pull.body, github_id=pull.github_id)


def _installation_of(services: Services, job: TriageJob | ClosedJob | CommandJob | MainHealthJob) -> int:
    """The installation of a delivery; a repository webhook's has none, so ask GitHub."""
    if job.installation_id is not None:
        return job.installation_id
    return services.github.installation_for(*job.repository.owner_repo)


def _covered(session: Session, pr: PullRequest, pull: PullInfo, job: TriageJob) -> bool:
    """Whether a run already judges (or will judge) this head on this base: then no new run is started."""
    latest = latest_run(session, pr_id=pr.id)
    if latest is None or latest.head_sha != pull.head_sha or latest.base_sha != pull.base_sha:
        return False
    if latest.status in ("queued", "running"):
        return True
    # a push event that arrives after a later push was already triaged
    return job.reason == "synchronize" and job.head_sha != pull.head_sha and latest.status != "superseded"


def _numbers(services: Services, session: Session, job: TriageJob) -> list[int] | None:
    """The PRs a triage job is about; None when the delivery is not for us (another App's check)."""
    numbers = list(job.numbers)
    if job.app_id not in (None, services.settings.github_app_id):
        return None
    if job.check_run_id is not None:
        run = run_for_check_run(session, check_run_id=job.check_run_id)
        if run is None:
            return None
        return numbers or [run.pull_request.number]
    if not numbers and job.head_sha:
        # a check suite of a fork's push lists no PR: the open ones at that head
        numbers = open_pull_numbers_at(session, repository_id=job.repository.id, head_sha=job.head_sha)
    return numbers


def _triage_job(services: Services, guid: str, job: TriageJob) -> list[int]:
    owner, name = job.repository.owner_repo
    with session_scope(services.sessions, read_only=True) as session:
        numbers = _numbers(services, session, job)
    if numbers is None:
        with services.writing() as session:
            mark_delivery(session, guid=guid, status="ignored", error="not a check of this App")
        return []
    installation_id = _installation_of(services, job)
    client = services.client(installation_id)
    pulls = [client.get_pull(owner, name, number) for number in numbers]
    check_identity(services, repository=job.repository, installation_id=installation_id, pulls=pulls)
    started, cancels = [], []
    with services.writing() as session:
        _record_repository(session, job.repository, installation_id)
        for pull in pulls:
            pr = _record_pull(session, job.repository.id, pull)
            if pull.state != "open" or _covered(session, pr, pull, job):
                continue
            begun = start_run(session, pr=pr, head_sha=pull.head_sha, base_sha=pull.base_sha)
            started.append(begun.run.id)
            cancels += [(run.check_run_id, pull.head_sha) for run in begun.superseded if run.check_run_id]
        mark_delivery(session, guid=guid, status="processed")
    for check_run_id, newer in cancels:
        _cancel(client, owner, name, check_run_id, superseded_reason(newer))
    return started


def _cancel(client: GitHubClient, owner: str, repo: str, check_run_id: int, reason: str) -> None:
    try:
        cancel_check_run(client, owner, repo, check_run_id, reason=reason)
    except GitHubError as exc:  # its own job completes it as cancelled when it sees it superseded
        log.warning("check run %d: could not cancel: %s", check_run_id, exc)


def _closed_job(services: Services, guid: str, job: ClosedJob) -> list[int]:
    owner, name = job.repository.owner_repo
    installation_id = _installation_of(services, job)
    client = services.client(installation_id)
    pull = client.get_pull(owner, name, job.number)
    check_identity(services, repository=job.repository, installation_id=installation_id, pulls=[pull])
    with services.writing() as session:
        _record_repository(session, job.repository, installation_id)
        pr_id = _record_pull(session, job.repository.id, pull).id
    if pull.merged or pull.merged_at is not None:  # before the delivery is done: a failure retries it
        risk_windows.handle_merge(services, client, pr_id=pr_id, owner=owner, repo=name, pull=pull,
                                  actor=job.actor or SYSTEM_ACTOR)
    with services.writing() as session:
        mark_delivery(session, guid=guid, status="processed")
    return []


def _command_job(services: Services, guid: str, job: CommandJob) -> list[int]:
    """`/triage` commands of a PR comment; the triage runs a rerun started."""
    installation_id = _installation_of(services, job)
    comment = PullComment.from_command(job, installation_id)
    runs = run_comment(services, services.client(installation_id), comment)
    with services.writing() as session:
        mark_delivery(session, guid=guid, status="processed")
    return runs


def _main_health_job(services: Services, guid: str, job: MainHealthJob) -> list[int]:
    """A push to the default branch: its health, done in the delivery's job (a failure retries it)."""
    installation_id = _installation_of(services, job)
    with services.writing() as session:
        _record_repository(session, job.repository, installation_id)
    main_health.check_push(services, repository_id=job.repository.id, branch=job.branch,
                           head_sha=job.head_sha, before_sha=job.before_sha, commits=job.commits)
    with services.writing() as session:
        mark_delivery(session, guid=guid, status="processed")
    return []


def _installation_job(services: Services, guid: str, job: InstallationJob) -> list[int]:
    stale = check_installation(services, job)
    with services.writing() as session:
        upsert_installation(session, installation_id=job.installation_id, account_login=job.account_login,
                            account_type=job.account_type, state=job.state)
        for listed, removed in ((job.added, False), (job.removed, True)):
            for repo in listed:
                if repo.id in stale:  # another installation's now: its row is not this delivery's
                    continue
                if not repo.full_name:  # removed, and GitHub left its name out
                    mark_repository_removed(session, repository_id=repo.id)
                    continue
                upsert_repository(session, repository_id=repo.id, full_name=repo.full_name,
                                  private=repo.private, installation_id=job.installation_id, removed=removed)
        mark_delivery(session, guid=guid, status="processed")
    return []


# The triage of one run


def _target(services: Services, run_id: int) -> RunTarget | None:
    """The run's target, or None when the run is no longer queued or running (done, failed, superseded)."""
    with session_scope(services.sessions, read_only=True) as session:
        run = get_run(session, run_id=run_id)
        if run is None or run.status not in ("queued", "running"):
            return None
        pr = run.pull_request
        repository = pr.repository
        if repository.installation_id is None:
            raise LookupError(f"run {run_id}: {repository.full_name} has no installation")
        owner, _, name = repository.full_name.partition("/")
        return RunTarget(run_id=run.id, pr_id=pr.id, installation_id=repository.installation_id, owner=owner,
                         repo=name, number=pr.number, head_sha=run.head_sha, base_sha=run.base_sha,
                         check_run_id=run.check_run_id)


def triage_run(services: Services, run_id: int) -> None:
    """Triage the run, unless it is done or superseded; PullRequestBusy while another worker has its PR."""
    if _target(services, run_id) is None:
        return
    held = services.locks.try_acquire(_pr_of(services, run_id))
    if held is None:
        raise PullRequestBusy(f"run {run_id}: its pull request is being triaged by another worker")
    try:
        target = _target(services, run_id)  # again, under the lock: the other worker may have superseded it
        if target is None:
            return
        with services.leases.run(services.writing, run_id):
            _triage_locked(services, services.client(target.installation_id), target)
    finally:
        held.release()


def _pr_of(services: Services, run_id: int) -> int:
    with session_scope(services.sessions, read_only=True) as session:
        return pull_request_of_run(session, run_id=run_id)


def _triage_locked(services: Services, client: GitHubClient, target: RunTarget) -> None:
    """From here on, the check run exists: every way out completes it (or leaves the run `running` for the
    sweep to take over and complete, when the database itself fails)."""
    started = time.monotonic()
    # a run taken over from a dead worker reports to the check run that worker created
    check_run_id = target.check_run_id or create_check_run(
        client, target.owner, target.repo, name=services.settings.check_name, head_sha=target.head_sha,
        external_id=f"prtriage-run-{target.run_id}", title="Triage in progress",
        summary=f"Replaying the CI suites through the validation code of base `{target.base_sha[:7]}` and "
                f"head `{target.head_sha[:7]}`.")
    conclusion = "error"
    try:
        with services.writing() as session:
            run = mark_running(session, run_id=target.run_id, check_run_id=check_run_id)
            status, newer = run.status, run.superseded_by
        if status == "superseded":
            _cancel(client, target.owner, target.repo, check_run_id, superseded_reason(newer))
            conclusion = "cancelled"
            return
        report = analyse(services, client, target, progress=_progress_note(client, target, check_run_id))
        conclusion = _publish(services, client, target, check_run_id, report)
    except CheckNotClosed as unclosed:
        _record_failure(services, target.run_id, f"the check run could not be completed: {unclosed.reason}")
        raise
    except Exception as exc:
        reason = describe(exc)
        log.warning("run %d of %s/%s#%d: %s", target.run_id, target.owner, target.repo, target.number, reason,
                    exc_info=not isinstance(exc, AnalysisError | PolicyError | TarballRefused | GitHubError))
        try:
            _complete(client, target, check_run_id, error_output(reason))
        finally:
            _record_failure(services, target.run_id, reason)
    finally:
        services.metrics.triage_seconds.observe(time.monotonic() - started, conclusion=conclusion)


def _record_failure(services: Services, run_id: int, reason: str) -> None:
    """Mark the run failed; if the database cannot, the run stays `running` and the sweep retries it."""
    try:
        with services.writing() as session:
            fail_run(session, run_id=run_id, error=reason)
    except Exception:
        log.exception("run %d: its failure could not be recorded", run_id)


def _complete(client: GitHubClient, target: RunTarget, check_run_id: int, output: CheckOutput) -> None:
    """Complete the check run; CheckNotClosed when GitHub will not have it (the queue closes it later)."""
    specs = [Annotation(path=spec.path, start_line=spec.line, end_line=spec.line, annotation_level=spec.level,
                        message=spec.message, title=spec.title, raw_details=spec.raw_details)
             for spec in output.annotations]
    try:
        complete_check_run(client, target.owner, target.repo, check_run_id, conclusion=output.conclusion,
                           title=output.title, summary=output.summary, text=output.text, annotations=specs,
                           actions=output.actions)
    except GitHubError as exc:
        raise CheckNotClosed(target.installation_id, target.owner, target.repo, check_run_id,
                             str(exc)) from exc


def close_check_run(services: Services, *, installation_id: int, owner: str, repo: str, check_run_id: int,
                    reason: str) -> None:
    """Complete a check run that could not be completed at the end of its job, action_required with REASON."""
    output = error_output(f"its result could not be posted ({reason})")
    complete_check_run(services.client(installation_id), owner, repo, check_run_id,
                       conclusion=output.conclusion, title=output.title, summary=output.summary,
                       actions=output.actions)


def _progress_note(client: GitHubClient, target: RunTarget, check_run_id: int) -> Progress:
    """The check run says when the analysis environment is being built: the first run of a policy with
    torch in it takes minutes there, and must not look stuck."""
    def note(step: str, done: int, total: int, what: str) -> None:
        if step == "environment" and done == 0:
            note_check_run(client, target.owner, target.repo, check_run_id,
                           title="Preparing the analysis environment",
                           summary=f"{what[:1].upper()}{what[1:]}: built once, then reused by every check.")

    return note


def analyse(services: Services, client: GitHubClient, target: RunTarget,
            progress: Progress | None = None) -> CheckReport:
    """The report of the run's head against its base: from the file list alone when it touches no
    validation path, else from both source trees through the sandboxed engine; plus the findings of the
    PR's text (unmerged prerequisites and follow-ups, what a revert re-opens or fixes)."""
    pull = client.get_pull(target.owner, target.repo, target.number)
    policy, origin = policy_at_base(client, target.owner, target.repo, target.base_sha)
    # the matrix is captured at the head: the policy's globs name today's layout, the head's may be older
    policy, origin = policy_applied(client, target.owner, target.repo, policy, origin, target.head_sha)
    report = replace(_validation_report(services, client, target, pull, policy, progress), policy=origin)
    return with_findings(report, _text_findings(services, client, target, pull, policy))


def _text_findings(services: Services, client: GitHubClient, target: RunTarget, pull: PullInfo,
                   policy: Policy) -> list[Finding]:
    try:
        references, findings = pull_followups(client, target.owner, target.repo, pull, policy,
                                              api_url=services.settings.github_api_url)
    except GitHubError as exc:  # the validation verdict stands without them
        log.warning("run %d: follow-ups not read: %s", target.run_id, exc)
        return [Finding(kind="pending_followup", severity="info",
                        message=f"The follow-ups in this PR's text could not be checked: {exc}")]
    with session_scope(services.sessions, read_only=True) as session:
        return findings + revert_findings(session, references)


def _validation_report(services: Services, client: GitHubClient, target: RunTarget, pull: PullInfo,
                       policy: Policy, progress: Progress | None) -> CheckReport:
    files = client.list_files(target.owner, target.repo, target.number)
    listed_all = len(files) >= pull.changed_files  # GitHub lists at most 3000 files
    if listed_all and pull.head_sha == target.head_sha:
        learned = learned_at_base(services, target)
        if analysed_because(policy, tuple(files), learned) is None:
            return CheckReport(target.base_sha, target.head_sha, validation_changed=False,
                               changed_paths=tuple(files), learned_paths=learned)
    base_sha = compared_base(client, target)
    base_tree = download_tree(client, target.owner, target.repo, base_sha, services.trees_dir)
    head_tree = download_tree(client, target.owner, target.repo, target.head_sha, services.trees_dir)
    return run_check(base_tree, head_tree, policy, base_sha=base_sha, head_sha=target.head_sha,
                     cache_dir=services.settings.cache_dir, allow_unsandboxed=False,
                     repository=f"{target.owner}/{target.repo}", progress=progress)


def learned_at_base(services: Services, target: RunTarget) -> frozenset[str] | None:
    """The modules validation imported at the last analysis of the pull request's base branch (None when
    no analysis stored them): the fast path decides from them without downloading the head."""
    with session_scope(services.sessions, read_only=True) as session:
        stored = last_validation_imports(session, pr_id=target.pr_id)
    if stored is None:
        return None
    try:
        return frozenset(checked_imports(stored, MAX_LEARNED))
    except ValueError as exc:
        log.warning("run %d: the stored validation imports are not believed: %s", target.run_id, exc)
        return None


def compared_base(client: GitHubClient, target: RunTarget) -> str:
    """The revision the head is compared with: the merge base of the base sha and the head, so that what
    landed on the base branch after the PR branched off is not taken for the PR's own change. When GitHub
    cannot name one (404 for unrelated histories, or no answer), the base sha itself, with a warning.
    The policy is not read here: it always comes from the base sha (policy_at_base)."""
    try:
        return client.merge_base(target.owner, target.repo, target.base_sha, target.head_sha)
    except GitHubError as exc:
        log.warning("run %d of %s/%s#%d: no merge base of %s and %s (%s); comparing with the base sha",
                    target.run_id, target.owner, target.repo, target.number, target.base_sha[:12],
                    target.head_sha[:12], exc)
        return target.base_sha


def _publish(services: Services, client: GitHubClient, target: RunTarget, check_run_id: int,
             report: CheckReport) -> Conclusion:
    """Post the report unless a newer run took over meanwhile, then store it; the check's conclusion.

    GitHub first, the store last: a worker that dies in between leaves the run `running`, and the job that
    takes it over posts the same result again (an unchanged comment is not re-sent).
    """
    with session_scope(services.sessions, read_only=True) as session:
        current = is_current(session, run_id=target.run_id)
        newer = pull_request_head(session, pr_id=target.pr_id)
    output = check_output(report)
    if not current:  # a late result for an old head is never posted over the newer one
        _cancel(client, target.owner, target.repo, check_run_id, superseded_reason(newer))
        _store(services, target, report, "cancelled")
        return "cancelled"
    _post_comment(client, target, report)
    if not (target.check_run_id is not None and _completed(services, client, target, check_run_id)):
        _complete(client, target, check_run_id, output)
    _store(services, target, report, output.conclusion)
    return output.conclusion


def _completed(services: Services, client: GitHubClient, target: RunTarget, check_run_id: int) -> bool:
    """Whether a run taken over from a dead worker had its check run completed already (the worker died
    between completing it and storing the result): the same verdict is not posted twice."""
    runs = client.list_check_runs(target.owner, target.repo, target.head_sha,
                                  check_name=services.settings.check_name)
    return any(run.id == check_run_id and run.status == "completed" for run in runs)


def _post_comment(client: GitHubClient, target: RunTarget, report: CheckReport) -> None:
    login = client.app_login()
    if report.validation_changed or report.findings:  # follow-up findings are worth a comment too
        upsert_sticky_comment(client, target.owner, target.repo, target.number, comment_markdown(report),
                              marker=COMMENT_MARKER, app_login=login)
        return
    # no validation path touched: no comment, but one that said otherwise must not stay
    comments = client.list_issue_comments(target.owner, target.repo, target.number)
    existing = find_sticky_comment(comments, marker=COMMENT_MARKER, app_login=login)
    if existing is None:
        return
    text = sticky_body(clear_comment(head_sha=target.head_sha, changed_files=len(report.changed_paths)),
                       marker=COMMENT_MARKER)
    if existing.body != text:
        client.update_issue_comment(target.owner, target.repo, existing.id, text)


def _store(services: Services, target: RunTarget, report: CheckReport, conclusion: Conclusion) -> None:
    """Store the run's results. Posted but not stored (the database failed): the run stays `running`, and
    the sweep's re-run stores them (the comment is not re-sent unchanged, the check run is completed again
    with the same output)."""
    document = report_json(report)
    suites = document.pop("suites")
    timing = document.pop("timing")
    try:
        with services.writing() as session:
            finish_run(session, run_id=target.run_id, conclusion=conclusion, summary=document, suites=suites,
                       findings=[f.to_json() for f in report.findings], timing=timing)
    except Exception:
        log.exception("run %d: its results could not be stored", target.run_id)


def describe(exc: BaseException) -> str:
    """Why a job failed, in words fit for a check run: no traceback, no internal object, no secret."""
    if isinstance(exc, PolicyError):
        return f"invalid policy: {exc}"
    if isinstance(exc, TarballRefused):
        return f"the source archive was refused: {exc}"
    if isinstance(exc, GitHubError):
        return f"GitHub did not answer as expected: {exc}"
    if isinstance(exc, AnalysisError):
        return str(exc)
    return f"internal error ({type(exc).__name__}); the service log has the details"
