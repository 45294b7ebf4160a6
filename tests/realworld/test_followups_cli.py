"""`prtriage followups` on the real radixark/miles (../shared/realworld/miles.bundle): the promises the real
diffs and commits make, each at its path and line, and their states asked of the local GitHub over real HTTP
with a token, as a GitHub Actions job would with its GITHUB_TOKEN.

What the bundle holds: pr-2203 -> head-2026-08-21 is three weeks of real main, whose added lines carry two
`# TODO(#N)` comments and a docs page saying "tracked in [PR #2033](...)"; pr-2077 -> pr-2203 is the revert
of #2077 ("#2203: reverts #2077"); base-2077 -> pr-2077 adds one assert and a comment naming no PR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.demo.localgithub import FakeGitHub

from .conftest import PROJECT

MILES = "radixark/miles"
EVENT = PROJECT.parent / "shared" / "fixtures" / "github" / "webhooks" / "pull_request" / "opened.json"
PROMISES = [  # (target, path, line, sentence) of the real head-2026-08-21
    ("radixark/miles#1792", "docs/advanced/lora.md", 60,  # and again at 374, "is pending PR #1792"
     "is under development in open PR #1792 (https://github.com/radixark/miles/pull/1792)"),
    ("radixark/miles#2033", "docs/advanced/lora.md", 221,
     "tracked in PR #2033 (https://github.com/radixark/miles/pull/2033)."),
    ("radixark/miles#2591", "examples/experimental/openenv/glm52_tbench2/run_glm5_2_744b_a40b_daytona.py", 60,
     "TODO(#2591): the agent loop cannot see this cut and generates past it."),
    ("radixark/miles#2557", "tests/ci/test/test_ci_discovery_coverage.py", 33,
     "TODO(#2557): move it under tests/ and delete this entry."),
]


def followups(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`python -m app.cli followups ARGS` with only ENV of the GitHub variables (none inherited)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PRTRIAGE_"))}
    done = subprocess.run([sys.executable, "-m", "app.cli", "followups", *args], cwd=PROJECT, text=True,
                          capture_output=True, env={**clean, **(env or {})}, timeout=300, check=False)
    return done.returncode, done.stdout, done.stderr


def as_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    status, out, err = followups(*args, "--format", "json", env=env)
    assert status in (0, 1), err
    document = json.loads(out)
    assert list(document) == ["references"]
    return status, document["references"]


def sha(repo: Path, rev: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", rev], check=True, capture_output=True,
                          text=True).stdout.strip()


def event_file(tmp_path: Path, *, number: int, body: str, base: str, head: str) -> Path:
    """The shared `pull_request` `opened` payload, made one of radixark/miles."""
    payload = json.loads(EVENT.read_text())
    payload["number"] = number
    pull = payload["pull_request"]
    pull.update(number=number, title="A change", body=body)
    pull["base"]["sha"], pull["head"]["sha"] = base, head
    pull["base"]["repo"]["full_name"] = payload["repository"]["full_name"] = MILES
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return path


def test_the_real_todo_lines_are_promises_at_their_path_and_line(real_miles: Path) -> None:
    status, references = as_json("--repo", str(real_miles), "--base", "pr-2203", "--head", "head-2026-08-21",
                                 env={"GITHUB_REPOSITORY": MILES})
    assert status == 0
    promised = [r for r in references if r["kind"] != "mention"]
    assert [(r["target"], r["path"], r["line"], r["sentence"]) for r in promised] == PROMISES
    assert {(r["kind"], r["source"], r["state"]) for r in references if r["kind"] != "mention"} == \
        {("followup", "diff", "unknown")}
    assert all(r["source"] == "diff" and r["path"] and r["line"] for r in references)
    # each line is what the head revision holds at that path and line
    for _, path, line, _ in PROMISES:
        text = subprocess.run(["git", "-C", str(real_miles), "show", f"head-2026-08-21:{path}"], check=True,
                              capture_output=True, text=True).stdout
        assert "#" in text.splitlines()[line - 1]


def test_the_text_format_names_each_promise_and_says_why_states_are_unknown(real_miles: Path) -> None:
    status, out, _ = followups("--repo", str(real_miles), "--base", "pr-2203", "--head", "head-2026-08-21",
                               env={"GITHUB_REPOSITORY": MILES})
    assert status == 0
    for target, path, line, _ in PROMISES:
        assert f"followup     {target}  unknown  {path}:{line}" in out
    assert "states unknown: GITHUB_TOKEN is not set" in out


def test_the_real_revert_commit_is_a_revert(real_miles: Path) -> None:
    status, references = as_json("--repo", str(real_miles), "--base", "pr-2077", "--head", "pr-2203",
                                 env={"GITHUB_REPOSITORY": MILES})
    assert status == 0
    assert [(r["target"], r["kind"], r["source"], r["path"], r["line"]) for r in references] == [
        ("radixark/miles#2203", "mention", "commit", None, None),
        ("radixark/miles#2077", "revert", "commit", None, None)]


def test_the_event_names_the_pull_request_and_its_revisions(real_miles: Path, tmp_path: Path) -> None:
    # a GitHub Actions job: the event at GITHUB_EVENT_PATH, --base and --head from it, #2077 itself left out
    event = event_file(tmp_path, number=2077, body="Adds the assert. See #2000.",
                       base=sha(real_miles, "base-2077"), head=sha(real_miles, "pr-2077"))
    status, references = as_json("--repo", str(real_miles), env={"GITHUB_EVENT_PATH": str(event)})
    assert status == 0
    assert [(r["target"], r["kind"], r["source"], r["path"]) for r in references] == [
        ("radixark/miles#2000", "mention", "body", None)]


def miles_on(fake: FakeGitHub) -> dict[str, str]:
    """The local GitHub holding the PRs the real promises name; the environment of a job reading it."""
    fake.add_repo(MILES, installation_id=7)
    for number, state in ((2591, {}), (2557, {"state": "closed", "merged": True,
                                                "merged_at": "2026-08-25T10:00:00Z"}),
                          (2033, {"state": "closed"}), (1792, {})):
        fake.add_pull(MILES, number, head_sha=f"{number:040d}", base_sha="0" * 40, **state)
    return {"GITHUB_TOKEN": fake.issue_token(7), "GITHUB_API_URL": fake.url}


def test_states_come_from_the_api_with_a_token(real_miles: Path, tmp_path: Path,
                                               fake_github: FakeGitHub) -> None:
    env = miles_on(fake_github)
    event = event_file(tmp_path, number=2600, body="Depends on #2591.", base=sha(real_miles, "pr-2203"),
                       head=sha(real_miles, "head-2026-08-21"))
    status, references = as_json("--repo", str(real_miles), "--event", str(event), env=env)
    kept = {r["target"]: (r["kind"], r["source"], r["state"]) for r in references if r["kind"] != "mention"}
    assert kept == {"radixark/miles#2591": ("prerequisite", "body", "open"),  # the body's role is stronger
                    "radixark/miles#2033": ("followup", "diff", "closed_unmerged"),
                    "radixark/miles#2557": ("followup", "diff", "merged"),
                    "radixark/miles#1792": ("followup", "diff", "open")}
    assert status == 1  # the prerequisite is open: the App's rule blocks
    asked = fake_github.calls("GET", rf"/repos/{MILES}/(issues|pulls)/\d+")
    assert asked and {request.auth for request in asked} == {"token"}
    assert {r["state"] for r in references if r["kind"] == "mention"} == {"unknown"}  # never asked

    fake_github.add_pull(MILES, 2591, head_sha=f"{2591:040d}", base_sha="0" * 40, state="closed",
                         merged=True, merged_at="2026-08-26T10:00:00Z")
    status, references = as_json("--repo", str(real_miles), "--event", str(event), env=env)
    assert status == 0
    assert [r["state"] for r in references if r["target"] == "radixark/miles#2591"] == ["merged"]


def test_a_token_the_api_does_not_answer_for_cannot_run(real_miles: Path, tmp_path: Path,
                                                         fake_github: FakeGitHub) -> None:
    env = miles_on(fake_github)
    fake_github.fail_next(20, status=502)
    status, out, err = followups("--repo", str(real_miles), "--base", "pr-2203", "--head", "head-2026-08-21",
                                 "--format", "json", env={**env, "GITHUB_REPOSITORY": MILES})
    assert status == 3, err
    assert "cannot resolve the references" in err
    assert {r["state"] for r in json.loads(out)["references"]} == {"unknown"}
    assert env["GITHUB_TOKEN"] not in out + err


@pytest.mark.parametrize(("args", "message"), [
    ((), "give --repo PATH --base REV --head REV, or --event FILE"),
    (("--base", "pr-2077"), "--base and --head go with --repo"),
])
def test_bad_usage_exits_2(args: tuple[str, ...], message: str) -> None:
    status, _, err = followups(*args)
    assert status == 2 and message in err


def test_an_event_that_is_no_pull_request_is_bad_usage(tmp_path: Path) -> None:
    push = tmp_path / "push.json"
    push.write_text(json.dumps({"ref": "refs/heads/main", "repository": {"full_name": MILES}}))
    status, _, err = followups("--event", str(push))
    assert status == 2 and "not a pull_request event" in err


def test_a_repository_git_cannot_read_cannot_run(tmp_path: Path) -> None:
    status, _, err = followups("--repo", str(tmp_path), "--base", "a", "--head", "b",
                               env={"GITHUB_REPOSITORY": MILES})
    assert status == 3 and "not a git repository" in err


def test_an_event_alone_gives_its_title_and_body(tmp_path: Path) -> None:
    event = event_file(tmp_path, number=2600, body="Depends on #2591. A follow-up PR #2602 will add the "
                       "tests.", base="0" * 40, head="1" * 40)
    status, out, err = followups("--event", str(event))
    assert status == 0, err  # no token: nothing resolved, nothing blocks, and the output says so
    assert "prerequisite radixark/miles#2591  unknown  body" in out
    assert "followup     radixark/miles#2602  unknown  body" in out
    assert "states unknown: GITHUB_TOKEN is not set" in out
