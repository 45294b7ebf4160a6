"""`prtriage demo`: the GitHub App end to end on this machine, with no GitHub account.

A local GitHub (app/demo/localgithub, real HTTP on loopback) holds one repository, `example/incident`, made of
the bundled example (examples/incident: a validator, a CI script, and a pull request that adds one assert),
and knows the demo App by a key made for the occasion. `prtriage serve` runs as it does in production, pointed
at that GitHub, with its database, queue and cache in a temporary directory. The demo sends it the signed
`pull_request` `opened` delivery GitHub would send, waits for the check run, prints it and the sticky comment,
then pushes the base to the default branch (the service checks main's health), and leaves the dashboard
running until Ctrl-C (`--once`: stops at once)."""

from __future__ import annotations

import hashlib
import os
import signal
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.bundled import bundled
from app.config import ConfigError, Settings
from app.demo.localgithub import FakeGitHub, make_app_key
from app.demo.localgithub.hook_deliveries import (
    delivery_headers,
    encode,
    packaged,
    pull_request_payload,
    push_payload,
)
from app.demo.localgithub.state import FakeCheckRun

EXAMPLE = bundled("examples") / "incident"
REPO = "example/incident"
NUMBER = 1
TITLE = "Forbid LoRA with --offload-train and --disable-weights-backuper"
BODY = "A LoRA run that offloads training cannot also disable the weights backuper."
RESULT_TIMEOUT = 300.0  # the first triage of a head is cold: capture and both revisions in the sandbox

Say = Callable[[str], None]


@dataclass
class Outcome:
    """What the driver saw; `error` set when the demo could not show a result."""

    check: FakeCheckRun | None = None
    comment: str | None = None
    seconds: float = 0.0
    error: str | None = None
    main_health: dict[str, Any] | None = None  # the default branch's, after the push of the base
    done: threading.Event = field(default_factory=threading.Event)


def tree_files(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file() and "__pycache__" not in path.parts}


def tree_sha(files: dict[str, bytes]) -> str:
    """A stable 40-hex name for a tree's content, standing in for its commit sha."""
    digest = hashlib.sha1()
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha1(data).digest())
    return digest.hexdigest()


def changed_files(base: dict[str, bytes], head: dict[str, bytes]) -> list[dict[str, str]]:
    """The pull request's file list, as GitHub's `pulls/{n}/files` gives it."""
    changes = []
    for name in sorted(base.keys() | head.keys()):
        if name not in head:
            changes.append({"filename": name, "status": "removed"})
        elif name not in base:
            changes.append({"filename": name, "status": "added"})
        elif base[name] != head[name]:
            changes.append({"filename": name, "status": "modified"})
    return changes


def example_directory() -> Path:
    if not (EXAMPLE / "base").is_dir() or not (EXAMPLE / "head").is_dir():
        raise ConfigError(f"the bundled example is missing ({EXAMPLE}): reinstall prtriage "
                          "(pip install --force-reinstall prtriage)")
    return EXAMPLE


def stage(fake: FakeGitHub, example: Path) -> tuple[str, str]:
    """The example as a repository of the local GitHub, its pull request #1 open; (base sha, head sha)."""
    base, head = tree_files(example / "base"), tree_files(example / "head")
    base_sha, head_sha = tree_sha(base), tree_sha(head)
    fake.add_installation(1, REPO.split("/")[0])
    fake.add_repo(REPO, installation_id=1)
    fake.add_tarball(REPO, base_sha, example / "base")
    fake.add_tarball(REPO, head_sha, example / "head")
    # the policy is read from the base revision, as for any repository that carries its own
    fake.set_file(REPO, base_sha, ".github/pr-triage.yml", (example / "policy.yml").read_bytes())
    fake.add_pull(REPO, NUMBER, head_sha=head_sha, base_sha=base_sha, title=TITLE, body=BODY,
                  author="octocat", files=list(changed_files(base, head)))
    return base_sha, head_sha


def demo_settings(fake: FakeGitHub, secret: str, directory: Path, port: int) -> Settings:
    """The service's settings for the demo: everything in DIRECTORY, nothing from the environment that could
    point it elsewhere (a DATABASE_URL or QUEUE_URL of a real deployment, say)."""
    return Settings(github_app_id=fake.app_id, github_private_key=fake.key.private_pem,
                    github_private_key_path=None, github_webhook_secret=secret, github_api_url=fake.url,
                    database_url=None, queue_url=None, dashboard_token=None, data_dir=directory / "data",
                    cache_dir=directory / "cache", host="127.0.0.1", port=port, workers=1,
                    log_level="WARNING")


def wait_until_up(base_url: str, stopped: threading.Event, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stopped.is_set():
        try:
            if httpx.get(f"{base_url}healthz", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def completed_check(fake: FakeGitHub) -> FakeCheckRun | None:
    return next((run for run in fake.check_runs(REPO) if run.status == "completed"), None)


def drive(fake: FakeGitHub, settings: Settings, shas: tuple[str, str], outcome: Outcome,
          stopped: threading.Event, say: Say) -> None:
    """The GitHub side of the demo: deliver `opened`, wait for the check run, note what was posted."""
    base_url = f"http://127.0.0.1:{settings.port}/"
    try:
        if not wait_until_up(base_url, stopped):
            outcome.error = "the service did not come up"
            return
        payload = pull_request_payload(packaged("pull_request/opened"), fake, full_name=REPO, number=NUMBER,
                                       head_sha=shas[1], base_sha=shas[0])
        payload["pull_request"].update(title=TITLE, body=BODY)
        body = encode(payload)
        assert settings.github_webhook_secret is not None
        headers = delivery_headers("pull_request", body,
                                   secret=settings.github_webhook_secret.get_secret_value())
        started = time.monotonic()
        answer = httpx.post(f"{base_url}webhooks/github", content=body, headers=headers, timeout=30)
        say(f"sent `pull_request` `opened` for {REPO}#{NUMBER}, signed as GitHub signs it: "
            f"HTTP {answer.status_code}; triage runs in the sandbox …")
        if answer.status_code != 202:
            outcome.error = f"the intake answered {answer.status_code}: {answer.text[:200]}"
            return
        while (check := completed_check(fake)) is None:
            if stopped.wait(0.2) or time.monotonic() - started > RESULT_TIMEOUT:
                outcome.error = f"no completed check run after {RESULT_TIMEOUT:.0f} s"
                return
        outcome.check, outcome.seconds = check, time.monotonic() - started
        comments = fake.comments_on(REPO, NUMBER)
        outcome.comment = comments[0].body if comments else None
        outcome.main_health = push_main(fake, settings, base_url, shas[0], stopped)
    except (httpx.HTTPError, OSError) as exc:
        outcome.error = f"{type(exc).__name__}: {exc}"
    finally:
        outcome.done.set()


def push_main(fake: FakeGitHub, settings: Settings, base_url: str, base_sha: str,
              stopped: threading.Event) -> dict[str, Any] | None:
    """The example's base lands on its default branch: the service checks main's health, and the
    repository page has a matrix and an acceptance to show. The last health, or None in time."""
    fake.push(REPO, base_sha, "The example's main")
    body = encode(push_payload(fake, full_name=REPO, before=None, commits=[base_sha]))
    assert settings.github_webhook_secret is not None
    headers = delivery_headers("push", body, secret=settings.github_webhook_secret.get_secret_value())
    httpx.post(f"{base_url}webhooks/github", content=body, headers=headers, timeout=30)
    deadline = time.monotonic() + RESULT_TIMEOUT
    while not stopped.wait(0.2) and time.monotonic() < deadline:
        health = httpx.get(f"{base_url}api/repositories/{REPO}", timeout=10).json().get("last_health")
        if health:
            return dict(health)
    return None


def report(outcome: Outcome, settings: Settings, say: Say, *, serving: bool) -> None:
    """What the App posted; the dashboard's address only while SERVING (with --once the service stops as
    soon as this is printed, and an address that answers nothing would be a dead end)."""
    if outcome.error is not None or outcome.check is None:
        say(f"no result: {outcome.error}")
        return
    check = outcome.check
    say(f"check run `{check.name}` on {check.head_sha[:12]}: {check.conclusion}: {check.output.get('title')} "
        f"({outcome.seconds:.1f} s, {len(check.annotations)} annotation(s) on the offending lines)")
    if not analysed(check):
        say(f"{check.output.get('summary')}")
    if outcome.comment is None:
        say("no comment was posted")
    else:
        say(f"the sticky comment on {REPO}#{NUMBER}:\n\n{textwrap.indent(outcome.comment.strip(), '    ')}\n")
    health = outcome.main_health
    if health is not None:
        say(f"main of {REPO} at {health['sha'][:12]}: accepts {health['accepted']} of {health['suites']} CI "
            "suites (its health, checked after the push to it)")
    if serving:
        say(f"the dashboard: http://127.0.0.1:{settings.port}/ (risk windows and this run), "
            f"http://127.0.0.1:{settings.port}/repositories/{REPO} (its default branch: matrix, acceptance)")


def analysed(check: FakeCheckRun | None) -> bool:
    """Whether the App judged the pull request: action_required is its "could not run or could not see"."""
    return check is not None and check.conclusion != "action_required"


def run(port: int, *, once: bool, say: Say) -> int:
    """The demo; 0 when the App analysed the pull request and reported, 3 when it could not."""
    from app.processes import runtime  # the service machinery, only when the demo runs

    example = example_directory()
    # bound now, so that a taken port is a clear error and no other process takes it before serve starts
    listener = runtime.listen("127.0.0.1", port)
    port = listener.getsockname()[1]

    with tempfile.TemporaryDirectory(prefix="prtriage-demo-") as scratch:
        fake = FakeGitHub(make_app_key(), app_slug="prtriage-demo").start()
        try:
            shas = stage(fake, example)
            say(f"a local GitHub on {fake.url} holds {REPO} (examples/incident) and its pull request "
                f"#{NUMBER}, which adds one assert; the App's data lives in {scratch} until the demo stops")
            settings = demo_settings(fake, os.urandom(16).hex(), Path(scratch), port)
            outcome, stopped = Outcome(), threading.Event()

            def then_report() -> None:
                drive(fake, settings, shas, outcome, stopped, say)
                serving = not once and analysed(outcome.check)
                report(outcome, settings, say, serving=serving)
                if not serving:
                    os.kill(os.getpid(), signal.SIGTERM)  # serve stops as on Ctrl-C
                else:
                    say("the service keeps running: Ctrl-C stops the demo")

            threading.Thread(target=then_report, name="demo-driver", daemon=True).start()
            try:
                runtime.serve(settings, listener=listener)
            finally:
                stopped.set()
                outcome.done.wait(5)
        finally:
            fake.stop()
            listener.close()
    return 0 if analysed(outcome.check) else 3
