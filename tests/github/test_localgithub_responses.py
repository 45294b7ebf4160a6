"""The local GitHub answers as GitHub's REST description says GitHub does: every JSON response it gave to the
App's own calls (a pull request with a fork's and a deleted fork's head, a merged one, files, commits,
issues, comments, check runs with annotations, contents, compare, tokens, the App, an installation, the rate
limit) is validated with `jsonschema` against the response schema of its operation in the shared REST
description subset (npm `@octokit/openapi` 23.0.2, ../shared/fixtures/github/rest/openapi-subset.json)."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from needs import shared

from app.demo.localgithub import FakeGitHub
from app.github import GitHubApp, GitHubClient

HEAD, BASE, MERGE_BASE = "a" * 40, "b" * 40, "c" * 40
REPO = "octo/widgets"
INSTALLATION = 7  # the fixtures' installation of octo/widgets
METHODS = ("get", "post", "patch", "put", "delete")
# Where the fake answers as GitHub does and the description does not say so, each with its reason.
DEVIATIONS = {
    # a PR whose fork was deleted: GitHub answers `"repo": null` (the webhook schema allows it), the REST
    # description's pull-request has a non-nullable `head.repo`
    "pulls/get GET /repos/octo/widgets/pulls/3: head/repo: None is not of type 'object'",
}


@pytest.fixture(scope="module")
def description() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(shared("fixtures/github/rest/openapi-subset.json").read_text())
    return loaded


def as_json_schema(node: Any) -> Any:
    """OpenAPI 3.0's schema dialect as JSON Schema draft 4: `nullable: true` becomes a null alternative."""
    if isinstance(node, list):
        return [as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: as_json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is not True:
        return converted
    if "enum" in converted:
        converted["enum"] = [*converted["enum"], None]
    if isinstance(converted.get("type"), str) and "$ref" not in converted:
        converted["type"] = [converted["type"], "null"]
        return converted
    return {"anyOf": [converted, {"type": "null"}]}


def resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


class Operations:
    """The description's operations: (method, route pattern) -> operation id, and each response schema."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.components = as_json_schema(document["components"])
        self.routes: list[tuple[str, re.Pattern[str], str, dict[str, Any]]] = []
        for template, item in document["paths"].items():
            pattern = re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)))
            for method in METHODS:
                if method in item:
                    self.routes.append((method.upper(), pattern, item[method]["operationId"], item[method]))

    def find(self, method: str, route: str) -> tuple[str, dict[str, Any]] | None:
        for wanted, pattern, operation_id, operation in self.routes:
            if wanted == method and pattern.fullmatch(route):
                return operation_id, operation
        return None

    def schema(self, operation: dict[str, Any], status: int) -> dict[str, Any] | None:
        response = operation["responses"].get(str(status))
        if response is None:
            return None
        content = resolve(self.document, response).get("content", {})
        json_body = content.get("application/json")
        return None if json_body is None else as_json_schema(json_body["schema"])

    def with_json_bodies(self) -> set[str]:
        return {operation_id for _, _, operation_id, operation in self.routes
                if any(self.schema(operation, int(status)) for status in operation["responses"]
                       if status.isdigit() and status.startswith("2"))}

    def problems(self, schema: dict[str, Any], body: Any) -> list[str]:
        root = {"allOf": [schema], "components": self.components}
        validator = jsonschema.Draft4Validator(root)
        return [f"{'/'.join(map(str, error.absolute_path)) or '(body)'}: {error.message[:200]}"
                for error in validator.iter_errors(body)]


def exercise(fake: FakeGitHub, app: GitHubApp, client: GitHubClient) -> None:
    """The App's calls, through its own client, over every kind of answer the fake gives."""
    owner, name = REPO.split("/")
    fake.add_pull(REPO, 1, head_sha=HEAD, base_sha=BASE, title="Fail fast", body=None, author="alice",
                  files=["a.py", {"filename": "b.py", "status": "renamed", "previous_filename": "old.py"},
                         {"filename": "c.py", "patch": "@@ -1,2 +1,3 @@\n x\n+y\n z"}],
                  commits=[(HEAD, "Fail fast\n\nFollow-up #3 will add the check")], draft=True)
    fake.add_pull(REPO, 2, head_sha=HEAD, base_sha=BASE, head_repo="mallory/widgets")
    fake.add_pull(REPO, 3, head_sha=HEAD, base_sha=BASE, head_repo=None, state="closed", merged=True,
                  merged_at="2026-01-02T03:04:05Z")
    fake.add_issue(REPO, 4, body=None, state="closed", state_reason="not_planned")
    fake.add_comment(REPO, 1, "/triage rerun", author="alice")
    fake.set_file(REPO, HEAD, "pkg/policy.yml", "validation: [a.py]\n")
    fake.set_merge_base(REPO, BASE, HEAD, MERGE_BASE)
    with tempfile.TemporaryDirectory() as trees:  # a comparison listing a renamed, a changed and a new file
        for sha, files in ((MERGE_BASE, {"old.py": "x = 1\n", "a.py": "a\n"}),
                           (HEAD, {"b.py": "x = 1\n", "a.py": "a = 2\n", "c.py": "c\n"})):
            for path, text in files.items():
                (Path(trees) / sha / path).parent.mkdir(parents=True, exist_ok=True)
                (Path(trees) / sha / path).write_text(text)
            fake.set_tree(REPO, sha, Path(trees) / sha)

    for number in (1, 2, 3):
        client.get_pull(owner, name, number)
        client.list_changed_files(owner, name, number)
        client.list_commits(owner, name, number)
    for number in (1, 4):
        client.get_issue(owner, name, number)
    client.list_issue_comments(owner, name, 1)
    made = client.create_issue_comment(owner, name, 1, "<!-- prtriage -->\nThe report")
    client.update_issue_comment(owner, name, made.id, "<!-- prtriage -->\nThe report, again")
    client.get_file(owner, name, "pkg/policy.yml", HEAD)
    client.merge_base(owner, name, BASE, HEAD)
    assert client.comparison(owner, name, BASE, HEAD).moved == [("old.py", "b.py")]
    annotation = {"path": "a.py", "start_line": 1, "end_line": 1, "annotation_level": "failure",
                  "message": "rejects suite lora", "title": "new assert", "raw_details": "x" * 100}
    started = client.post_check_run(owner, name, {"name": "prtriage", "head_sha": HEAD,
                                                  "status": "in_progress"})
    client.patch_check_run(owner, name, int(started["id"]), {
        "status": "completed", "conclusion": "failure",
        "output": {"title": "1 suite rejected", "summary": "s", "text": "t", "annotations": [annotation]},
        "actions": [{"label": "Re-run", "description": "Triage again", "identifier": "rerun"}]})
    client.post_check_run(owner, name, {"name": "prtriage", "head_sha": HEAD, "status": "completed",
                                        "conclusion": "success", "output": {"title": "ok", "summary": "s"}})
    client.rate_limit()
    fake.set_tarball(REPO, HEAD, b"not read here")
    url, headers = client.tarball_request(owner, name, HEAD)
    assert httpx.get(url, headers=headers).status_code == 302  # as sources.py asks, before it follows
    app.app_slug()
    app.installation_for(owner, name)
    # the contents of a directory and a comment read back: the App asks neither, the fake answers both
    token = fake.issue_token(INSTALLATION)
    with httpx.Client(base_url=fake.url, headers={"Authorization": f"token {token}"}) as http:
        http.get(f"/repos/{REPO}/contents/pkg", params={"ref": HEAD}).raise_for_status()
        http.get(f"/repos/{REPO}/issues/comments/{made.id}").raise_for_status()


def test_every_json_answer_of_the_local_github_fits_the_rest_description(
        fake: FakeGitHub, app: GitHubApp, client: GitHubClient, description: dict[str, Any]) -> None:
    operations = Operations(description)
    exercise(fake, app, client)

    validated: set[str] = set()
    problems: list[str] = []
    for call in fake.requests:
        found = operations.find(call.method, call.route) if call.server == "api" else None
        if found is None or not 200 <= call.status < 300:
            continue
        operation_id, operation = found
        schema = operations.schema(operation, call.status)
        if schema is None:
            assert call.response is None, f"{operation_id} {call.status}: a body the description has none for"
            continue
        validated.add(operation_id)
        problems += [f"{operation_id} {call.method} {call.route}: {problem}"
                     for problem in operations.problems(schema, call.response)]

    assert sorted(set(problems) - DEVIATIONS) == []
    assert sorted(DEVIATIONS - set(problems)) == []  # each still happens: none stays listed for nothing
    assert validated == operations.with_json_bodies()  # every operation of the subset answered at least once
    tarball = [call for call in fake.requests if call.route.startswith(f"/repos/{REPO}/tarball/")]
    assert [call.status for call in tarball] == [302]  # its only response: a redirect, no body


def test_the_check_catches_an_answer_that_does_not_fit(description: dict[str, Any]) -> None:
    operations = Operations(description)
    found = operations.find("GET", f"/repos/{REPO}/pulls/1")
    assert found is not None and found[0] == "pulls/get"
    schema = operations.schema(found[1], 200)
    assert schema is not None
    example = json.loads(shared("fixtures/github/rest/examples/pulls.get.200.default.json").read_text())
    # GitHub's own example lacks a team's `type`, which its schema requires: the check sees that too
    assert operations.problems(schema, example) == ["requested_teams/0: 'type' is a required property"]
    example["requested_teams"] = []
    assert operations.problems(schema, example) == []

    broken = {**example, "number": "1", "head": {**example["head"], "sha": None}}
    del broken["state"]

    assert sorted(operations.problems(schema, broken)) == [
        "(body): 'state' is a required property", "head/sha: None is not of type 'string'",
        "number: '1' is not of type 'integer'"]
    assert operations.problems(schema, {**example, "merged_at": None, "body": None}) == []  # nullable
