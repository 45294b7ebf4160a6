"""The service end to end, as GitHub sees it: signed deliveries over real HTTP to the live app, its own
consumer thread running the jobs, the fake GitHub over real HTTP serving the miles twin's trees."""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from twin.expected import LORA_COLOCATE_SUITES
from twin.variants import ARGUMENTS, INCIDENT_ASSERT

from app.config import Settings
from app.demo.localgithub import FakeGitHub
from app.store.models import TriageRun

from .conftest import BASE, INCIDENT, MILES, Service, make_service, wait_for
from .payloads import delivery_headers, encode, pull_request_event, sha, signature

FIXED = sha("miles head, the assert taken out again")
SUITE_LINE = re.compile(r"^- `(?P<suite>[^`]+)`$", re.MULTILINE)


def line_of_assert(tree: Path) -> int:
    lines = (tree / ARGUMENTS).read_text().splitlines()
    [line] = [n for n, text in enumerate(lines, start=1) if INCIDENT_ASSERT.split(",")[0] in text]
    return line


def finished(service: Service, count: int) -> Callable[[], list[TriageRun] | None]:
    def done() -> list[TriageRun] | None:
        runs = service.runs()
        return runs if len(runs) >= count and all(r.status not in ("queued", "running") for r in runs) \
            else None
    return done


@pytest.fixture
def live(make_settings: Callable[..., Settings], database_url: str) -> Iterator[Service]:
    built = make_service(make_settings(database_url=database_url), workers=1)
    yield built
    built.close()


def test_an_incident_pull_request_gets_one_comment_and_a_failing_check(
        live: Service, miles: FakeGitHub, twin_trees: dict[str, Path], tmp_path: Path) -> None:
    fake = miles
    fake.add_pull(MILES, 1, head_sha=INCIDENT, base_sha=BASE, files=[ARGUMENTS],
                  title="Forbid LoRA + offload-train + disable-weights-backuper")
    opened = pull_request_event(fake, "opened", full_name=MILES, number=1, head_sha=INCIDENT, base_sha=BASE)
    guid = str(uuid.uuid4())
    assert live.post("pull_request", opened, guid=guid).status_code == 202
    [run] = wait_for(finished(live, 1), what="the triage of the opened PR")

    assert (run.status, run.conclusion, run.head_sha) == ("completed", "failure", INCIDENT)
    [comment] = fake.comments_on(MILES, 1)
    assert comment.author == fake.bot_login
    first_line = comment.body.splitlines()[0]
    assert first_line == "**❌ This pull request breaks 5 existing CI suites.**"
    assert sorted(SUITE_LINE.findall(comment.body)) == sorted(LORA_COLOCATE_SUITES)
    line = line_of_assert(twin_trees["incident"])
    assert f"`{ARGUMENTS}:{line}` (in this diff)" in comment.body
    [check] = fake.check_runs(MILES)
    assert (check.name, check.head_sha, check.status, check.conclusion) == (
        "PR risk triage", INCIDENT, "completed", "failure")
    assert check.output["title"] == "Breaks 5 existing CI suites"
    [annotation] = check.annotations
    assert (annotation["path"], annotation["start_line"], annotation["annotation_level"]) == (
        ARGUMENTS, line, "failure")
    assert "offload-train" in annotation["message"]

    # the same delivery again (GitHub's redelivery): 200, and nothing at all happens
    requests_before = len(fake.requests)
    again = live.post("pull_request", opened, guid=guid)
    assert (again.status_code, again.json()["result"]) == (200, "duplicate")
    # a forged delivery: refused, nothing stored, nothing done
    body = encode(opened)
    forged = delivery_headers("pull_request", body)
    forged["X-Hub-Signature-256"] = signature(body, "a guess")
    assert live.post("pull_request", body=body, headers=forged).status_code == 401
    time.sleep(1.0)  # a job that was wrongly queued would have started by now
    assert len(fake.requests) == requests_before
    assert len(live.runs()) == 1
    assert len(live.deliveries()) == 1

    # a push that takes the assert out again: the same comment is edited, a new check run succeeds
    fixed_tree = tmp_path / "fixed"
    shutil.copytree(twin_trees["base"], fixed_tree)
    fake.add_tarball(MILES, FIXED, fixed_tree)
    fake.add_pull(MILES, 1, head_sha=FIXED, base_sha=BASE, files=[ARGUMENTS],
                  title="Forbid LoRA + offload-train + disable-weights-backuper")
    pushed = pull_request_event(fake, "synchronize", full_name=MILES, number=1, head_sha=FIXED, base_sha=BASE)
    assert live.post("pull_request", pushed).status_code == 202
    runs = wait_for(finished(live, 2), what="the triage of the push")
    assert [(r.head_sha, r.conclusion) for r in runs] == [(INCIDENT, "failure"), (FIXED, "success")]
    [edited] = fake.comments_on(MILES, 1)
    assert edited.id == comment.id
    assert edited.body.splitlines()[0].startswith("**✅ This pull request breaks no existing CI suite")
    assert not SUITE_LINE.findall(edited.body)
    checks = sorted(fake.check_runs(MILES), key=lambda c: c.id)
    assert [(c.head_sha, c.conclusion) for c in checks] == [(INCIDENT, "failure"), (FIXED, "success")]
    assert len(fake.calls("POST", r"/repos/radixark/miles/issues/1/comments")) == 1
