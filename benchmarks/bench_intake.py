"""Load benchmark of the webhook intake: signed deliveries from concurrent senders against `prtriage serve`.

    .venv/bin/python -m benchmarks.bench_intake [--deliveries 2000] [--senders 20] [--warmup 100] \
        [--workers 1] [--out benchmarks/out/]

Three processes, as in production: the fake GitHub (app/demo/localgithub, real HTTP on loopback, in a child
process), `prtriage serve` on its embedded defaults (SQLite database, SqliteHuey queue, its own worker
threads, migrated at start-up), and this load process. Every delivery is a real `pull_request` `opened`
payload for a PR of its own that touches no validation path, so its triage is cheap (a success check from
the file list) and every delivery must yield exactly one run and one completed check run.

Measured: the answer time of each delivery as the sender sees it (p50/p90/p99/max; the warm-up is sent
first and left out), the intake's throughput, and the time until every job is done. Verified: every
delivery answered 202, stored once and processed once; one run and one check run per delivery, each check
run completed exactly once; serve stops with exit status 0 on SIGTERM. Writes bench_intake.json in --out.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import multiprocessing
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import func, select

from app.demo.localgithub import FakeGitHub, make_app_key
from app.store.models import Delivery, TriageRun
from app.store.session import make_engine, session_scope

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "github" / "webhooks" / "pull_request" / "opened.json"
REPO = "acme/widgets"
SECRET = "bench-webhook-secret"
P99_TARGET_MS = 50.0


def fake_github_process(key: Any, prs: int, channel: Connection) -> None:
    """Child process: the fake GitHub with REPO and PRs 1..PRS (README.md only); answers stats requests."""
    fake = FakeGitHub(key).start()
    repository_id = fake.add_repo(REPO, installation_id=1).id
    for number in range(1, prs + 1):
        fake.add_pull(REPO, number, head_sha=hashlib.sha1(f"head {number}".encode()).hexdigest(),
                      base_sha="b" * 40, files=["README.md"], title=f"Docs {number}")
    channel.send((fake.url, repository_id))
    while channel.recv() == "stats":
        patches = fake.calls("PATCH", rf"/repos/{REPO}/check-runs/\d+")
        completions = Counter(request.route for request in patches
                              if isinstance(request.body, dict) and request.body.get("status") == "completed")
        runs = fake.check_runs(REPO)
        channel.send({"check_runs": len(runs), "completed": sum(run.status == "completed" for run in runs),
                      "conclusions": dict(Counter(str(run.conclusion) for run in runs)),
                      "completions_per_run": dict(Counter(completions.values())),
                      "comments": sum(len(fake.comments_on(REPO, n)) for n in range(1, prs + 1)),
                      "api_requests": len(fake.calls())})
    fake.stop()


def delivery(payload: dict[str, Any], fake: tuple[str, int], number: int) -> tuple[bytes, dict[str, str]]:
    """The real `opened` payload for PR NUMBER of REPO on the fake (its URL and REPO's id), signed."""
    fake_url, repository_id = fake
    text = json.dumps(payload).replace("https://api.github.com", fake_url)
    text = text.replace(payload["repository"]["full_name"], REPO)
    adapted = json.loads(text)
    adapted["number"] = adapted["pull_request"]["number"] = number
    # the fake's ids: a delivery whose repository id is not the repository's own is refused (issue 23)
    adapted["repository"]["id"] = adapted["pull_request"]["base"]["repo"]["id"] = repository_id
    adapted["pull_request"]["head"]["sha"] = hashlib.sha1(f"head {number}".encode()).hexdigest()
    adapted["installation"] = {"id": 1, "node_id": "bench"}
    body = json.dumps(adapted).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": str(uuid.uuid4()),
                  "X-Hub-Signature-256": signature, "Content-Type": "application/json"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_serve(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], cwd=ROOT,
                                   env=env, stdout=output, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"serve exited: {log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("serve did not become healthy in 60 s")


async def _sender(port: int, work: Iterator[tuple[bytes, dict[str, str]]], latencies: list[float],
                  statuses: Counter[int]) -> None:
    """One sender: a keep-alive connection, one delivery after another, each timed from the first byte
    sent to the last byte of the answer (plain HTTP/1.1 on asyncio: the load process must cost little CPU,
    or its own queueing would be measured as the service's)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for body, headers in work:
            started = time.perf_counter()
            status = await exchange(reader, writer, body, headers)
            latencies.append((time.perf_counter() - started) * 1000)
            statuses[status] += 1
    finally:
        writer.close()


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes,
                   headers: dict[str, str]) -> int:
    """POST one delivery on the connection and read its answer whole; the answer's status."""
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    writer.write(f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(body)}"
                 "\r\n\r\n".encode() + body)
    await writer.drain()
    answer = await reader.readuntil(b"\r\n\r\n")
    lines = answer.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length"))
    await reader.readexactly(length)
    return int(lines[0].split()[1])


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        return subprocess.Popen([sys.executable, "-m", "app.cli", "worker"], cwd=ROOT, env=env, stdout=output,
                                stderr=subprocess.STDOUT)


def send_all(port: int, deliveries: list[tuple[bytes, dict[str, str]]], senders: int,
             ) -> tuple[list[float], Counter[int], float]:
    """Send every delivery from SENDERS concurrent connections; latencies in ms, the answers' status
    counts, and the wall time."""
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    work = iter(deliveries)

    async def run() -> None:
        await asyncio.gather(*(_sender(port, work, latencies, statuses) for _ in range(senders)))

    started = time.perf_counter()
    asyncio.run(run())
    return latencies, statuses, time.perf_counter() - started


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def wait_processed(database_url: str, total: int, timeout: float) -> dict[str, Any]:
    """Poll the service's database until every delivery is processed and every run completed."""
    engine = make_engine(database_url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with session_scope(engine, read_only=True) as session:
                deliveries = {status: count for status, count in session.execute(
                    select(Delivery.status, func.count()).group_by(Delivery.status))}
                runs = {status: count for status, count in session.execute(
                    select(TriageRun.status, func.count()).group_by(TriageRun.status))}
                distinct = session.scalar(select(func.count(func.distinct(Delivery.guid)))) or 0
            if deliveries.get("processed", 0) + deliveries.get("failed", 0) >= total and \
                    sum(runs.values()) >= total and runs.get("completed", 0) + runs.get("failed", 0) >= total:
                return {"deliveries": deliveries, "runs": runs, "distinct_guids": distinct}
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all processed after {timeout} s: deliveries {deliveries}, "
                                   f"runs {runs}")
            time.sleep(0.2)
    finally:
        engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--senders", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1, help="PRTRIAGE_WORKERS of serve")
    parser.add_argument("--separate-worker", action="store_true",
                        help="serve with no worker thread, and one `prtriage worker` process beside it on "
                             "the same embedded database and queue")
    parser.add_argument("--baseline", action="store_true",
                        help="instead of prtriage, a FastAPI endpoint that only reads the body and answers "
                             "202, served and loaded the same way: the floor this machine allows")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    args = parser.parse_args()
    if args.baseline:
        return measure_baseline(args)
    total = args.warmup + args.deliveries
    load_before = [round(load, 2) for load in os.getloadavg()]
    key = make_app_key()
    payload = json.loads(FIXTURE.read_text())
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    fake = context.Process(target=fake_github_process, args=(key, total, theirs), daemon=True)
    fake.start()
    fake_address = ours.recv()
    fake_url = fake_address[0]
    with tempfile.TemporaryDirectory(prefix="bench-intake-") as scratch:
        work = Path(scratch)
        env = {"PATH": os.environ["PATH"], "HOME": str(work), "GITHUB_APP_ID": "4242",
               "GITHUB_PRIVATE_KEY": key.private_pem, "GITHUB_WEBHOOK_SECRET": SECRET,
               "GITHUB_API_URL": fake_url, "PRTRIAGE_DATA_DIR": str(work / "data"),
               "PRTRIAGE_CACHE_DIR": str(work / "cache"), "PRTRIAGE_WORKERS": str(args.workers),
               "PRTRIAGE_LOG_LEVEL": "WARNING"}
        port = free_port()
        serve_env = {**env, "PRTRIAGE_WORKERS": "0"} if args.separate_worker else env
        serve = start_serve(serve_env, port, work / "serve.log")
        worker = start_worker(env, work / "worker.log") if args.separate_worker else None
        deliveries = [delivery(payload, fake_address, number) for number in range(1, total + 1)]
        try:
            send_all(port, deliveries[: args.warmup], args.senders)
            latencies, statuses, wall = send_all(port, deliveries[args.warmup:], args.senders)
            sent_at = time.perf_counter()
            database = wait_processed(f"sqlite:///{work / 'data' / 'prtriage.db'}", total, timeout=900)
            drained = time.perf_counter() - sent_at
            ours.send("stats")
            github = ours.recv()
        finally:
            serve.send_signal(signal.SIGTERM)
            exit_status = serve.wait(120)
            if worker is not None:
                worker.send_signal(signal.SIGTERM)
                exit_status = exit_status or worker.wait(120)
            ours.send("stop")
            fake.join(30)
        log_tail = (work / "serve.log").read_text(errors="replace")[-2000:]
    result = {
        "command": " ".join(["python -m benchmarks.bench_intake", *sys.argv[1:]]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "system": platform.platform(), "load_average_before": load_before},
        "deliveries": args.deliveries, "warmup": args.warmup, "senders": args.senders,
        "workers": "a separate worker process" if args.separate_worker else f"{args.workers} in serve",
        "answers": dict(statuses),
        "latency_ms": {name: round(percentile(latencies, fraction), 2)
                       for name, fraction in (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))}
        | {"max": round(max(latencies), 2), "mean": round(statistics.fmean(latencies), 2)},
        "intake_per_s": round(args.deliveries / wall, 1),
        "drain_after_last_answer_s": round(drained, 2),
        "database": database, "github": github, "serve_exit_status": exit_status,
    }
    problems = verify(result, total)
    result["verified"] = not problems
    result["problems"] = problems
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_intake.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if problems:
        print("serve log (tail):\n" + log_tail, file=sys.stderr)
    return 1 if problems else 0


def baseline_app() -> Any:
    """The floor: FastAPI and uvicorn as `serve` runs them, doing nothing with the delivery."""
    app = FastAPI()

    @app.post("/webhooks/github")
    async def accept(request: Request) -> JSONResponse:
        return JSONResponse({"result": "queued", "bytes": len(await request.body())}, status_code=202)

    return app


def measure_baseline(args: argparse.Namespace) -> int:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as scratch:
        log = Path(scratch) / "uvicorn.log"
        with log.open("wb") as output:
            command = ["-m", "uvicorn", "--factory", "benchmarks.bench_intake:baseline_app",
                       "--port", str(port), "--log-level", "warning"]
            server = subprocess.Popen([sys.executable, *command], cwd=ROOT, stdout=output,
                                      stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not _answers(port):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"the baseline server did not start: {log.read_text()}")
                time.sleep(0.1)
            payload = json.loads(FIXTURE.read_text())
            deliveries = [delivery(payload, ("http://127.0.0.1:9", 1), n)
                          for n in range(1, args.warmup + args.deliveries + 1)]
            send_all(port, deliveries[: args.warmup], args.senders)
            latencies, statuses, wall = send_all(port, deliveries[args.warmup:], args.senders)
        finally:
            server.terminate()
            server.wait(30)
    if set(statuses) != {202}:
        raise RuntimeError(f"the baseline answered {dict(statuses)}")
    print(json.dumps({"baseline": True, "senders": args.senders, "answers": dict(statuses),
                      "latency_ms": {name: round(percentile(latencies, fraction), 2)
                                     for name, fraction in (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))},
                      "per_s": round(args.deliveries / wall, 1),
                      "load_average": [round(load, 2) for load in os.getloadavg()]}, indent=2))
    return 0


def _answers(port: int) -> bool:
    try:
        httpx.post(f"http://127.0.0.1:{port}/webhooks/github", content=b"{}", timeout=1)
    except httpx.HTTPError:
        return False
    return True


def verify(result: dict[str, Any], total: int) -> list[str]:
    """Every delivery answered 202, stored and processed once; one run and one check run completed once."""
    problems = []
    if result["answers"] != {202: result["deliveries"]}:
        problems.append(f"answers {result['answers']}, expected 202 for all")
    database, github = result["database"], result["github"]
    if database["deliveries"] != {"processed": total} or database["distinct_guids"] != total:
        problems.append(f"deliveries {database}, expected {total} processed, each stored once")
    if database["runs"] != {"completed": total}:
        problems.append(f"runs {database['runs']}, expected {total} completed")
    if github["check_runs"] != total or github["completions_per_run"] != {1: total}:
        problems.append(f"check runs {github}, expected {total}, each completed exactly once")
    if result["serve_exit_status"] != 0:
        problems.append(f"serve exited {result['serve_exit_status']} on SIGTERM")
    if result["latency_ms"]["p99"] > P99_TARGET_MS:
        problems.append(f"p99 {result['latency_ms']['p99']} ms, target under {P99_TARGET_MS} ms")
    return problems


if __name__ == "__main__":
    sys.exit(main())
