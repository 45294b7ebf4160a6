"""The JSON API on both backends: shapes exactly as INTERFACES.md gives them, filters, cursors, errors,
and the OpenAPI schema that documents it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from .conftest import Client
from .seed import FAIL_FAST_RISK, LORA_ARGV, PRIVATE, PUBLIC, Seed

WINDOW_KEYS = {"id", "repo", "kind", "pr", "awaiting", "state", "opened_at", "closed_at", "close_reason",
               "risk"}
PR_KEYS = {"number", "title", "url", "author", "merged_at"}
AWAITED_KEYS = {"ref", "kind", "state", "url"}
EVENT_KEYS = {"at", "actor", "what"}
RUN_KEYS = {"id", "repo", "pr", "head_sha", "base_sha", "status", "conclusion", "check_run_id",
            "superseded_by", "error", "created_at", "started_at", "finished_at", "findings"}
FINDING_KEYS = {"id", "kind", "severity", "path", "line", "in_diff", "message", "suites", "scripts",
                "acknowledged_by", "ack_reason", "acknowledged_at"}
SUITE_KEYS = {"id", "script", "argv", "base", "head"}


@pytest.fixture
def api(seeded_any: tuple[str, Seed], make_client: Callable[..., Client]) -> tuple[Client, Seed]:
    return make_client(seeded_any[0]), seeded_any[1]


def utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    assert moment.utcoffset() is not None and moment.utcoffset() == UTC.utcoffset(None), text
    return moment


def check_window(item: dict[str, Any]) -> None:
    assert set(item) == WINDOW_KEYS
    assert item["kind"] == "followup"  # the seed has no dead suite (tests/dashboard/test_repositories.py)
    assert set(item["pr"]) == PR_KEYS
    assert item["state"] in ("open", "closed")
    utc(item["opened_at"])
    utc(item["pr"]["merged_at"])
    for awaited in item["awaiting"]:
        assert set(awaited) == AWAITED_KEYS and awaited["kind"] in ("followup", "prerequisite")
    assert (item["closed_at"] is None) == (item["state"] == "open") == (item["close_reason"] is None)


def test_risk_windows_shape_and_order(api: tuple[Client, Seed]) -> None:
    client, seeded = api
    body = client.get("/api/risk-windows").json()
    assert set(body) == {"items", "next"} and body["next"] is None
    for item in body["items"]:
        check_window(item)
    windows = seeded.windows
    assert [item["id"] for item in body["items"]] == [windows[role] for role in ("oldest", "private", "cross",
                                                                                  "fresh")]
    oldest = body["items"][0]
    assert oldest["repo"] == PUBLIC and oldest["risk"] == FAIL_FAST_RISK and oldest["state"] == "open"
    assert oldest["pr"] | {"merged_at": None} == {
        "number": 10, "title": "Revert the over-broad assert in validate_args", "author": "octocat",
        "url": f"https://github.com/{PUBLIC}/pull/10", "merged_at": None}
    assert oldest["awaiting"] == [{"ref": f"{PUBLIC}#2204", "kind": "followup", "state": "open",
                                   "url": f"https://github.com/{PUBLIC}/pull/2204"}]
    assert body["items"][1]["awaiting"][0]["kind"] == "prerequisite"
    assert body["items"][3]["awaiting"] == []


def test_risk_windows_filters(api: tuple[Client, Seed]) -> None:
    client, seeded = api

    def ids(**params: str) -> list[int]:
        return [item["id"] for item in client.get("/api/risk-windows", params=params).json()["items"]]

    closed = client.get("/api/risk-windows", params={"state": "closed"}).json()["items"]
    assert [item["id"] for item in closed] == [seeded.windows["closed"]]
    assert closed[0]["close_reason"] == "superseded by #2223" and utc(closed[0]["closed_at"])
    assert ids(repo=PRIVATE) == [seeded.windows["private"]]
    assert len(ids(state="all")) == 5
    assert ids(state="all", repo=PRIVATE.upper()) == [seeded.windows["private"]]
    assert client.get("/api/risk-windows", params={"state": "gone"}).status_code == 422
    assert client.get("/api/risk-windows", params={"repo": "no-slash"}).status_code == 422


def test_risk_window_pages(api: tuple[Client, Seed]) -> None:
    client, seeded = api
    seen: list[int] = []
    params: dict[str, str | int] = {"state": "all", "limit": 2}
    while True:
        body = client.get("/api/risk-windows", params=params).json()
        seen += [item["id"] for item in body["items"]]
        if body["next"] is None:
            break
        params["cursor"] = body["next"]
    assert sorted(seen) == sorted(seeded.windows.values()) and len(seen) == len(set(seen))


@pytest.mark.parametrize("cursor", ["garbage", "bm90IGEgY3Vyc29y", "MjAyNi0wMS0wMXwx"])
def test_an_invalid_cursor_is_a_400_json_error(api: tuple[Client, Seed], cursor: str) -> None:
    client, _ = api
    for path in ("/api/risk-windows", "/api/runs", "/api/repositories"):
        response = client.get(path, params={"cursor": cursor})
        assert response.status_code == 400 and response.headers["content-type"] == "application/json"
        assert "invalid cursor" in response.json()["detail"]


def test_one_risk_window_adds_its_events(api: tuple[Client, Seed]) -> None:
    client, seeded = api
    body = client.get(f"/api/risk-windows/{seeded.windows['closed']}").json()
    assert set(body) == WINDOW_KEYS | {"events"}
    check_window({key: value for key, value in body.items() if key != "events"})
    assert all(set(event) == EVENT_KEYS for event in body["events"])
    assert [(event["actor"], event["what"]) for event in body["events"]] == [
        ("prtriage", f"opened, awaiting {PUBLIC}#2100 (followup)"),
        ("maintainer", "closed: superseded by #2223")]
    assert utc(body["events"][0]["at"]) < utc(body["events"][1]["at"])
    missing = client.get("/api/risk-windows/9999")
    assert missing.status_code == 404 and missing.json() == {"detail": "no risk window 9999"}


def test_runs_with_findings(api: tuple[Client, Seed]) -> None:
    client, seeded = api
    body = client.get("/api/runs").json()
    assert set(body) == {"items", "next"} and body["next"] is None
    assert [run["id"] for run in body["items"]] == [seeded.runs["clean"], seeded.runs["incident"]]
    for run in body["items"]:
        assert set(run) == RUN_KEYS and set(run["pr"]) == PR_KEYS
        assert all(set(finding) == FINDING_KEYS for finding in run["findings"])
    incident = body["items"][1]
    assert incident["conclusion"] == "failure" and incident["findings"][0]["severity"] == "blocking"
    assert incident["findings"][0]["suites"] == ["lora-e2e"]
    filtered = client.get("/api/runs", params={"repo": PUBLIC, "pr": 10}).json()["items"]
    assert [run["id"] for run in filtered] == [seeded.runs["incident"]]
    assert client.get("/api/runs", params={"repo": PUBLIC, "pr": 7}).json()["items"] == []


def test_one_run_with_every_suite(api: tuple[Client, Seed]) -> None:
    client, seeded = api
    body = client.get(f"/api/runs/{seeded.runs['incident']}").json()
    assert set(body) == RUN_KEYS | {"summary", "timing", "suites", "acknowledged_by", "ack_reason",
                                    "acknowledged_at", "events"}
    assert [suite["id"] for suite in body["suites"]] == ["lora-e2e", "dense-e2e"]
    lora = body["suites"][0]
    assert set(lora) == SUITE_KEYS and lora["argv"] == LORA_ARGV
    assert lora["base"]["outcome"] == "accepted"
    assert lora["head"] == {"outcome": "rejected", "exception": "AssertionError", "line": 612,
                            "message": "backuper required with colocate", "path": "miles/args.py"}
    assert body["summary"] == {"suites": 2} and body["timing"] == {"total": 1.5}
    assert client.get("/api/runs/9999").status_code == 404


HUGE = "99999999999999999999999"  # past 64 bits: the database driver would overflow


def test_numbers_past_what_the_columns_hold_are_a_422_not_a_500(api: tuple[Client, Seed]) -> None:
    client, _ = api
    for url in (f"/api/runs?pr={HUGE}", f"/api/runs/{HUGE}", f"/api/risk-windows/{HUGE}",
                f"/api/runs?pr={2**31}", f"/api/runs/{2**63}"):
        assert client.get(url).status_code == 422, url
    assert client.get(f"/api/runs?pr={2**31 - 1}").json()["items"] == []
    assert client.get(f"/api/runs/{2**63 - 1}").status_code == 404


def test_openapi_documents_the_api_and_hides_the_pages(api: tuple[Client, Seed]) -> None:
    client, _ = api
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    assert set(paths) == {"/api/risk-windows", "/api/risk-windows/{window_id}",
                          "/api/risk-windows/{window_id}/close", "/api/runs", "/api/runs/{run_id}",
                          "/api/repositories", "/api/repositories/{owner}/{name}",
                          "/api/repositories/{owner}/{name}/suites/{suite}"}
    assert paths["/api/repositories/{owner}/{name}"]["get"]["tags"] == ["repositories"]
    repository = schema["components"]["schemas"]["RepositoryOut"]
    assert set(repository["properties"]) == {"repo", "default_branch", "policy", "last_health", "dead_suites"}
    assert set(schema["components"]["schemas"]["HealthOut"]["properties"]) == {
        "sha", "at", "suites", "accepted", "could_analyse"}
    assert set(schema["components"]["schemas"]["DeadSuiteOut"]["properties"]) == {
        "suite", "script", "error", "path", "line", "since_sha", "window_id"}
    listing = paths["/api/risk-windows"]["get"]
    assert listing["tags"] == ["risk windows"] and listing["description"]
    assert {p["name"] for p in listing["parameters"]} >= {"state", "repo", "cursor"}
    assert {"200", "400", "401", "403"} <= set(listing["responses"])
    assert paths["/api/runs"]["get"]["tags"] == ["triage runs"]
    assert paths["/api/risk-windows/{window_id}/close"]["post"]["requestBody"]
    window = schema["components"]["schemas"]["RiskWindowOut"]
    assert set(window["properties"]) == WINDOW_KEYS
    assert window["properties"]["state"]["enum"] == ["open", "closed"]
