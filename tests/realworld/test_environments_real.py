"""The analysis environment is part of the result: `prtriage check` of the real #2077 from a plain install
of prtriage and from the project's development environment (pytest, packaging and numpy beside prtriage)
gives the same suites, outcomes, capture counts and findings, because the sandbox sees only the environment
the policy declares, built by prtriage.

Each run has its own cache directory (capture and validation run again) and both use the session's analysis
environments, which neither interpreter's site-packages reach."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from plain_install import build_wheel, plain_venv

from .conftest import MILES_POLICY


def check_with(python: Path, repo: Path, cache: Path) -> tuple[int, dict[str, Any]]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PRTRIAGE_") or key == "PRTRIAGE_ENV_DIR"}
    done = subprocess.run([str(python), "-m", "app.cli", "check", "--repo", str(repo), "--base", "base-2077",
                           "--head", "pr-2077", "--policy", str(MILES_POLICY), "--format", "json",
                           "--cache-dir", str(cache)], capture_output=True, text=True, timeout=1800,
                          check=False, env=env, cwd=cache)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def imports(python: Path, names: str) -> str:
    wanted = names.split()
    code = f"import importlib.util as u; print(' '.join(n for n in {wanted!r} if u.find_spec(n)))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


# What repository code draws at run time inside the sandbox: `tempfile` names (`/tmp/ft_test_dumper_0buk9bqz`)
# and the wall clock (`/root/shared_data/261202-172238-420/checkpoints`). Two runs differ there whatever the
# environment, so suites are compared by id, argv length and outcomes, scripts by name and kind.
TEMPORARY_NAME = re.compile(r"(/tmp/[\w.-]*?)[a-z0-9_]{8}(?=[/.'\s]|$)")


def comparable(report: dict[str, Any]) -> Any:
    """What must not depend on the interpreter beside prtriage."""
    capture = report["capture"]
    kinds = {kind: sorted(entry["script"] for entry in capture[kind])
             for kind in ("failed", "no_entry", "partial")}
    document = {
        "suites": [(s["id"], s["script"], len(s["argv"]), s["base"], s["head"]) for s in report["suites"]],
        "capture": {"scripts": capture["scripts"], "captured": capture["captured"],
                    "disabled": capture["disabled"], **kinds},
        "findings": report["findings"], "health": report["health"]}
    return json.loads(TEMPORARY_NAME.sub(r"\1<random>", json.dumps(document, sort_keys=True)))


@pytest.fixture(scope="module")
def plain_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain")
    return plain_venv(build_wheel(root), root / "venv")


def test_2077_is_the_same_from_a_plain_install_and_from_a_crowded_one(
        real_miles: Path, plain_python: Path, tmp_path: Path) -> None:
    crowded = Path(sys.executable)
    assert imports(crowded, "pytest packaging numpy") == "pytest packaging numpy"
    assert imports(plain_python, "pytest packaging numpy") == ""
    (tmp_path / "plain").mkdir()
    (tmp_path / "crowded").mkdir()
    plain_status, plain = check_with(plain_python, real_miles, tmp_path / "plain")
    crowded_status, crowded_report = check_with(crowded, real_miles, tmp_path / "crowded")
    cached = (plain["capture"]["cached"], crowded_report["capture"]["cached"])
    assert (plain_status, cached) == (1, (False, False))
    assert comparable(plain) == comparable(crowded_report)
    assert crowded_status == plain_status
    blocking = {p for f in plain["findings"] if f["severity"] == "blocking" for p in f["scripts"]}
    assert len(blocking) == 5
