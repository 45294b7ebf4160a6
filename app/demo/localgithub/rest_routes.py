"""The REST operations the fake answers, one function each, in the shapes of the shared description."""

from __future__ import annotations

import re
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from app.demo.localgithub import rest_shapes
from app.demo.localgithub.state import FakeCheckRun, FakeComment, FakeReaction, FakeRepo, IssuedToken
from app.demo.localgithub.tarballs import blobs_of_tarball, tree_listing

if TYPE_CHECKING:
    from app.demo.localgithub.server import FakeGitHub


def iso(epoch: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if epoch is None else epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Call:
    """One request, parsed; `repo` is set for repository routes once access is checked."""

    method: str
    route: str
    query: dict[str, str]
    body: Any
    params: dict[str, str]
    installation_id: int | None = None
    repo: FakeRepo | None = None


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None


Handler = Callable[["FakeGitHub", Call], Reply]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    template: str  # the path in the REST description, for its request schema
    # "app" (JWT) | "installation" (token with access to the repository) | "any" (a token) | "none"
    auth: str
    handler: Handler


def not_found() -> Reply:
    return Reply(404, rest_shapes.error("Not Found", 404))


def paginate(fake: FakeGitHub, call: Call, items: list[Any], *, cap: int) -> Reply:
    """A page of ITEMS and GitHub's Link header, whose URLs name the repository by id as GitHub's do."""
    per_page = min(int(call.query.get("per_page", 30)), 100)
    page = max(int(call.query.get("page", 1)), 1)
    items = items[:cap]
    last = max((len(items) + per_page - 1) // per_page, 1)
    assert call.repo is not None
    below = call.route.removeprefix(f"/repos/{call.params['owner']}/{call.params['repo']}")
    kept = "".join(f"{name}={quote(value, safe='')}&" for name, value in call.query.items()
                   if name not in ("per_page", "page"))  # a link carries the listing's whole query
    base = f"{fake.url}/repositories/{call.repo.id}{below}?{kept}per_page={per_page}&page="
    links = []
    if page > 1:
        links += [f'<{base}{page - 1}>; rel="prev"']
    if page < last:
        links += [f'<{base}{page + 1}>; rel="next"', f'<{base}{last}>; rel="last"']
    if page > 1:
        links += [f'<{base}1>; rel="first"']
    headers = {"Link": ", ".join(links)} if links else {}
    return Reply(200, items[(page - 1) * per_page: page * per_page], headers)


# The App


def get_app(fake: FakeGitHub, call: Call) -> Reply:
    return Reply(200, rest_shapes.app(fake.url, fake.app_id, fake.app_slug))


def create_token(fake: FakeGitHub, call: Call) -> Reply:
    installation = fake.installations.get(int(call.params["installation_id"]))
    if installation is None:
        return not_found()
    alphabet = string.ascii_letters + string.digits
    token = "ghs_" + "".join(secrets.choice(alphabet) for _ in range(36))
    expires_at = fake.clock() + fake.token_ttl
    fake.tokens[token] = IssuedToken(installation.id, expires_at)
    fake.tokens_issued.append(installation.id)
    return Reply(201, rest_shapes.access_token(fake.url, token, iso(expires_at)))


def get_repo_installation(fake: FakeGitHub, call: Call) -> Reply:
    repo = fake.repo(f"{call.params['owner']}/{call.params['repo']}")
    if repo is None:
        return not_found()
    found = fake.installations[repo.installation_id]
    return Reply(200, rest_shapes.installation(fake.url, found, fake.app_id, fake.app_slug))


def get_rate_limit(fake: FakeGitHub, call: Call) -> Reply:
    return Reply(200, rest_shapes.rate_limit(fake.url, fake.remaining, int(time.time()) + 3600))


# Pull requests


def get_pull(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    change = call.repo.pulls.get(int(call.params["pull_number"]))
    return Reply(200, rest_shapes.pull(fake.url, call.repo, change)) if change else not_found()


def list_files(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    change = call.repo.pulls.get(int(call.params["pull_number"]))
    if change is None:
        return not_found()
    files = [rest_shapes.changed_file(fake.url, call.repo, change, changed) for changed in change.files]
    return paginate(fake, call, files, cap=3000)


def list_commits(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    change = call.repo.pulls.get(int(call.params["pull_number"]))
    if change is None:
        return not_found()
    commits = [rest_shapes.commit(fake.url, call.repo, sha, message) for sha, message in change.commits]
    return paginate(fake, call, commits, cap=250)


def list_commit_pulls(fake: FakeGitHub, call: Call) -> Reply:
    """The pull requests that contain the commit or merged it (GitHub: "list pull requests associated
    with a commit"; not in the shared description, so the items are the full pull shape). A prefix of at
    least 7 hex digits names a commit, as on GitHub."""
    assert call.repo is not None
    sha = call.params["commit_sha"].lower()
    if not re.fullmatch(r"[0-9a-f]{7,64}", sha):
        return Reply(422, rest_shapes.error(f"No commit found for SHA: {sha}", 422))
    found = [change for _, change in sorted(call.repo.pulls.items())
             if any(commit.startswith(sha) for commit, _ in change.commits)
             or (change.merge_commit_sha or "").startswith(sha)]
    pulls = [rest_shapes.pull(fake.url, call.repo, change) for change in found]
    return paginate(fake, call, pulls, cap=10**6)


# Issues and comments


def get_issue(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    item = call.repo.issues.get(int(call.params["issue_number"]))
    return Reply(200, rest_shapes.issue(fake.url, call.repo, item)) if item else not_found()


def _comments_of(fake: FakeGitHub, repo: FakeRepo, number: int) -> list[FakeComment]:
    return sorted((note for note in fake.comments.values()
                   if note.repo == repo.full_name and note.issue_number == number), key=lambda note: note.id)


def list_comments(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    if int(call.params["issue_number"]) not in call.repo.issues:
        return not_found()
    notes = [rest_shapes.comment(fake.url, call.repo, note, "issues.list-comments.200.default")
             for note in _comments_of(fake, call.repo, int(call.params["issue_number"]))]
    return paginate(fake, call, notes, cap=10**6)


def create_comment(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    number = int(call.params["issue_number"])
    if number not in call.repo.issues:
        return not_found()
    text = call.body["body"]
    if len(text) > 65536:
        return Reply(422, rest_shapes.error("Validation Failed", 422, errors=[{
            "resource": "IssueComment", "code": "custom", "field": "body",
            "message": "body is too long (maximum is 65536 characters)"}]))
    now = iso()
    note = FakeComment(fake.next_id(), call.repo.full_name, number, text, fake.bot_login, "Bot", now, now)
    fake.comments[note.id] = note
    body = rest_shapes.comment(fake.url, call.repo, note, "issues.create-comment.201.default")
    return Reply(201, body, {"Location": body["url"]})


def _comment(fake: FakeGitHub, call: Call) -> FakeComment | None:
    assert call.repo is not None
    note = fake.comments.get(int(call.params["comment_id"]))
    return note if note is not None and note.repo == call.repo.full_name else None


def get_comment(fake: FakeGitHub, call: Call) -> Reply:
    note = _comment(fake, call)
    assert call.repo is not None
    return Reply(200, rest_shapes.comment(fake.url, call.repo, note, "issues.get-comment.200.default")) \
        if note else not_found()


def update_comment(fake: FakeGitHub, call: Call) -> Reply:
    note = _comment(fake, call)
    assert call.repo is not None
    if note is None:
        return not_found()
    if len(call.body["body"]) > 65536:
        return Reply(422, rest_shapes.error("Validation Failed", 422))
    note.body, note.updated_at = call.body["body"], iso()
    return Reply(200, rest_shapes.comment(fake.url, call.repo, note, "issues.update-comment.200.default"))


REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
# the legacy `permission` GitHub reports beside the role: maintain reads as write, triage as read
LEGACY_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read",
                     "read": "read"}


def create_reaction(fake: FakeGitHub, call: Call) -> Reply:
    """POST a reaction to a comment (not in the shared description: GitHub's documented shape). The
    App's reaction already there answers 200 with it, as GitHub does."""
    note = _comment(fake, call)
    assert call.repo is not None
    if note is None:
        return not_found()
    content = call.body.get("content") if isinstance(call.body, dict) else None
    if content not in REACTIONS:
        return Reply(422, rest_shapes.error("Validation Failed", 422))
    known = next((r for r in fake.reactions if r.comment_id == note.id and r.content == content
                  and r.user == fake.bot_login), None)
    reaction = known or FakeReaction(fake.next_id(), note.id, content, fake.bot_login)
    if known is None:
        fake.reactions.append(reaction)
    body = {"id": reaction.id, "node_id": f"REA_{reaction.id}", "content": reaction.content,
            "user": rest_shapes.user(fake.url, reaction.user, "Bot"), "created_at": iso()}
    return Reply(200 if known else 201, body)


def get_permission(fake: FakeGitHub, call: Call) -> Reply:
    """A user's permission on the repository (not in the shared description: GitHub's documented shape);
    a user who is not a collaborator has `none`."""
    assert call.repo is not None
    login = call.params["username"]
    role = call.repo.roles.get(login.lower())
    return Reply(200, {"permission": LEGACY_PERMISSION.get(role or "", "none"), "role_name": role or "none",
                       "user": rest_shapes.user(fake.url, login)})


# Check runs


def _app_of_check_run(fake: FakeGitHub) -> dict[str, Any]:
    return rest_shapes.app(fake.url, fake.app_id, fake.app_slug)


def _apply_check_run(run: FakeCheckRun, body: dict[str, Any]) -> None:
    for key in ("name", "details_url", "external_id", "started_at", "status", "completed_at", "actions"):
        if key in body:
            setattr(run, key, body[key])
    if "conclusion" in body:  # sending a conclusion completes the run, says the description
        run.conclusion, run.status = body["conclusion"], "completed"
        run.completed_at = run.completed_at or iso()
    if "output" in body:
        output = dict(body["output"])
        run.annotations += output.pop("annotations", [])
        output.pop("images", None)
        run.output.update(output)


def create_check_run(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    run = FakeCheckRun(fake.next_id(), call.repo.full_name, call.body["name"], call.body["head_sha"])
    _apply_check_run(run, call.body)
    fake.check_runs_by_id[run.id] = run
    example = "checks.create.201.example-of-in-progress-conclusion"
    return Reply(201, rest_shapes.check_run(fake.url, call.repo, run, example, _app_of_check_run(fake)))


def update_check_run(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    run = fake.check_runs_by_id.get(int(call.params["check_run_id"]))
    if run is None or run.repo != call.repo.full_name:
        return not_found()
    _apply_check_run(run, call.body)
    return Reply(200, rest_shapes.check_run(fake.url, call.repo, run, "checks.update.200.default",
                                       _app_of_check_run(fake)))


def list_check_runs_for_ref(fake: FakeGitHub, call: Call) -> Reply:
    """The check runs on a commit (not in the shared description: GitHub's documented shape,
    `{"total_count", "check_runs"}`), filtered by `check_name`, `status` and `app_id`; `filter=latest`
    (the default) keeps the most recent run of each name, `all` every one."""
    assert call.repo is not None
    ref, query = call.params["ref"], call.query
    runs = sorted((run for run in fake.check_runs_by_id.values() if run.repo == call.repo.full_name
                   and run.head_sha == ref and query.get("check_name", run.name) == run.name
                   and query.get("status", run.status) == run.status
                   and query.get("app_id", str(fake.app_id)) == str(fake.app_id)),
                  key=lambda run: run.id, reverse=True)
    if query.get("filter", "latest") == "latest":
        newest: dict[str, FakeCheckRun] = {}
        for run in runs:  # newest first
            newest.setdefault(run.name, run)
        runs = list(newest.values())
    listed = [rest_shapes.check_run(fake.url, call.repo, run, "checks.update.200.default",
                                    _app_of_check_run(fake)) for run in runs]
    reply = paginate(fake, call, listed, cap=10**6)
    reply.body = {"total_count": len(listed), "check_runs": reply.body}
    return reply


# Contents and archives


def get_contents(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    ref = call.query.get("ref", call.repo.default_branch)
    path = call.params["path"].strip("/")
    data = call.repo.files.get((ref, path))
    if data is not None:
        return Reply(200, rest_shapes.contents_file(fake.url, call.repo, path, ref, data))
    below = sorted(name for (at, name) in call.repo.files if at == ref and name.startswith(f"{path}/"))
    if below:
        return Reply(200, rest_shapes.contents_directory(fake.url, call.repo, ref, below))
    return not_found()


def compare(fake: FakeGitHub, call: Call) -> Reply:
    """Compare BASE...HEAD: the merge base a test set for the pair (default: BASE), in the example's
    shape, listing the default branch's commits after BASE up to HEAD when both are on it; 404 for a pair
    set to share no history, as GitHub answers for unrelated histories."""
    assert call.repo is not None
    base, dots, head = call.params["basehead"].partition("...")
    if not dots or not base or not head:
        return not_found()
    merge_base = call.repo.merge_bases.get((base, head), base)
    if merge_base is None:
        return Reply(404, rest_shapes.error(f"No common ancestor between {base} and {head}.", 404))
    shas = [sha for sha, _ in call.repo.history]
    between = call.repo.history[shas.index(base) + 1: shas.index(head) + 1] \
        if base in shas and head in shas else []
    files = changed_files(_blobs(call.repo, merge_base), _blobs(call.repo, head))
    return Reply(200, rest_shapes.comparison(fake.url, call.repo, base, head, merge_base, between, files))


COMPARED_FILES = 300  # GitHub lists at most this many changed files of a comparison


def _blobs(repo: FakeRepo, ref: str) -> dict[str, tuple[str, str]]:
    """REF's files as the Git Trees API lists them (set with `set_tree`, else its tarball's); none unknown."""
    if ref in repo.trees:
        return repo.trees[ref]
    return blobs_of_tarball(repo.tarballs[ref]) if ref in repo.tarballs else {}


def changed_files(before: dict[str, tuple[str, str]],
                  after: dict[str, tuple[str, str]]) -> list[tuple[str, str, str | None]]:
    """(status, path, previous path) of each file changed from BEFORE to AFTER, by path, at most GitHub's
    300: a file gone from one path and found with the same content at a new one is `renamed` (GitHub's
    similarity, at 100%)."""
    gone = {blob: path for path, (_, blob) in sorted(before.items()) if path not in after}
    changed: list[tuple[str, str, str | None]] = []
    for path in sorted(set(before) | set(after)):
        if path in before and path in after:
            if before[path] != after[path]:
                changed.append(("modified", path, None))
        elif path in after:
            previous = gone.pop(after[path][1], None)
            changed.append(("added", path, None) if previous is None else ("renamed", path, previous))
    renamed = {previous for status, _, previous in changed if status == "renamed"}
    changed += [("removed", path, None) for path in sorted(before)
                if path not in after and path not in renamed]
    return sorted(changed, key=lambda entry: entry[1])[:COMPARED_FILES]


def get_repository(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    return Reply(200, rest_shapes.repository_info(fake.url, call.repo))


def get_branch(fake: FakeGitHub, call: Call) -> Reply:
    """Only the default branch exists, its head the last commit pushed to it."""
    assert call.repo is not None
    if call.params["branch"] != call.repo.default_branch or not call.repo.history:
        return Reply(404, rest_shapes.error("Branch not found", 404))
    return Reply(200, rest_shapes.branch(fake.url, call.repo, call.repo.history[-1][0]))


def get_tarball(fake: FakeGitHub, call: Call) -> Reply:
    assert call.repo is not None
    ref = call.params["ref"]
    if ref not in call.repo.tarballs:
        return not_found()
    key = secrets.token_urlsafe(16)
    fake.downloads[key] = call.repo.tarballs[ref]
    location = f"{fake.download_url}/{call.repo.full_name}/legacy.tar.gz/{ref}?token={key}"
    return Reply(302, headers={"Location": location}, raw=b"")


def get_tree(fake: FakeGitHub, call: Call) -> Reply:
    """The commit's files, recursively (as prtriage asks): set with `set_tree`, else its tarball's."""
    assert call.repo is not None
    ref = call.params["ref"]
    if ref not in call.repo.trees and ref not in call.repo.tarballs:
        return not_found()
    blobs = call.repo.trees.get(ref)
    if blobs is None:
        blobs = blobs_of_tarball(call.repo.tarballs[ref])
    return Reply(200, tree_listing(ref, blobs))


def _pattern(template: str) -> re.Pattern[str]:
    """The regular expression of a description path: ids and numbers are digits, a path or ref is the rest."""
    def group(match: re.Match[str]) -> str:
        name = match.group(1)
        body = r"\d+" if name.endswith(("_id", "_number")) else ".+" if name in ("path", "ref") else "[^/]+"
        return f"(?P<{name}>{body})"
    return re.compile(re.sub(r"\{(\w+)\}", group, template))


def route(method: str, template: str, auth: str, handler: Handler) -> Route:
    return Route(method, _pattern(template), template, auth, handler)


ROUTES = [route(method, template, auth, handler) for method, template, auth, handler in [
    ("GET", "/app", "app", get_app),
    ("POST", "/app/installations/{installation_id}/access_tokens", "app", create_token),
    ("GET", "/repos/{owner}/{repo}/installation", "app", get_repo_installation),
    ("GET", "/rate_limit", "any", get_rate_limit),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", "installation", get_pull),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files", "installation", list_files),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/commits", "installation", list_commits),
    ("GET", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls", "installation", list_commit_pulls),
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}", "installation", get_issue),
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "installation", list_comments),
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "installation", create_comment),
    ("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "installation", get_comment),
    ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "installation", update_comment),
    ("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", "installation", create_reaction),
    ("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission", "installation", get_permission),
    ("POST", "/repos/{owner}/{repo}/check-runs", "installation", create_check_run),
    ("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", "installation", update_check_run),
    ("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs", "installation", list_check_runs_for_ref),
    ("GET", "/repos/{owner}/{repo}/contents/{path}", "installation", get_contents),
    ("GET", "/repos/{owner}/{repo}/compare/{basehead}", "installation", compare),
    ("GET", "/repos/{owner}/{repo}", "installation", get_repository),
    ("GET", "/repos/{owner}/{repo}/branches/{branch}", "installation", get_branch),
    ("GET", "/repos/{owner}/{repo}/tarball/{ref}", "installation", get_tarball),
    ("GET", "/repos/{owner}/{repo}/git/trees/{ref}", "installation", get_tree),
]]
