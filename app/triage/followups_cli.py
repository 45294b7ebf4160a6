"""`prtriage followups`: the references of a pull request (prerequisites, promised follow-ups, reverts ...)
from its event payload's title and body and from the commits and lines its diff adds in a local
repository, each resolved through the API when `GITHUB_TOKEN` is set; the App's blocking rule decides the
exit status. Nothing is checked out: the diff and the commits are read from git objects."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.analysis.core.model import Finding
from app.analysis.core.policy import Policy, builtin_policy, load_policy, parse_policy
from app.analysis.followups.diffrefs import added_lines, diff_texts
from app.analysis.followups.followup_findings import Resolution, followup_findings
from app.analysis.followups.followups import TextReference, find_references
from app.analysis.followups.references import Text, within_budget
from app.analysis.verdict.workflow_commands import annotation, append_step_summary, command, escape_data
from app.config import UsageError
from app.github.client import TokenClient
from app.github.errors import GitHubError
from app.github.reference_states import ResolutionCache, resolve_references, web_host, with_commits_resolved
from app.github.retry import RetryPolicy
from app.trees.gitrepo import commit_messages, diff_of, file_at, github_slug, resolve

EXIT_OK, EXIT_BLOCKING, EXIT_CANNOT_RUN = 0, 1, 3  # as everywhere (INTERFACES.md); bad usage raises
DEFAULT_API_URL = "https://api.github.com"
REPO_POLICY = ".github/pr-triage.yml"
# a terminal is waiting: a few quick retries, and no rate-limit wait longer than a minute
CLI_RETRIES = RetryPolicy(attempts=3, backoff_max=5.0, max_rate_limit_wait=60.0)


@dataclass(frozen=True)
class PullEvent:
    """What a `pull_request` event says of its pull request."""

    repository: str  # owner/name of the base repository
    number: int
    title: str
    body: str
    base_sha: str | None
    head_sha: str | None


@dataclass(frozen=True)
class Outcome:
    references: list[TextReference]
    resolutions: dict[str, Resolution]
    findings: list[Finding]
    unresolved: str  # why states are unknown ("" when they were asked)


def run(args: argparse.Namespace) -> int:
    """The command; its exit status."""
    event = read_event(args.event)
    if args.repo is None and (args.base or args.head):
        raise UsageError("followups: --base and --head go with --repo")
    if args.repo is None and event is None:
        raise UsageError("followups: give --repo PATH --base REV --head REV, or --event FILE (or set "
                         "GITHUB_EVENT_PATH)")
    owner, name = repository_of(event, args.repo)
    texts, base = _texts(args, event)
    if note := within_budget(texts).note:
        print(f"prtriage: not everything was read: {note}", file=sys.stderr)
    api_url = os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
    references = find_references(texts, owner=owner, repo=name, number=event.number if event else 0,
                                 web_hosts=[web_host(api_url)])
    policy = policy_of(args.repo, base, owner, name)
    outcome = resolve_states(references, policy, api_url=api_url, own=event.number if event else 0)
    if args.format == "json":
        sys.stdout.write(json.dumps(followups_json(outcome), indent=2) + "\n")
    elif args.format == "github":
        sys.stdout.write(followups_github(outcome))
        append_step_summary(followups_markdown(outcome))
    else:
        sys.stdout.write(followups_text(outcome))
    if outcome.unresolved and os.environ.get("GITHUB_TOKEN"):
        print(f"prtriage: cannot resolve the references: {outcome.unresolved}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    return EXIT_BLOCKING if any(f.severity == "blocking" for f in outcome.findings) else EXIT_OK


def _texts(args: argparse.Namespace, event: PullEvent | None) -> tuple[list[Text], str | None]:
    """The texts to read (title and body, commit messages, the diff's added lines); the base sha."""
    texts = [Text("title", event.title), Text("body", event.body)] if event else []
    if args.repo is None:
        return texts, None
    base_rev = args.base or (event.base_sha if event else None)
    head_rev = args.head or (event.head_sha if event else None)
    if not (base_rev and head_rev):
        raise UsageError("followups: --repo needs --base and --head (or an event that names them)")
    repo = args.repo.resolve()
    base, head = resolve(repo, base_rev), resolve(repo, head_rev)
    texts += [Text("commit", message) for message in commit_messages(repo, base, head)]
    texts += diff_texts(added_lines(diff_of(repo, base, head)))
    return texts, base


def read_event(explicit: Path | None) -> PullEvent | None:
    """The pull request of --event, else of $GITHUB_EVENT_PATH; a defaulted event of another kind (a
    push's) is no pull request, and is left alone."""
    defaulted = os.environ.get("GITHUB_EVENT_PATH")
    path = explicit or (Path(defaulted) if defaulted else None)
    if path is None:
        return None
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read the event: {exc}") from None
    pull = payload.get("pull_request") if isinstance(payload, dict) else None
    if not isinstance(pull, dict):
        if explicit is None:
            print(f"prtriage: {path}: not a pull_request event; reading the diff alone", file=sys.stderr)
            return None
        raise UsageError(f"{path}: not a pull_request event (no \"pull_request\" object)")
    return _pull_event(path, payload, pull)


def _pull_event(path: Path, payload: Mapping[str, Any], pull: Mapping[str, Any]) -> PullEvent:
    try:
        base, head = pull.get("base") or {}, pull.get("head") or {}
        repository = (payload.get("repository") or {}).get("full_name") or base["repo"]["full_name"]
        return PullEvent(repository=str(repository), number=int(pull["number"]), title=str(pull.get("title")
                         or ""), body=str(pull.get("body") or ""), base_sha=base.get("sha"),
                         head_sha=head.get("sha"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path}: not a pull_request event: missing or bad {exc}") from None


def repository_of(event: PullEvent | None, repo: Path | None) -> tuple[str, str]:
    """owner/name whose `#N` the texts mean: the event's, else $GITHUB_REPOSITORY (set in GitHub
    Actions), else the GitHub repository `origin` of --repo points at."""
    named = event.repository if event else os.environ.get("GITHUB_REPOSITORY")
    if named:
        owner, slash, name = named.partition("/")
        if not (owner and slash and name):
            raise UsageError(f"not a GitHub repository name: {named!r} (owner/name)")
        return owner, name
    slug = github_slug(repo) if repo is not None else None
    if slug is None:
        raise UsageError("followups: which GitHub repository do `#N` references name? Give --event, set "
                         "GITHUB_REPOSITORY=owner/name, or use a clone whose origin is on github.com")
    return slug


def policy_of(repo: Path | None, base: str | None, owner: str, name: str) -> Policy:
    """The policy that judges the PR: the base revision's own, else the built-in one for the repository
    (only its `followups` levels matter here)."""
    text = file_at(repo, base, REPO_POLICY) if repo is not None and base is not None else None
    if text is not None:
        return parse_policy(text, f"{base}:{REPO_POLICY}")
    return load_policy(builtin_policy(owner, name))


def resolve_states(references: Sequence[TextReference], policy: Policy, *, api_url: str, own: int) -> Outcome:
    """REFERENCES resolved through the API when GITHUB_TOKEN is set, and the findings the App would make."""
    token = os.environ.get("GITHUB_TOKEN")
    if not token:
        return Outcome(list(references), {}, [], "GITHUB_TOKEN is not set")
    client = TokenClient(token, api_url=api_url, policy=CLI_RETRIES)
    try:
        resolved = with_commits_resolved(client, references, number=own)
        resolutions = resolve_references(client, resolved, cache=ResolutionCache())
    except (GitHubError, ValueError) as exc:
        return Outcome(list(references), {}, [], str(exc))
    finally:
        client.close()
    return Outcome(resolved, resolutions, followup_findings(resolved, resolutions, policy.followups), "")


def _state(outcome: Outcome, reference: TextReference) -> str:
    by_target = {target.lower(): resolution for target, resolution in outcome.resolutions.items()}
    found = by_target.get(reference.target.lower())
    return found.state if found is not None else "unknown"


def followups_json(outcome: Outcome) -> dict[str, Any]:
    return {"references": [{"target": r.target, "kind": r.kind, "source": r.source, "path": r.path,
                            "line": r.line, "sentence": r.sentence, "state": _state(outcome, r)}
                           for r in outcome.references]}


def followups_text(outcome: Outcome) -> str:
    lines = []
    for reference in outcome.references:
        where = reference.where or reference.source
        lines.append(f"{reference.kind:<12} {reference.target}  {_state(outcome, reference)}  {where}")
        lines.append(f"  “{reference.sentence}”")
    counts = {kind: sum(r.kind == kind for r in outcome.references)
              for kind in ("prerequisite", "followup", "revert", "closes", "mention")}
    lines.append(f"{len(outcome.references)} references: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    if outcome.unresolved:
        lines.append(f"states unknown: {outcome.unresolved}")
    lines += [f"{finding.severity}: {finding.message}" for finding in outcome.findings]
    return "\n".join(lines) + "\n"


PROMISES = ("prerequisite", "followup", "revert")  # the kinds a reader must see; mentions and closes are not


def followups_github(outcome: Outcome) -> str:
    """GitHub workflow commands: the findings the App would make, each on its line (a blocking unmerged
    prerequisite is an error); without states, each promise as a notice on the line that makes it."""
    lines = [annotation(finding) for finding in outcome.findings]
    if outcome.unresolved:
        for reference in (r for r in outcome.references if r.kind in PROMISES):
            lines.append(command("notice", f"{reference.kind} {reference.target}: {reference.sentence}",
                                 file=reference.path, line=reference.line,
                                 title=f"prtriage: {reference.kind} (state unknown)"))
    counts = ", ".join(f"{sum(r.kind == kind for r in outcome.references)} {kind}" for kind in PROMISES)
    lines.append(escape_data(f"follow-ups: {len(outcome.references)} references ({counts})"
                             + (f"; states unknown: {outcome.unresolved}" if outcome.unresolved else "")))
    return "\n".join(lines) + "\n"


def followups_markdown(outcome: Outcome) -> str:
    """The step summary: the promises of the pull request, where each is made and its state."""
    promises = [r for r in outcome.references if r.kind in PROMISES]
    lines = ["### Follow-ups", ""]
    if not promises:
        return "\n".join([*lines, "No prerequisite, follow-up or revert.", ""])
    lines += ["| kind | target | state | where | sentence |", "| --- | --- | --- | --- | --- |"]
    for reference in promises:
        cells = (reference.kind, reference.target, _state(outcome, reference),
                 reference.where or reference.source, reference.sentence)
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    lines += [""] + [f"- **{finding.severity}**: {_cell(finding.message)}" for finding in outcome.findings]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text of the pull request inside a markdown table: no row break, no column break, no markup."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
