"""The CPU a pull request's text costs to read: the worst 64 KiB bodies we could construct, and plain prose.

    .venv/bin/python -m benchmarks.bench_references [--repeat 5] [--serve] [--out benchmarks/out/]

For each body: the median CPU of `find_references` in this process, and of a whole `prtriage followups
--event FILE --format json` (no GITHUB_TOKEN: nothing is resolved), each with its ratio to plain prose of
the same size measured in the same run; and the longest another thread of this process waited for the
GIL while the body was read. Writes `bench_references.json` in --out.

With --serve instead: `prtriage serve` on its embedded defaults (its worker threads in the same process as
the web app) against the local GitHub in a child process, one pull request per body and repeat whose body
is that body; while each one's triage runs (delivered `opened`, until its check run completes), `/healthz`
is asked every 20 ms, and its answer times are reported (p50, p99, max), plain prose as the baseline.
Writes `bench_references_serve.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

from app.analysis.followups.followups import _by_rules, find_references
from app.analysis.followups.references import Text
from app.demo.localgithub import FakeGitHub, make_app_key
from benchmarks.bench_intake import FIXTURE, REPO, SECRET, delivery, free_port, percentile, start_serve

SIZE = 64 * 1024
PROSE = ("This change drops the over-broad assert in validate_args. Depends on #812, which adds the "
         "fail-fast at the real failure point; the follow-up #2204 will restore the check. ")
WORDS = ["will", "be", "fixed", "in", "follow", "up", "depends", "on", "after", "lands", "todo", "tracking",
         "issue", "the", "a", "not", "deferred", "to", "comes", "later", "adds"]


def _fill(unit: str) -> str:
    return (unit * (SIZE // len(unit) + 1))[:SIZE]


def _growing_runs() -> str:
    """Runs of 1, 2, 3 ... backticks, each once: none closes (a minute with the backreference pattern)."""
    return " ".join("`" * length for length in range(1, 400))[:SIZE]


def _distinct_sentences() -> str:
    """A reference every few words, each window different: the classification cache does not help."""
    chooser = random.Random(7)
    parts = [f"#{n} " + " ".join(chooser.choice(WORDS) for _ in range(3)) for n in range(2, 20_000)]
    return " ".join(parts)[:SIZE]


BODIES: dict[str, Callable[[], str]] = {
    "plain prose (baseline)": lambda: _fill(PROSE),
    "empty (the command's own start)": lambda: "",
    "backtick runs that never close": _growing_runs,
    "backtick pairs and singles": lambda: _fill("`` ` "),
    "opening quotes that never close": lambda: _fill("\u201c"),
    "one reference 20,000 times": lambda: _fill("#2 "),
    "references among varied words": _distinct_sentences,
    "cross-repository references": lambda: " ".join(f"o/r#{n}" for n in range(2, 20_000))[:SIZE],
    "links": lambda: _fill("https://github.com/a/b/pull/12 "),
    "unclosed HTML comments": lambda: _fill("<!-- "),
    "fences": lambda: _fill("```\n`\n"),
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def read_once(body: str) -> float:
    _by_rules.cache_clear()  # each read from nothing, as the first triage of a process
    started = _cpu()
    find_references([Text("body", body)], owner="o", repo="r", number=1)
    return _cpu() - started


def command_once(body: str, scratch: Path) -> float:
    event = scratch / "event.json"
    event.write_text(json.dumps({"repository": {"full_name": "o/r"}, "pull_request": {
        "number": 1, "title": "A title", "body": body, "base": {"sha": None}, "head": {"sha": None}}}))
    environment = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GITHUB_EVENT_PATH")}
    started = _children_cpu()
    subprocess.run([sys.executable, "-m", "app.cli", "followups", "--event", str(event), "--format", "json"],
                   check=False, stdout=subprocess.DEVNULL, env=environment)
    return _children_cpu() - started


def longest_gil_wait(body: str) -> float:
    """The longest a thread sleeping 1 ms at a time overslept while BODY was read, in seconds."""
    done = threading.Event()
    longest = [0.0]

    def tick() -> None:
        while not done.is_set():
            before = time.perf_counter()
            time.sleep(0.001)
            longest[0] = max(longest[0], time.perf_counter() - before - 0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    read_once(body)
    done.set()
    ticker.join()
    return longest[0]


def fake_github_process(key: Any, bodies: list[str], channel: Connection) -> None:
    """Child process: the local GitHub with one pull request per body (a README change: no sandbox runs,
    the text is read all the same); answers how many check runs are completed."""
    fake = FakeGitHub(key).start()
    fake.add_repo(REPO, installation_id=1)
    for number, body in enumerate(bodies, start=1):
        fake.add_pull(REPO, number, head_sha=hashlib.sha1(f"head {number}".encode()).hexdigest(),
                      base_sha="b" * 40, files=["README.md"], title=f"Docs {number}", body=body)
    channel.send(fake.url)
    while channel.recv() == "completed":
        channel.send(sum(run.status == "completed" for run in fake.check_runs(REPO)))
    fake.stop()


def healthz_while_triaged(args: argparse.Namespace) -> None:
    names = [name for name in BODIES for _ in range(args.repeat)]  # interleaved below
    order = [names[i] for r in range(args.repeat) for i in range(r, len(names), args.repeat)]
    key = make_app_key()
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    fake = context.Process(target=fake_github_process, args=(key, [BODIES[n]() for n in order], theirs),
                           daemon=True)
    fake.start()
    fake_url = ours.recv()
    payload = json.loads(FIXTURE.read_text())
    answers: dict[str, list[float]] = {name: [] for name in BODIES}
    with tempfile.TemporaryDirectory(prefix="bench-references-") as scratch:
        work = Path(scratch)
        env = {"PATH": os.environ["PATH"], "HOME": str(work), "GITHUB_APP_ID": "4242",
               "GITHUB_PRIVATE_KEY": key.private_pem, "GITHUB_WEBHOOK_SECRET": SECRET,
               "GITHUB_API_URL": fake_url, "PRTRIAGE_DATA_DIR": str(work / "data"),
               "PRTRIAGE_CACHE_DIR": str(work / "cache"), "PRTRIAGE_WORKERS": "1",
               "PRTRIAGE_LOG_LEVEL": "WARNING"}
        port = free_port()
        serve = start_serve(env, port, work / "serve.log")
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                for number, name in enumerate(order, start=1):
                    body, headers = delivery(payload, fake_url, number)
                    assert http.post("/webhooks/github", content=body, headers=headers).status_code == 202
                    deadline = time.monotonic() + 120
                    while time.monotonic() < deadline:
                        started = time.perf_counter()
                        assert http.get("/healthz").status_code == 200
                        answers[name].append((time.perf_counter() - started) * 1000)
                        ours.send("completed")
                        if ours.recv() >= number:
                            break
                        time.sleep(0.02)
                    else:
                        raise RuntimeError(f"the triage of {name!r} did not complete in 120 s")
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(120)
            ours.send("stop")
            fake.join(30)
    rows = [{"body": name, "healthz_answers": len(times), "p50_ms": percentile(times, 0.5),
             "p99_ms": percentile(times, 0.99), "max_ms": max(times)} for name, times in answers.items()]
    for row in rows:
        print(f"{row['body']:34} /healthz p50 {row['p50_ms']:.1f} ms  p99 {row['p99_ms']:.1f} ms  "
              f"max {row['max_ms']:.1f} ms  ({row['healthz_answers']} answers)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_references_serve.json").write_text(json.dumps(rows, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help="/healthz while such bodies are triaged")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    args = parser.parse_args()
    if args.serve:
        healthz_while_triaged(args)
        return
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, make in BODIES.items():
            body = make()
            reads, commands, waits = [], [], []
            for _ in range(args.repeat):  # interleaved: the same load for each measure
                reads.append(read_once(body))
                commands.append(command_once(body, Path(scratch)))
                waits.append(longest_gil_wait(body))
            rows.append({"body": name, "chars": len(body), "read_cpu_s": statistics.median(reads),
                         "command_cpu_s": statistics.median(commands), "gil_wait_s": max(waits)})
            row = rows[-1]
            print(f"{name:34} read {row['read_cpu_s']:.3f} s  command {row['command_cpu_s']:.3f} s  "
                  f"GIL wait max {row['gil_wait_s'] * 1000:.1f} ms", flush=True)
    base = rows[0]
    for row in rows:
        row["read_ratio"] = row["read_cpu_s"] / max(base["read_cpu_s"], 1e-6)
        row["command_ratio"] = row["command_cpu_s"] / max(base["command_cpu_s"], 1e-6)
    start = rows[1]["command_cpu_s"]
    for row in rows:
        row["command_reading_s"] = row["command_cpu_s"] - start
    print(f"\nmedians of {args.repeat}; ratios to plain prose of the same size, in the same run; "
          "the command's CPU less its own start (the empty body)")
    for row in rows:
        print(f"{row['body']:34} read x{row['read_ratio']:.1f}  command x{row['command_ratio']:.2f}  "
              f"command less its start {row['command_reading_s']:+.3f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_references.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
