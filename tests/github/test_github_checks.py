"""The check run against the fake GitHub, which checks every request body against the REST description:
created in progress, completed with annotations 50 per call, cancelled, never left in progress."""

from __future__ import annotations

import json

import pytest

from app.github import (
    Annotation,
    GitHubClient,
    GitHubError,
    cancel_check_run,
    complete_check_run,
    create_check_run,
)
from app.github.checks import OUTPUT_LIMIT
from app.localgithub import FakeGitHub
from app.localgithub.shapes import REST

HEAD = "a" * 40
RUN = r"/repos/octo/widgets/check-runs/\d+"


def start(client: GitHubClient) -> int:
    return create_check_run(client, "octo", "widgets", name="PR risk triage", head_sha=HEAD,
                            external_id="run-17")


def annotations(count: int) -> list[Annotation]:
    return [Annotation(path="miles/utils/arguments.py", start_line=100 + index, end_line=100 + index,
                       annotation_level="failure", message=f"rejects suite {index}", title="New assert")
            for index in range(count)]


def test_create_in_progress(fake: FakeGitHub, client: GitHubClient):
    run_id = start(client)

    [request] = fake.calls("POST", r"/repos/octo/widgets/check-runs")
    assert request.status == 201 and request.schema_errors == []
    assert request.body["status"] == "in_progress" and request.body["external_id"] == "run-17"
    assert request.body["started_at"].endswith("Z") and request.body["output"]["title"]
    example = json.loads((REST / "examples" / "checks.create.request.example-of-in-progress-conclusion.json")
                         .read_text())
    assert set(request.body) == set(example)  # the same fields as the description's in-progress example
    [run] = fake.check_runs("octo/widgets")
    assert (run.id, run.status, run.head_sha, run.name) == (run_id, "in_progress", HEAD, "PR risk triage")


def test_120_annotations_go_in_three_calls_and_the_last_completes(fake: FakeGitHub, client: GitHubClient):
    run_id = start(client)

    posted = complete_check_run(client, "octo", "widgets", run_id, conclusion="failure",
                                title="Breaks 5 suites", summary="5 CI suites rejected", text="details",
                                annotations=annotations(120))

    patches = fake.calls("PATCH", RUN)
    assert [len(request.body["output"]["annotations"]) for request in patches] == [50, 50, 20]
    assert [request.body["status"] for request in patches] == ["in_progress", "in_progress", "completed"]
    assert ["conclusion" in request.body for request in patches] == [False, False, True]
    assert all(request.schema_errors == [] and request.status == 200 for request in patches)
    [run] = fake.check_runs("octo/widgets")
    assert posted == 120 and len(run.annotations) == 120
    assert [note["message"] for note in run.annotations] == [f"rejects suite {index}" for index in range(120)]
    assert (run.status, run.conclusion, run.output["text"]) == ("completed", "failure", "details")


@pytest.mark.parametrize("count", [0, 1, 50])
def test_up_to_50_annotations_complete_in_one_call(fake: FakeGitHub, client: GitHubClient, count: int):
    run_id = start(client)

    complete_check_run(client, "octo", "widgets", run_id, conclusion="success", title="Clear",
                       summary="No finding", annotations=annotations(count))

    [request] = fake.calls("PATCH", RUN)
    assert request.body["conclusion"] == "success" and request.schema_errors == []
    assert len(request.body["output"].get("annotations", [])) == count


def test_long_outputs_are_cut_to_the_limit(fake: FakeGitHub, client: GitHubClient):
    run_id = start(client)

    complete_check_run(client, "octo", "widgets", run_id, conclusion="neutral", title="Warnings",
                       summary="s" * 100_000, text="t" * 100_000)

    [request] = fake.calls("PATCH", RUN)
    output = request.body["output"]
    assert request.status == 200
    assert len(output["summary"]) <= OUTPUT_LIMIT and len(output["text"]) <= OUTPUT_LIMIT
    assert output["summary"].endswith("did not fit.*")


def test_a_failed_batch_still_completes_the_run(fake: FakeGitHub, client: GitHubClient, sleeps):
    run_id = start(client)
    fake.fail_next(5, status=502, path=RUN)  # the first batch fails for good (five attempts)

    posted = complete_check_run(client, "octo", "widgets", run_id, conclusion="failure", title="Breaks",
                                summary="summary", annotations=annotations(120))

    [run] = fake.check_runs("octo/widgets")
    assert posted == 0 and (run.status, run.conclusion) == ("completed", "failure")
    assert "120 annotations could not be posted" in run.output["summary"]


def test_annotations_are_made_acceptable():
    odd = Annotation(path="a.py", start_line=0, end_line=-3, annotation_level="warning", message="m" * 70_000,
                     title="t" * 300)
    payload = odd.payload()
    assert (payload["start_line"], payload["end_line"]) == (1, 1)
    assert len(payload["title"]) == 255 and len(payload["message"]) == 64 * 1024
    with pytest.raises(ValueError, match="annotation_level"):
        Annotation(path="a.py", start_line=1, end_line=1, annotation_level="error", message="m").payload()  # type: ignore[arg-type]


def test_cancel_says_why(fake: FakeGitHub, client: GitHubClient):
    run_id = start(client)
    newer = "c" * 40

    cancel_check_run(client, "octo", "widgets", run_id, reason=f"superseded by {newer}")

    [request] = fake.calls("PATCH", RUN)
    assert request.schema_errors == []
    assert request.body["conclusion"] == "cancelled" and request.body["status"] == "completed"
    [run] = fake.check_runs("octo/widgets")
    assert (run.status, run.conclusion) == ("completed", "cancelled")
    assert run.output["summary"] == f"superseded by {newer}"


def test_the_fake_refuses_what_github_would(fake: FakeGitHub, client: GitHubClient):
    run_id = start(client)
    too_many = [annotation.payload() for annotation in annotations(51)]
    bodies = [
        {"status": "completed", "output": {"title": "t", "summary": "s"}},  # completed without a conclusion
        {"output": {"title": "t", "summary": "s", "annotations": too_many}},  # more than 50
        {"conclusion": "success", "outptu": {}},  # a misspelt key
    ]
    for body in bodies:
        with pytest.raises(GitHubError, match="HTTP 422"):
            client.patch_check_run("octo", "widgets", run_id, body)
