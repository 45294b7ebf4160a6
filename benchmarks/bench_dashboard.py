"""Benchmark of the dashboard at scale: 10,000 risk windows, 100,000 triage runs, 1,000 repositories with
30 default-branch healths each and 10,000 dead-suite records (each with its window), on SQLite and PostgreSQL.

    .venv/bin/python -m benchmarks.bench_dashboard [--backend sqlite|postgresql|both] [--windows 10000] \
        [--runs 100000] [--repositories 1000] [--dead-suites 10000] [--requests 40] [--out benchmarks/out/]

Seeds with bulk inserts (Core executemany, a few seconds), then sends requests in-process (httpx's ASGI
transport, a bearer token as a real client would) and reports the median and p95 of each path. The target
is the issue's: the main page `GET /` and `GET /api/risk-windows` under 200 ms; a repository's page,
`GET /api/repositories/{owner}/{name}`, the list of repositories (a page of 50, HTML and JSON) and a CI
suite's page under 100 ms (issue 26), all measured in the same run. Each run stores 4 suite outcomes
(400,000 rows at the default scale), what a suite's page searches. PostgreSQL is
TEST_POSTGRES_URL's server (default postgresql://postgres@127.0.0.1:5432/test); a throwaway database is
created beside it and dropped. Exits 1 when a main path's median misses the target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
from fastapi import FastAPI
from psycopg import sql
from sqlalchemy import Engine, Table, insert, text
from sqlalchemy.engine import make_url

from app import dashboard
from app.config import Settings
from app.service.services import Services
from app.store.migrate import upgrade
from app.store.models import (
    DeadSuite,
    Finding,
    Installation,
    MainHealth,
    PullRequest,
    Reference,
    Repository,
    RiskWindow,
    SuiteOutcome,
    TriageRun,
    WindowEvent,
    window_awaits,
)
from app.store.session import make_engine

TARGET_MS = 200.0
MAIN_PATHS = ("/", "/api/risk-windows")
REPOSITORY_TARGET_MS = 100.0
# a suite of acme/repo3 with 30 healths, a dead-suite record and about 400 runs among its pull requests
SUITE_PATH = "/repositories/acme/repo3/suites/ci%2Ftest_2.py%232"
REPOSITORY_PATHS = ("/repositories/acme/repo3", "/api/repositories/acme/repo3", "/api/repositories",
                    "/repositories", SUITE_PATH)
OTHER_PATHS = ("/?state=all&repo=acme/repo3", "/api/risk-windows?state=closed", "/runs", "/api/runs",
               "/api/runs?repo=acme/repo3")
TARGETS = {**dict.fromkeys(MAIN_PATHS, TARGET_MS), **dict.fromkeys(REPOSITORY_PATHS, REPOSITORY_TARGET_MS)}
TOKEN = "bench-token"
REPOSITORIES = 1_000
HEALTHS_PER_REPOSITORY = 30
SUITES_PER_HEALTH = 40
DEAD_OPEN_EVERY = 5  # one dead suite in five is not healed yet; the others healed and their windows closed
BASE_REPOSITORIES = 25  # those the pull requests, runs and follow-up windows belong to (as before issue 26)
PULLS_PER_RUNS = 4  # runs per pull request (heads pushed again)
SUITES_PER_RUN = 4  # suite outcomes stored per run, ids among a health's 40
CHUNK = 5_000
POSTGRES_ADMIN = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
NOW = datetime.now(UTC)
SPAN = timedelta(days=730)


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


def _bulk(engine: Engine, table: Table, rows: Iterator[dict[str, Any]]) -> int:
    """Insert in chunks, one executemany (one round trip per chunk with insertmanyvalues) each."""
    count, chunk = 0, []
    with engine.begin() as connection:
        for row in rows:
            chunk.append(row)
            if len(chunk) == CHUNK:
                connection.execute(insert(table), chunk)
                count, chunk = count + len(chunk), []
        if chunk:
            connection.execute(insert(table), chunk)
            count += len(chunk)
    return count


def _moment(rng: random.Random) -> datetime:
    return NOW - SPAN * rng.random()


def _repositories(total: int) -> Iterator[dict[str, Any]]:
    for repo_id in range(1, total + 1):
        yield {"id": repo_id, "full_name": f"acme/repo{repo_id}", "private": repo_id % 2 == 0,
               "installation_id": 1, "default_branch": "main"}


def _outcomes(rejected: int) -> dict[str, Any]:
    """A health's suites, REJECTED of them rejected at one line."""
    failed = {"outcome": "rejected", "exception": "AssertionError", "message": "an old assert",
              "path": "pkg/arguments.py", "line": 612}
    return {f"ci/test_{i % 8}.py#{i}": {"script": f"ci/test_{i % 8}.py",
                                        **(failed if i < rejected else {"outcome": "accepted"})}
            for i in range(SUITES_PER_HEALTH)}


def _healths(rng: random.Random, repositories: int) -> Iterator[dict[str, Any]]:
    scripts = {"considered": 8, "captured": 8, "partial": [], "failed": [], "no_entry": [], "disabled": []}
    for repo_id in range(1, repositories + 1):
        policy = {"source": "builtin", "path": f"policies/acme/repo{repo_id}.yml",
                  "repository": f"acme/repo{repo_id}"}
        for check in range(HEALTHS_PER_REPOSITORY):
            rejected = rng.randrange(3)
            yield {"repository_id": repo_id, "branch": "main", "sha": f"{repo_id:020x}{check:020x}",
                   "at": NOW - timedelta(days=HEALTHS_PER_REPOSITORY - check), "probe": check % 10 == 5,
                   "suites": SUITES_PER_HEALTH, "accepted": SUITES_PER_HEALTH - rejected,
                   "could_analyse": True, "reason": "the base revision accepts most", "policy": policy,
                   "scripts": scripts, "outcomes": _outcomes(rejected)}


def _dead_windows(rng: random.Random, total: int, first_id: int,
                  repositories: int) -> Iterator[dict[str, Any]]:
    for number in range(total):
        opened = _moment(rng)
        healed = number % DEAD_OPEN_EVERY != 0
        yield {"id": first_id + number, "repository_id": 1 + number % repositories, "pull_request_id": None,
               "kind": "dead_suite", "state": "closed" if healed else "open",
               "risk": f"The default branch rejected CI suite ci/test_{number % 8}.py#{number}.",
               "opened_at": opened, "closed_at": opened + (NOW - opened) * rng.random() if healed else None,
               "close_reason": "main accepts it again" if healed else None}


def _dead_suites(total: int, first_window: int, repositories: int) -> Iterator[dict[str, Any]]:
    for number in range(total):
        window, healed = first_window + number, number % DEAD_OPEN_EVERY != 0
        yield {"repository_id": 1 + number % repositories, "window_id": window,
               "suite": f"ci/test_{number % 8}.py#{number}", "script": f"ci/test_{number % 8}.py",
               "outcome": "rejected", "error": "AssertionError: an old assert", "path": "pkg/arguments.py",
               "line": 612, "since_sha": f"{number:040x}", "found_sha": f"{number + 1:040x}",
               "healed_sha": f"{number + 2:040x}" if healed else None, "healed_at": NOW if healed else None,
               "opened_at": NOW}


def _pulls(rng: random.Random, total: int) -> Iterator[dict[str, Any]]:
    for pr_id in range(1, total + 1):
        repo_id = 1 + pr_id % BASE_REPOSITORIES
        yield {"id": pr_id, "repository_id": repo_id, "number": pr_id, "title": f"Change {pr_id} of the CLI",
               "author": f"dev{pr_id % 97}", "url": f"https://github.com/acme/repo{repo_id}/pull/{pr_id}",
               "head_sha": f"{pr_id:040x}", "base_sha": "b" * 40, "base_ref": "main", "state": "closed",
               "draft": False, "merged_at": _moment(rng)}


def _windows(rng: random.Random, total: int) -> Iterator[dict[str, Any]]:
    for window_id in range(1, total + 1):
        opened = _moment(rng)
        closed = rng.random() < 0.3
        yield {"id": window_id, "repository_id": 1 + window_id % BASE_REPOSITORIES,
               "pull_request_id": window_id,
               "state": "closed" if closed else "open", "risk": f"Risk sentence of window {window_id}.",
               "opened_at": opened, "closed_at": opened + (NOW - opened) * rng.random() if closed else None,
               "close_reason": "superseded" if closed else None}


def _references(total: int) -> Iterator[dict[str, Any]]:
    for ref_id in range(1, total + 1):
        yield {"id": ref_id, "pull_request_id": ref_id, "target_owner": "acme", "target_repo": "lib",
               "target_number": 100_000 + ref_id, "kind": "followup" if ref_id % 3 else "prerequisite",
               "sentence": f"#{100_000 + ref_id} will add the fail-fast", "state": "open",
               "url": f"https://github.com/acme/lib/pull/{100_000 + ref_id}", "created_at": NOW}


def _runs(rng: random.Random, total: int, pulls: int) -> Iterator[dict[str, Any]]:
    for run_id in range(1, total + 1):
        created = _moment(rng)
        yield {"id": run_id, "pull_request_id": 1 + run_id % pulls,
               "repository_id": 1 + (1 + run_id % pulls) % BASE_REPOSITORIES, "head_sha": f"{run_id:040x}",
               "base_sha": "b" * 40, "status": "completed",
               "conclusion": "failure" if run_id % 5 == 0 else "success",
               "created_at": created, "started_at": created, "finished_at": created + timedelta(seconds=30)}


def _suite_outcomes(total_runs: int, pulls: int) -> Iterator[dict[str, Any]]:
    """SUITES_PER_RUN suites a run, a suite in every tenth run; the head rejects one run's suites in seven."""
    accepted = {"outcome": "accepted", "exception": None, "message": None, "path": None, "line": None}
    rejected = {"outcome": "rejected", "exception": "AssertionError", "message": "a new assert",
                "path": "pkg/arguments.py", "line": 640}
    for run_id in range(1, total_runs + 1):
        for offset in range(SUITES_PER_RUN):
            number = (run_id // 3 + offset * SUITES_PER_HEALTH // SUITES_PER_RUN) % SUITES_PER_HEALTH
            yield {"run_id": run_id, "repository_id": 1 + (1 + run_id % pulls) % BASE_REPOSITORIES,
                   "suite_id": f"ci/test_{number % 8}.py#{number}",
                   "script": f"ci/test_{number % 8}.py", "argv": ["python", "train.py", "--seed", "1"],
                   "base": accepted, "head": rejected if (run_id // 10) % 7 == 0 else accepted}


def _findings(total_runs: int) -> Iterator[dict[str, Any]]:
    for run_id in range(5, total_runs + 1, 5):
        yield {"run_id": run_id, "kind": "new_rejection", "severity": "blocking", "path": "miles/args.py",
               "line": 612, "in_diff": True, "message": "head rejects 5 suites that base accepts",
               "suites": ["lora-e2e"], "scripts": ["tests/e2e/test_lora.py"]}


def seed(engine: Engine, *, windows: int, runs: int, repositories: int = REPOSITORIES,
         dead_suites: int = 0) -> dict[str, int]:
    """Bulk rows in the shape the service writes them; ids given, so links need no lookups."""
    rng = random.Random(7)
    pulls = max(windows, runs // PULLS_PER_RUNS)
    counts = {
        "installations": _bulk(engine, _table(Installation), iter([{"id": 1, "account_login": "acme"}])),
        "repositories": _bulk(engine, _table(Repository),
                              _repositories(max(repositories, BASE_REPOSITORIES))),
        "pull_requests": _bulk(engine, _table(PullRequest), _pulls(rng, pulls)),
        "references": _bulk(engine, _table(Reference), _references(windows)),
        "windows": _bulk(engine, _table(RiskWindow), _windows(rng, windows)),
        "runs": _bulk(engine, _table(TriageRun), _runs(rng, runs, pulls)),
        "findings": _bulk(engine, _table(Finding), _findings(runs)),
        "suite_outcomes": _bulk(engine, _table(SuiteOutcome), _suite_outcomes(runs, pulls)),
    }
    _bulk(engine, window_awaits, ({"window_id": w, "reference_id": w} for w in range(1, windows + 1)))
    counts["events"] = _bulk(engine, _table(WindowEvent), ({"window_id": w, "at": NOW, "actor": "prtriage",
                                                            "what": "opened"} for w in range(1, windows + 1)))
    counts["healths"] = _bulk(engine, _table(MainHealth), _healths(rng, repositories))
    counts["dead_windows"] = _bulk(engine, _table(RiskWindow),
                                   _dead_windows(rng, dead_suites, windows + 1, repositories))
    counts["dead_suites"] = _bulk(engine, _table(DeadSuite),
                                  _dead_suites(dead_suites, windows + 1, repositories))
    return counts


def build_app(url: str, data_dir: Path) -> FastAPI:
    settings = Settings(DATABASE_URL=url, DASHBOARD_TOKEN=TOKEN, PRTRIAGE_DATA_DIR=str(data_dir))
    app = FastAPI(docs_url=None, redoc_url=None)
    app.state.services = Services.from_settings(settings)
    dashboard.attach(app)
    return app


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(app: FastAPI, paths: list[str], requests: int) -> list[dict[str, Any]]:
    """Each path `requests` times after two warm-up requests, interleaved so that load falls on all alike."""
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    samples: dict[str, list[float]] = {path: [] for path in paths}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        for round_number in range(requests + 2):
            for path in paths:
                started = time.perf_counter()
                response = await client.get(path)
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise SystemExit(f"{path}: HTTP {response.status_code}: {response.text[:200]}")
                if round_number >= 2:
                    samples[path].append(elapsed)
    return [{"path": path, "requests": len(values), "median_ms": round(statistics.median(values), 1),
             "p95_ms": round(percentile(values, 0.95), 1), "max_ms": round(max(values), 1)}
            for path, values in samples.items()]


def deep_cursor(app: FastAPI) -> str:
    """A cursor far into the open windows (page 100), to show keyset pages cost the same deep down."""
    async def walk() -> str:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            cursor = ""
            for _ in range(100):
                body = (await client.get("/api/risk-windows", params={"cursor": cursor, "limit": 50}
                                         if cursor else {"limit": 50})).json()
                if body["next"] is None:
                    break
                cursor = body["next"]
            return cursor
    return asyncio.run(walk())


@contextmanager
def database(backend: str, workdir: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{workdir / 'bench.db'}"
        return
    admin = psycopg.connect(POSTGRES_ADMIN, autocommit=True, connect_timeout=5)
    name = f"prtriage_bench_{uuid.uuid4().hex[:10]}"
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_url(POSTGRES_ADMIN).set(database=name).render_as_string(hide_password=False)
    finally:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


def bench_backend(backend: str, *, windows: int, runs: int, repositories: int, dead_suites: int,
                  requests: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp, database(backend, Path(tmp)) as url:
        upgrade(url)
        engine = make_engine(url)
        started = time.perf_counter()
        counts = seed(engine, windows=windows, runs=runs, repositories=repositories, dead_suites=dead_suites)
        seed_s = time.perf_counter() - started
        if backend == "postgresql":
            with engine.begin() as connection:  # what autovacuum's analyze does after a bulk load
                connection.execute(text("ANALYZE"))
        engine.dispose()
        app = build_app(url, Path(tmp) / "data")
        try:
            paths = [*MAIN_PATHS, *REPOSITORY_PATHS, *OTHER_PATHS,
                     f"/api/risk-windows?cursor={deep_cursor(app)}"]
            rows = asyncio.run(measure(app, paths, requests))
        finally:
            app.state.services.close()
    return {"backend": backend, "seeded": counts, "seed_s": round(seed_s, 1), "paths": rows}


def report(result: dict[str, Any]) -> bool:
    """Print one backend's table; whether the main paths met the target."""
    print(f"\n{result['backend']}: seeded {result['seeded']} in {result['seed_s']} s")
    print(f"{'path':<48} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    met = True
    for row in result["paths"]:
        flag = ""
        target = TARGETS.get(row["path"])
        if target is not None:
            ok = row["median_ms"] < target
            met &= ok
            flag = f"  ok (< {target:.0f} ms)" if ok else f"  OVER {target:.0f} ms"
        shown = row["path"] if len(row["path"]) <= 48 else row["path"][:45] + "..."
        print(f"{shown:<48} {row['median_ms']:>10} {row['p95_ms']:>8} {row['max_ms']:>8}{flag}")
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--windows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repositories", type=int, default=REPOSITORIES)
    parser.add_argument("--dead-suites", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=40, help="measured requests per path")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    args = parser.parse_args(argv)
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    results = [bench_backend(backend, windows=args.windows, runs=args.runs, repositories=args.repositories,
                             dead_suites=args.dead_suites, requests=args.requests) for backend in backends]
    met = all([report(result) for result in results])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_dashboard.json").write_text(json.dumps(
        {"targets_ms": TARGETS, "windows": args.windows, "runs": args.runs, "repositories": args.repositories,
         "dead_suites": args.dead_suites, "results": results}, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
