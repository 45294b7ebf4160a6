"""Bodies in GitHub's shapes: the REST description's examples with the fake's ids filled in, and a check of
request bodies against the description's JSON schemas (what GitHub would answer with 422).

`rest/` is a copy of the subset of GitHub's published REST description this project is built against (the
operations and examples it uses); it ships with the package so that `prtriage demo` runs anywhere, and a test
keeps it identical to the project's shared fixtures."""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import json
from typing import Any

from app.bundled import package_file
from app.demo.localgithub.state import FakeCheckRun, FakeComment, FakeIssue, FakePull, FakeRepo, Installation

REST = package_file("app.demo.localgithub", "rest")
DOCS = "https://docs.github.com/rest"


@functools.cache
def _example_text(name: str) -> str:
    path = REST / "examples" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such example in the REST description subset")
    return path.read_text()


@functools.cache
def description() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((REST / "openapi-subset.json").read_text())
    return document


def example(name: str, api_url: str, full_name: str = "octocat/Hello-World") -> Any:
    """An example response of the description, its URLs pointing at the fake and at FULL_NAME."""
    text = _example_text(f"{name}.json").replace("https://api.github.com", api_url)
    return json.loads(text.replace("octocat/Hello-World", full_name))


# Request bodies against the description


def request_schema(template: str, method: str) -> dict[str, Any] | None:
    # a route the shared subset does not describe (commits/{sha}/pulls) has no request body to check
    operation = description()["paths"].get(template, {}).get(method.lower(), {})
    body = operation.get("requestBody")
    return _resolve(body)["content"]["application/json"]["schema"] if body else None


def _resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = description()
        for key in node["$ref"].removeprefix("#/").split("/"):
            target = target[key]
        node = target
    return node


_TYPES: dict[str, type | tuple[type, ...]] = {"object": dict, "array": list, "string": str, "boolean": bool,
                                              "number": (int, float), "integer": int}


def _type_ok(expected: str | list[str], value: Any, nullable: bool) -> bool:
    if value is None:
        return nullable or expected == "null" or (isinstance(expected, list) and "null" in expected)
    names = expected if isinstance(expected, list) else [expected]
    return any(name in _TYPES and isinstance(value, _TYPES[name])
               and not (name in ("integer", "number") and isinstance(value, bool)) for name in names)


def schema_errors(schema: Any, value: Any, where: str = "body") -> list[str]:
    """What in VALUE breaks SCHEMA (the subset of JSON Schema the description uses). Stricter than GitHub
    on one point: a property the schema does not name is an error, so that a misspelt key is caught."""
    schema = _resolve(schema)
    errors: list[str] = []
    for alternative_key in ("anyOf", "oneOf"):
        if alternative_key in schema:
            fits = [alt for alt in schema[alternative_key] if not schema_errors(alt, value, where)]
            if not fits:
                errors.append(f"{where}: matches none of the {alternative_key} alternatives")
    for part in schema.get("allOf", []):
        errors += schema_errors(part, value, where)
    if "type" in schema and not _type_ok(schema["type"], value, bool(schema.get("nullable"))):
        return [*errors, f"{where}: {value!r:.60} is not of type {schema['type']}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        errors.append(f"{where}: {len(value)} characters, more than {schema['maxLength']}")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{where}: {len(value)} items, more than {schema['maxItems']}")
        for index, item in enumerate(value):
            errors += schema_errors(schema.get("items", {}), item, f"{where}[{index}]")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors += [f"{where}: `{key}` is required" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            if key in properties:
                errors += schema_errors(properties[key], item, f"{where}.{key}")
            elif properties and schema.get("additionalProperties") is not True:
                errors.append(f"{where}: `{key}` is not a property of this request")
    return errors


# Response bodies


def user(api_url: str, login: str, kind: str = "User") -> dict[str, Any]:
    body: dict[str, Any] = example("pulls.get.200.default", api_url)["user"]
    body.update(login=login, type=kind, url=f"{api_url}/users/{login}", html_url=f"https://github.com/{login}")
    return body


def repository(api_url: str, repo: FakeRepo | None, full_name: str, *, fork: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = example("pulls.get.200.default", api_url, full_name)["head"]["repo"]
    owner, name = full_name.split("/")
    body.update(id=repo.id if repo else 0, name=name, full_name=full_name, fork=fork,
                url=f"{api_url}/repos/{full_name}", html_url=f"https://github.com/{full_name}",
                default_branch=repo.default_branch if repo else "main")
    body["owner"] = user(api_url, owner, "Organization")
    return body


def pull(api_url: str, repo: FakeRepo, change: FakePull) -> dict[str, Any]:
    body: dict[str, Any] = example("pulls.get.200.default", api_url, repo.full_name)
    head_name = repo.full_name if change.head_repo == "" else change.head_repo
    body.update(id=repo.id * 100_000 + change.number, number=change.number, state=change.state,
                title=change.title, body=change.body, user=user(api_url, change.author), draft=change.draft,
                merged=change.merged, merged_at=change.merged_at,
                closed_at=change.merged_at if change.state == "closed" else None,
                url=f"{api_url}/repos/{repo.full_name}/pulls/{change.number}",
                html_url=f"https://github.com/{repo.full_name}/pull/{change.number}",
                commits=len(change.commits), changed_files=len(change.files), comments=0, mergeable=None,
                merged_by=user(api_url, repo.owner) if change.merged else None, labels=[], milestone=None,
                # the example's team lacks `type`, which the description requires; the fake requests none
                requested_teams=[])
    if change.merge_commit_sha:
        body["merge_commit_sha"] = change.merge_commit_sha
    head_owner = (head_name or "ghost/deleted").split("/")[0]
    body["head"].update(label=f"{head_owner}:{change.head_ref}", ref=change.head_ref, sha=change.head_sha,
                        user=user(api_url, head_owner),
                        repo=repository(api_url, None, head_name, fork=head_name != repo.full_name)
                        if head_name else None)
    body["base"].update(label=f"{repo.owner}:{change.base_ref}", ref=change.base_ref, sha=change.base_sha,
                        user=user(api_url, repo.owner), repo=repository(api_url, repo, repo.full_name))
    return body


def changed_file(api_url: str, repo: FakeRepo, change: FakePull, changed: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = example("pulls.list-files.200.default", api_url, repo.full_name)[0]
    del body["patch"]  # the example's belongs to no file of ours; GitHub too omits it (binary, too large)
    body.update(changed)
    patch = changed.get("patch")
    lines = patch.split("\n") if isinstance(patch, str) else []
    added = sum(1 for line in lines if line.startswith("+"))
    removed = sum(1 for line in lines if line.startswith("-"))
    body.update(additions=added, deletions=removed, changes=added + removed)
    contents = f"{api_url}/repos/{repo.full_name}/contents/{changed['filename']}"
    body["contents_url"] = f"{contents}?ref={change.head_sha}"
    return body


def commit(api_url: str, repo: FakeRepo, sha: str, message: str) -> dict[str, Any]:
    body: dict[str, Any] = example("pulls.list-commits.200.default", api_url, repo.full_name)[0]
    body.update(sha=sha, url=f"{api_url}/repos/{repo.full_name}/commits/{sha}")
    body["commit"]["message"] = message
    return body


def comparison(api_url: str, repo: FakeRepo, base: str, head: str, merge_base: str,
               commits: list[tuple[str, str]] | None = None,
               files: list[tuple[str, str, str | None]] | None = None) -> dict[str, Any]:
    """The compare API's answer for BASE...HEAD; the shas, COMMITS (sha, message) and FILES (status, path,
    previous path) are the fake's."""
    body: dict[str, Any] = example("repos.compare-commits-with-basehead.200.default", api_url, repo.full_name)
    listed = [{"sha": sha, "url": f"{api_url}/repos/{repo.full_name}/commits/{sha}",
               "commit": {"message": message}, "parents": []} for sha, message in commits or []]
    body.update(url=f"{api_url}/repos/{repo.full_name}/compare/{base}...{head}",
                html_url=f"https://github.com/{repo.full_name}/compare/{base}...{head}",
                status="identical" if base == head else "diverged" if merge_base not in (base, head)
                else "ahead" if merge_base == base else "behind",
                ahead_by=len(listed), behind_by=0, total_commits=len(listed), commits=listed,
                files=[diff_entry(api_url, repo, head, *changed) for changed in files or []])
    for key, sha in (("base_commit", base), ("merge_base_commit", merge_base)):
        body[key] = {**body[key], "sha": sha, "url": f"{api_url}/repos/{repo.full_name}/commits/{sha}"}
    return body


def diff_entry(api_url: str, repo: FakeRepo, head: str, status: str, path: str,
               previous: str | None) -> dict[str, Any]:
    """One changed file of a comparison, in the example's shape (no patch: the fake keeps no texts)."""
    entry: dict[str, Any] = {
        "sha": None, "filename": path, "status": status, "additions": 0, "deletions": 0, "changes": 0,
        "blob_url": f"https://github.com/{repo.full_name}/blob/{head}/{path}",
        "raw_url": f"https://github.com/{repo.full_name}/raw/{head}/{path}",
        "contents_url": f"{api_url}/repos/{repo.full_name}/contents/{path}?ref={head}"}
    return {**entry, "previous_filename": previous} if previous else entry


def issue(api_url: str, repo: FakeRepo, item: FakeIssue) -> dict[str, Any]:
    body: dict[str, Any] = example("issues.get.200.default", api_url, repo.full_name)
    body.update(id=repo.id * 100_000 + item.number, number=item.number, title=item.title, body=item.body,
                user=user(api_url, item.author), state=item.state, state_reason=item.state_reason,
                url=f"{api_url}/repos/{repo.full_name}/issues/{item.number}", labels=[], milestone=None,
                html_url=f"https://github.com/{repo.full_name}/"
                         f"{'pull' if item.pull else 'issues'}/{item.number}")
    if item.pull is None:
        body.pop("pull_request", None)
    else:
        body["pull_request"].update(url=f"{api_url}/repos/{repo.full_name}/pulls/{item.number}",
                                    html_url=body["html_url"], merged_at=item.pull.merged_at)
        body["draft"] = item.pull.draft
    return body


def comment(api_url: str, repo: FakeRepo, note: FakeComment, example_name: str) -> dict[str, Any]:
    shape = example(example_name, api_url, repo.full_name)
    body: dict[str, Any] = shape[0] if isinstance(shape, list) else shape  # a list example: its element
    body.update(id=note.id, body=note.body, user=user(api_url, note.author, note.author_type),
                created_at=note.created_at, updated_at=note.updated_at,
                author_association="NONE" if note.author_type == "Bot" else "COLLABORATOR",
                url=f"{api_url}/repos/{repo.full_name}/issues/comments/{note.id}",
                html_url=f"https://github.com/{repo.full_name}/pull/{note.issue_number}#issuecomment-{note.id}",
                issue_url=f"{api_url}/repos/{repo.full_name}/issues/{note.issue_number}")
    return body


def check_run(api_url: str, repo: FakeRepo, run: FakeCheckRun, example_name: str, app: dict[str, Any],
              ) -> dict[str, Any]:
    body: dict[str, Any] = example(example_name, api_url, repo.full_name)
    url = f"{api_url}/repos/{repo.full_name}/check-runs/{run.id}"
    body.update(id=run.id, name=run.name, head_sha=run.head_sha, status=run.status, conclusion=run.conclusion,
                external_id=run.external_id, details_url=run.details_url, started_at=run.started_at,
                completed_at=run.completed_at, url=url, html_url=f"https://github.com/{repo.full_name}/runs/{run.id}",
                app=app, pull_requests=[])
    body["output"] = {**run.output, "annotations_count": len(run.annotations),
                      "annotations_url": f"{url}/annotations"}
    return body


def contents_file(api_url: str, repo: FakeRepo, path: str, ref: str, data: bytes) -> dict[str, Any]:
    body: dict[str, Any] = example("repos.get-content.200.response-if-content-is-a-file", api_url)
    encoded = base64.b64encode(data).decode()
    # GitHub breaks the base64 into lines of 60 characters, with real newlines
    lines = [encoded[i:i + 60] for i in range(0, len(encoded), 60)]
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    url = f"{api_url}/repos/{repo.full_name}/contents/{path}?ref={ref}"
    body.update(type="file", encoding="base64", size=len(data), name=path.rsplit("/", 1)[-1], path=path,
                content="\n".join(lines) + "\n", sha=blob, url=url,
                git_url=f"{api_url}/repos/{repo.full_name}/git/blobs/{blob}",
                html_url=f"https://github.com/{repo.full_name}/blob/{ref}/{path}",
                download_url=f"https://raw.githubusercontent.com/{repo.full_name}/{ref}/{path}",
                _links={"self": url, "git": f"{api_url}/repos/{repo.full_name}/git/blobs/{blob}",
                        "html": f"https://github.com/{repo.full_name}/blob/{ref}/{path}"})
    return body


def contents_directory(api_url: str, repo: FakeRepo, ref: str, paths: list[str]) -> list[dict[str, Any]]:
    template: dict[str, Any] = example("repos.get-content.200.response-if-content-is-a-directory", api_url)[0]
    entries = []
    for path in paths:
        entry = copy.deepcopy(template)
        entry.update(type="file", name=path.rsplit("/", 1)[-1], path=path,
                     url=f"{api_url}/repos/{repo.full_name}/contents/{path}?ref={ref}")
        entries.append(entry)
    return entries


def access_token(api_url: str, token: str, expires_at: str) -> dict[str, Any]:
    body: dict[str, Any] = example("apps.create-installation-access-token.201.default", api_url)
    body.update(token=token, expires_at=expires_at, repository_selection="all")
    body.pop("repositories", None)  # present only when the request named repositories
    return body


def app(api_url: str, app_id: int, slug: str) -> dict[str, Any]:
    body: dict[str, Any] = example("apps.get-authenticated.200.default", api_url)
    body.update(id=app_id, slug=slug, name=slug, html_url=f"https://github.com/apps/{slug}")
    return body


def installation(api_url: str, found: Installation, app_id: int, slug: str) -> dict[str, Any]:
    body: dict[str, Any] = example("apps.get-repo-installation.200.default", api_url)
    body.update(id=found.id, app_id=app_id, app_slug=slug,
                access_tokens_url=f"{api_url}/app/installations/{found.id}/access_tokens")
    body["account"] = user(api_url, found.account, "Organization")
    return body


def rate_limit(api_url: str, remaining: int, reset: int) -> dict[str, Any]:
    body: dict[str, Any] = example("rate-limit.get.200.default", api_url)
    core = {"limit": 5000, "used": 5000 - remaining, "remaining": remaining, "reset": reset}
    body["resources"]["core"] = core
    body["rate"] = dict(core)
    return body


def error(message: str, status: int, **extra: Any) -> dict[str, Any]:
    return {"message": message, "documentation_url": DOCS, "status": str(status), **extra}


def repository_info(api_url: str, repo: FakeRepo) -> dict[str, Any]:
    """GET /repos/{owner}/{repo}: the fields prtriage reads (GitHub's answer has many more)."""
    return {"id": repo.id, "name": repo.name, "full_name": repo.full_name, "private": False,
            "owner": {"login": repo.owner}, "default_branch": repo.default_branch,
            "url": f"{api_url}/repos/{repo.full_name}", "html_url": f"https://github.com/{repo.full_name}"}


def branch(api_url: str, repo: FakeRepo, sha: str) -> dict[str, Any]:
    """GET /repos/{owner}/{repo}/branches/{branch} of the default branch at SHA."""
    return {"name": repo.default_branch, "protected": False,
            "commit": {"sha": sha, "url": f"{api_url}/repos/{repo.full_name}/commits/{sha}"}}
