"""The check run against the fake GitHub, which checks every request body against the REST description:
created in progress, completed with annotations 50 per call and its button, cancelled, never left in
progress (not even by a POST GitHub applied before answering 502)."""

from __future__ import annotations

import json

import pytest

from app.demo.localgithub import FakeGitHub
from app.demo.localgithub.rest_shapes import REST
from app.github import (
    Annotation,
    CheckAction,
    GitHubClient,
    GitHubError,
    cancel_check_run,
    complete_check_run,
    create_check_run,
)
from app.github.checks import OUTPUT_LIMIT

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
    assert len(payload["title"]) == 255 and len(payload["message"]) == 64_000
    with pytest.raises(ValueError, match="annotation_level"):
        Annotation(path="a.py", start_line=1, end_line=1, annotation_level="error", message="m").payload()  # type: ignore[arg-type]


def test_annotation_texts_are_cut_by_bytes_never_inside_a_character():
    # GitHub documents 64 KB: 21,000 three-byte characters are 63,000 bytes, 30,000 are 90,000
    fits = Annotation(path="a.py", start_line=1, end_line=1, annotation_level="warning", message="€" * 21_000)
    assert fits.payload()["message"] == "€" * 21_000
    cut = Annotation(path="a.py", start_line=1, end_line=1, annotation_level="warning", message="€" * 30_000,
                     raw_details="x" + "€" * 30_000).payload()
    assert cut["message"] == "€" * 21_333 and len(cut["message"].encode()) == 63_999
    assert len(cut["raw_details"].encode()) == 64_000 and cut["raw_details"].endswith("€")


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
        {"conclusion": "success", "actions": [{"label": "Re-run the triage now", "description": "d",
                                               "identifier": "rerun"}]},  # a label over 20 characters
    ]
    for body in bodies:
        with pytest.raises(GitHubError, match="HTTP 422"):
            client.patch_check_run("octo", "widgets", run_id, body)


# A check run is never left in progress by a POST whose answer was lost

CREATE = r"/repos/octo/widgets/check-runs"
LISTED = rf"/repos/octo/widgets/commits/{HEAD}/check-runs"


@pytest.mark.parametrize("drop", [False, True], ids=["502", "dropped"])
def test_a_creation_github_applied_before_failing_leaves_one_run(fake: FakeGitHub, client: GitHubClient,
                                                                 sleeps, drop: bool):
    client.list_check_runs("octo", "widgets", HEAD, check_name="PR risk triage")  # a pooled connection
    fake.clear_log()
    fake.fail_after_applying(drop=drop, method="POST", path=CREATE)

    run_id = start(client)

    [run] = fake.check_runs("octo/widgets")
    assert run.id == run_id and run.status == "in_progress" and run.external_id == "run-17"
    assert [(request.method, request.status) for request in fake.calls(route=f"{CREATE}|{LISTED}")] == [
        ("GET", 200), ("POST", 0 if drop else 502), ("GET", 200)]  # looked again, not sent again
    assert sleeps == [1.0]
    complete_check_run(client, "octo", "widgets", run_id, conclusion="success", title="Clear", summary="ok")
    assert [(run.status, run.conclusion) for run in fake.check_runs("octo/widgets")] == [
        ("completed", "success")]


def test_a_creation_github_did_not_apply_is_sent_again_after_a_look(fake: FakeGitHub, client: GitHubClient):
    fake.fail_next(status=502, method="POST", path=CREATE)

    run_id = start(client)

    [run] = fake.check_runs("octo/widgets")
    assert run.id == run_id
    assert [request.status for request in fake.calls("POST", CREATE)] == [502, 201]
    assert [request.schema_errors for request in fake.calls("POST", CREATE)] == [[], []]


def test_an_open_run_of_the_same_external_id_is_reported_to(fake: FakeGitHub, client: GitHubClient):
    left_open = start(client)  # by a job that died before it could record the run
    fake.clear_log()

    assert start(client) == left_open

    assert fake.calls("POST", CREATE) == []
    assert [request.query for request in fake.calls("GET", LISTED)] == [
        {"check_name": "PR risk triage", "filter": "all", "app_id": str(fake.app_id), "per_page": "100"}]


def test_completed_runs_and_other_external_ids_are_left_alone(fake: FakeGitHub, client: GitHubClient):
    done = start(client)
    complete_check_run(client, "octo", "widgets", done, conclusion="failure", title="Breaks", summary="s")
    other = create_check_run(client, "octo", "widgets", name="PR risk triage", head_sha=HEAD,
                             external_id="run-18")

    new = start(client)

    assert new not in (done, other)
    states = {run.id: (run.external_id, run.status) for run in fake.check_runs("octo/widgets")}
    assert states == {done: ("run-17", "completed"), other: ("run-18", "in_progress"),
                      new: ("run-17", "in_progress")}


def test_duplicates_left_open_are_cancelled_and_the_newest_kept(fake: FakeGitHub, client: GitHubClient):
    body = {"name": "PR risk triage", "head_sha": HEAD, "status": "in_progress", "external_id": "run-17"}
    older, newer = (int(client.post_check_run("octo", "widgets", body)["id"]) for _ in range(2))

    assert start(client) == newer

    runs = {run.id: run for run in fake.check_runs("octo/widgets")}
    assert (runs[older].status, runs[older].conclusion) == ("completed", "cancelled")
    assert runs[older].output["summary"] == f"A duplicate of check run {newer}."
    assert (runs[newer].status, len(runs)) == ("in_progress", 2)


def test_the_listing_reads_every_page_with_its_query(fake: FakeGitHub, client: GitHubClient):
    body = {"name": "PR risk triage", "head_sha": HEAD, "external_id": "x"}
    for _ in range(101):
        client.post_check_run("octo", "widgets", body)
    client.post_check_run("octo", "widgets", {**body, "name": "another check"})
    client.post_check_run("octo", "widgets", {**body, "head_sha": "c" * 40})
    fake.clear_log()

    runs = client.list_check_runs("octo", "widgets", HEAD, check_name="PR risk triage")

    assert len(runs) == 101 and {run.name for run in runs} == {"PR risk triage"}
    assert len({run.id for run in runs}) == 101
    pages = fake.calls("GET")
    assert [page.route for page in pages] == [LISTED, rf"/repositories/{fake.repos['octo/widgets'].id}"
                                                      rf"/commits/{HEAD}/check-runs"]
    assert pages[1].query == {"check_name": "PR risk triage", "filter": "all", "app_id": str(fake.app_id),
                              "per_page": "100", "page": "2"}  # the next link keeps the query


# The completed run's button


RERUN = CheckAction(label="Re-run triage", description="Triage this pull request again", identifier="rerun")


def test_the_completed_run_carries_its_actions(fake: FakeGitHub, client: GitHubClient):
    run_id = start(client)

    complete_check_run(client, "octo", "widgets", run_id, conclusion="failure", title="Breaks", summary="s",
                       annotations=annotations(60), actions=[RERUN])

    patches = fake.calls("PATCH", RUN)
    assert ["actions" in request.body for request in patches] == [False, True]  # shown once completed
    assert patches[-1].body["actions"] == [
        {"label": "Re-run triage", "description": "Triage this pull request again", "identifier": "rerun"}]
    assert all(request.schema_errors == [] and request.status == 200 for request in patches)
    [run] = fake.check_runs("octo/widgets")
    assert run.actions == patches[-1].body["actions"]


def test_actions_are_kept_within_githubs_limits(client: GitHubClient):
    for action in (CheckAction("l" * 21, "d", "i"), CheckAction("l", "d" * 41, "i"),
                   CheckAction("l", "d", "i" * 21), CheckAction("", "d", "i")):
        with pytest.raises(ValueError, match="characters"):
            action.payload()
    with pytest.raises(ValueError, match="at most 3 actions"):
        complete_check_run(client, "octo", "widgets", 1, conclusion="success", title="t", summary="s",
                           actions=[RERUN] * 4)
