"""The intake under the worst bodies below the 25 MB cap (issue 23): concurrent signed hostile deliveries
against `prtriage serve`, with ordinary deliveries beside them in the same run.

    .venv/bin/python -m benchmarks.bench_hostile_bodies [--hostile 10] [--seconds 30] [--ordinary-senders 4] \
        [--out benchmarks/out/]

`prtriage serve` on its embedded defaults with no worker threads (the intake alone is measured), the fake
GitHub in a child process (bench_intake.py's), and this load process. HOSTILE connections each send, one
after another for SECONDS, signed 24 MB bodies of the worst kinds: 8.4 million empty objects (the issue's:
2.35 GB once parsed), just under the JSON values budget (249,000 empty objects padded to 24 MB, parsed in
full), and one 24 MB string. Meanwhile ORDINARY-SENDERS connections send real `pull_request` `opened`
deliveries one after another. Measured: serve's resident memory (sampled every 50 ms: before, peak, the
growth), each ordinary delivery's answer time (p50/p99/max) and the answers of both. Goals: growth under
500 MB, ordinary p99 under 1 s. Writes bench_hostile_bodies.json in --out.
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
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.bench_intake import (
    FIXTURE,
    ROOT,
    SECRET,
    delivery,
    exchange,
    fake_github_process,
    free_port,
    percentile,
    start_serve,
)

BODY_BYTES = 24 * 1024 * 1024
RSS_GROWTH_GOAL_MB = 500
P99_GOAL_MS = 1000


def padded(prefix: bytes, suffix: bytes) -> bytes:
    """PREFIX + spaces + SUFFIX, BODY_BYTES long (JSON allows whitespace between tokens)."""
    return prefix + b" " * (BODY_BYTES - len(prefix) - len(suffix)) + suffix


def hostile_bodies() -> dict[str, bytes]:
    return {
        "8.4M empty objects": padded(b'{"zen": [' + b"{}," * ((BODY_BYTES - 16) // 3) + b"{}]", b"}"),
        # each `{},` counts twice (a bracket and a comma): 249,000 of them are just under 500,000
        "just under the values budget": padded(b'{"zen": [' + b"{}," * 249_000 + b"{}]", b"}"),
        "one 24 MB string": b'{"zen": "' + b"a" * (BODY_BYTES - 11) + b'"}',
    }


def signed(event: str, body: bytes) -> dict[str, str]:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4()),
            "Content-Type": "application/json", "X-Hub-Signature-256": signature}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def post(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, float]:
    """One request on a connection of its own: (status, ms from the first byte sent to the answer's end)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        started = time.perf_counter()
        status = await exchange(reader, writer, body, headers)
        return status, (time.perf_counter() - started) * 1000
    finally:
        writer.close()


async def load(port: int, args: argparse.Namespace, ordinary: list[tuple[bytes, dict[str, str]]],
               ) -> dict[str, Any]:
    bodies = list(hostile_bodies().items())
    deadline = time.monotonic() + args.seconds
    hostile_answers: Counter[str] = Counter()
    hostile_ms: list[float] = []
    latencies: list[float] = []
    ordinary_answers: Counter[int] = Counter()
    pending = iter(ordinary)

    async def hostile(index: int) -> None:
        turn = index
        while time.monotonic() < deadline:
            name, body = bodies[turn % len(bodies)]
            status, ms = await post(port, body, signed("ping", body))
            hostile_answers[f"{name}: {status}"] += 1
            hostile_ms.append(ms)
            turn += 1

    async def steady() -> None:
        for body, headers in pending:  # shared: each delivery is sent once
            if time.monotonic() >= deadline:
                return
            status, ms = await post(port, body, headers)
            latencies.append(ms)
            ordinary_answers[status] += 1
            await asyncio.sleep(0.05)

    await asyncio.gather(*(hostile(index) for index in range(args.hostile)),
                         *(steady() for _ in range(args.ordinary_senders)))
    return {"hostile_answers": dict(hostile_answers),
            "hostile_answer_ms": {"p50": round(percentile(hostile_ms, 0.5), 1),
                                  "max": round(max(hostile_ms), 1)} if hostile_ms else {},
            "ordinary_answers": dict(ordinary_answers), "ordinary_deliveries": len(latencies),
            "ordinary_latency_ms": {"p50": round(percentile(latencies, 0.5), 1),
                                    "p99": round(percentile(latencies, 0.99), 1),
                                    "max": round(max(latencies), 1)}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hostile", type=int, default=10, help="concurrent hostile connections")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--ordinary-senders", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    args = parser.parse_args()
    load_before = [round(value, 2) for value in os.getloadavg()]
    ordinary_count = int(args.seconds * args.ordinary_senders * 25) + 100
    from app.demo.localgithub import make_app_key

    key = make_app_key()
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    fake = context.Process(target=fake_github_process, args=(key, 1, theirs), daemon=True)
    fake.start()
    fake_address = ours.recv()
    fake_url = fake_address[0]
    payload = json.loads(FIXTURE.read_text())
    ordinary = [delivery(payload, fake_address, 1) for _ in range(ordinary_count)]
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as scratch:
        work = Path(scratch)
        env = {"PATH": os.environ["PATH"], "HOME": str(work), "GITHUB_APP_ID": "4242",
               "GITHUB_PRIVATE_KEY": key.private_pem, "GITHUB_WEBHOOK_SECRET": SECRET,
               "GITHUB_API_URL": fake_url, "PRTRIAGE_DATA_DIR": str(work / "data"),
               "PRTRIAGE_CACHE_DIR": str(work / "cache"), "PRTRIAGE_WORKERS": "0",
               "PRTRIAGE_LOG_LEVEL": "WARNING"}
        port = free_port()
        serve = start_serve(env, port, work / "serve.log")
        samples: list[float] = []
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                samples.append(rss_mb(serve.pid))
                time.sleep(0.05)

        try:
            warmup = argparse.Namespace(hostile=0, seconds=2, ordinary_senders=2)
            asyncio.run(load(port, warmup, ordinary[:50]))
            before = rss_mb(serve.pid)
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            measured = asyncio.run(load(port, args, ordinary[50:]))
            sampling.set()
            sampler.join()
        finally:
            serve.send_signal(signal.SIGTERM)
            exit_status = serve.wait(120)
            ours.send("stop")
            fake.join(30)
    peak = max(samples)
    result = {
        "command": " ".join(["python -m benchmarks.bench_hostile_bodies", *sys.argv[1:]]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "system": platform.platform(), "load_average_before": load_before},
        "hostile_connections": args.hostile, "seconds": args.seconds, "body_bytes": BODY_BYTES,
        "rss_mb": {"before": round(before, 1), "peak": round(peak, 1), "growth": round(peak - before, 1)},
        **measured, "serve_exit_status": exit_status,
    }
    problems = []
    if peak - before > RSS_GROWTH_GOAL_MB:
        problems.append(f"resident memory grew {peak - before:.0f} MB (goal: under {RSS_GROWTH_GOAL_MB})")
    if measured["ordinary_latency_ms"]["p99"] > P99_GOAL_MS:
        problems.append(f"ordinary p99 {measured['ordinary_latency_ms']['p99']} ms "
                        f"(goal: under {P99_GOAL_MS})")
    if set(measured["ordinary_answers"]) != {202}:
        problems.append(f"ordinary deliveries answered {measured['ordinary_answers']}")
    result["verified"], result["problems"] = not problems, problems
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_hostile_bodies.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
