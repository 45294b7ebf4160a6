"""Pruning as operators meet it: `prtriage cache prune` (a real process: output, exit status) and the
service's hourly task, on real files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from huey import MemoryHuey

from app.config import Settings
from app.processes.task_queue import make_queue, prune_cache
from app.service.services import Services

MB = 1_000_000


def old_tree(cache: Path, name: str, *, hours_ago: float, size: int = MB) -> Path:
    tree = cache / "trees" / name
    tree.mkdir(parents=True)
    (tree / "data.bin").write_bytes(os.urandom(size))
    moment = time.time() - hours_ago * 3600
    os.utime(tree, (moment, moment))
    return tree


def prtriage(*args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PRTRIAGE_")}
    environment.update({"PRTRIAGE_CACHE_DIR": str(cache), **(env or {})})
    return subprocess.run([sys.executable, "-m", "app.cli", *args], env=environment, capture_output=True,
                          text=True, timeout=60, check=False)


def test_prune_removes_the_least_recently_used_and_says_what_it_did(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for name, hours in (("a", 30), ("b", 20), ("c", 10)):
        old_tree(cache, name, hours_ago=hours)

    done = prtriage("cache", "prune", "--max-size", "1.5MB", cache=cache)

    assert (done.returncode, done.stderr) == (0, "")
    header, removed = done.stdout.splitlines()
    assert header == f"{cache}: 3.0 MB in 3 entries (cap 1.5 MB)"
    assert removed == "removed 2 entries (least recently used first) (2.0 MB); 1.0 MB left"
    assert sorted(os.listdir(cache / "trees")) == ["c"]


def test_the_cap_comes_from_the_setting_and_the_cache_dir_from_the_option(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    old_tree(elsewhere, "a", hours_ago=5)
    old_tree(elsewhere, "b", hours_ago=4)

    under = prtriage("cache", "prune", "--cache-dir", str(elsewhere), cache=tmp_path / "unused",
                     env={"PRTRIAGE_CACHE_MAX_SIZE": "3MB"})
    over = prtriage("cache", "prune", "--cache-dir", str(elsewhere), cache=tmp_path / "unused",
                    env={"PRTRIAGE_CACHE_MAX_SIZE": "1500KB"})

    assert under.returncode == 0 and under.stdout.splitlines()[1] == "under the cap: nothing removed"
    assert over.returncode == 0 and "removed 1 entry" in over.stdout
    assert os.listdir(elsewhere / "trees") == ["b"] and not (tmp_path / "unused").exists()


def test_an_empty_or_missing_cache_is_fine(tmp_path: Path) -> None:
    done = prtriage("cache", "prune", cache=tmp_path / "never-made")

    assert done.returncode == 0
    assert done.stdout.splitlines() == [f"{tmp_path / 'never-made'}: 0 B in 0 entries (cap 10.0 GB)",
                                        "under the cap: nothing removed"]


def test_a_bad_size_is_bad_usage(tmp_path: Path) -> None:
    option = prtriage("cache", "prune", "--max-size", "10 parsecs", cache=tmp_path)
    setting = prtriage("cache", "prune", cache=tmp_path, env={"PRTRIAGE_CACHE_MAX_SIZE": "lots"})
    no_subcommand = prtriage("cache", cache=tmp_path)

    assert (option.returncode, option.stdout) == (2, "")
    assert option.stderr == ("prtriage: error: --max-size: '10 parsecs' is not a size (write e.g. 500MB, "
                             "10GB or 2GiB)\n")
    assert setting.returncode == 2
    assert setting.stderr.startswith("prtriage: error: PRTRIAGE_CACHE_MAX_SIZE: 'lots' is not a size")
    assert no_subcommand.returncode == 2 and "required: COMMAND" in no_subcommand.stderr


def test_the_hourly_task_prunes_the_cache_of_the_process_that_runs_it(tmp_path: Path) -> None:
    settings = Settings(PRTRIAGE_DATA_DIR=str(tmp_path / "data"), PRTRIAGE_CACHE_DIR=str(tmp_path / "cache"),
                        PRTRIAGE_CACHE_MAX_SIZE="1500KB")
    old_tree(settings.cache_dir, "old", hours_ago=3)
    old_tree(settings.cache_dir, "older", hours_ago=4)
    services = Services.from_settings(settings)
    try:
        queue = make_queue(services, huey=MemoryHuey("prune-test", immediate=False))

        queue.prune_cache.call_local()

        assert os.listdir(settings.cache_dir / "trees") == ["old"]
        assert 'prtriage_jobs_total{outcome="done",task="prune_cache"} 1' in services.metrics.jobs.lines()
        hour = [minute for minute in range(60)
                if queue.prune_cache.task_class().validate_datetime(datetime(2026, 3, 1, 12, minute))]
        assert hour == [0]
        assert "prune_cache" in {task.name for task in queue.huey._registry.periodic_tasks}
    finally:
        services.close()

    report = prune_cache(settings)  # once under the cap, nothing more goes
    assert (report.entries, report.removed) == (1, 0)
