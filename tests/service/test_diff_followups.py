"""A promise made only in a line the PR adds (`# TODO(#N): ...`), through the running service against the
local GitHub over real HTTP, on SQLite and PostgreSQL: the triage's comment and check name its path:line,
the merge opens a risk window for it, #N's merge closes it; a PR that removes such a line opens nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.demo.localgithub import FakeGitHub
from app.github.reference_states import CACHE
from app.store.models import RiskWindow
from app.store.session import session_scope

from .conftest import Service
from .payloads import pull_request_event, sha
from .test_windows import BASE, MERGED_AT, REPO

TODO = "    # TODO(#2300): the sampler drops the last partial batch until then."
ADDS_TODO = f"@@ -1,3 +1,4 @@\n def sample(batch):\n+{TODO}\n     return batch\n \n"
REMOVES_TODO = f"@@ -1,4 +1,3 @@\n def sample(batch):\n-{TODO}\n     return batch\n \n"


@pytest.fixture(autouse=True)
def fresh_resolutions() -> Iterator[None]:
    CACHE.clear()
    yield
    CACHE.clear()


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO, installation_id=1)
    fake_github.add_pull(REPO, 2300, head_sha=sha("head 2300"), base_sha=BASE, title="Keep the last batch")
    return fake_github


def add(fake: FakeGitHub, number: int, patch: str, **fields: Any) -> None:
    fake.add_pull(REPO, number, head_sha=sha(f"head {number}"), base_sha=BASE, title="Faster batching",
                  body="Batches are built once per epoch.", author="author",
                  files=[{"filename": "src/sampler.sh", "status": "modified", "patch": patch}],
                  commits=[(sha(f"commit {number}"), "Build batches once")], **fields)


def deliver(service: Service, fake: FakeGitHub, number: int, action: str, variant: str | None = None) -> None:
    payload = pull_request_event(fake, action, variant=variant, full_name=REPO, number=number,
                                 head_sha=sha(f"head {number}"), base_sha=BASE)
    assert service.post("pull_request", payload).status_code == 202
    service.drain()


def merge(service: Service, fake: FakeGitHub, number: int, patch: str | None = None) -> None:
    if patch is None:
        fake.add_pull(REPO, number, head_sha=sha(f"head {number}"), base_sha=BASE, state="closed",
                      merged=True, merged_at=MERGED_AT)
    else:
        add(fake, number, patch, state="closed", merged=True, merged_at=MERGED_AT)
    deliver(service, fake, number, "closed", "merged")


def windows(service: Service) -> list[tuple[str, str, list[str], str | None]]:
    with session_scope(service.services.sessions, read_only=True) as session:
        return [(w.state, w.risk, [r.ref for r in w.awaiting], w.close_reason)
                for w in session.query(RiskWindow).order_by(RiskWindow.id)]


def test_a_todo_line_is_the_promise_the_comment_the_check_and_the_window_keep(service: Service,
                                                                            fake: FakeGitHub) -> None:
    add(fake, 41, ADDS_TODO)
    deliver(service, fake, 41, "opened")

    [comment] = fake.comments_on(REPO, 41)
    assert "pending followup at `src/sampler.sh:2` (in this diff)" in comment.body
    assert "Promised follow-up \\#2300 is open, not merged yet" in comment.body
    [run] = fake.check_runs(REPO)
    assert run.conclusion == "neutral"
    [annotation] = run.annotations
    assert (annotation["path"], annotation["start_line"], annotation["annotation_level"]) == \
        ("src/sampler.sh", 2, "warning")

    merge(service, fake, 41, ADDS_TODO)
    risk = "src/sampler.sh:2: TODO(#2300): the sampler drops the last partial batch until then."
    assert windows(service) == [("open", risk, [f"{REPO}#2300"], None)]

    merge(service, fake, 2300)
    assert windows(service) == [("closed", risk, [f"{REPO}#2300"], "follow-up #2300 merged")]
    assert {d.status for d in service.deliveries()} == {"processed"}


def test_a_pr_that_removes_the_todo_line_opens_nothing(service: Service, fake: FakeGitHub) -> None:
    add(fake, 42, REMOVES_TODO)
    deliver(service, fake, 42, "opened")
    [run] = fake.check_runs(REPO)
    assert (run.conclusion, run.annotations) == ("success", [])
    assert fake.comments_on(REPO, 42) == []

    merge(service, fake, 42, REMOVES_TODO)
    assert windows(service) == []
    assert {d.status for d in service.deliveries()} == {"processed"}
