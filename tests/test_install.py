"""A plain `pip install` works from anywhere: the wheel is built from a copy of the project, installed into a
fresh virtual environment outside the checkout, and its `prtriage` runs the demo, migrates a database,
serves and checks with the built-in policy from a temporary directory.

The wheel's dependencies are the project environment's (a path entry, not an install): what is tested is
what the wheel itself carries; `tests/test_constraints.py` checks the dependency list.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import socket
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from plain_install import build_wheel, pip

from app.demo.localgithub import make_app_key

CARRIED = ("app/bundled/migrations/env.py", "app/bundled/migrations/versions/0001_initial.py",
           "app/bundled/policies/default.yml", "app/bundled/policies/radixark/miles.yml",
           "app/bundled/examples/incident/base/arguments.py",
           "app/bundled/examples/incident/head/arguments.py",
           "app/dashboard/templates/base.html", "app/dashboard/static/dashboard.css",
           "app/sandbox/harness/recbash.sh", "app/demo/localgithub/webhooks/pull_request/opened.json",
           "app/app.yml")


@dataclass(frozen=True)
class Installed:
    venv: Path
    cwd: Path
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 300, extra: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.venv / "bin" / "prtriage"), *args], cwd=self.cwd,
                              env={**self.env, **(extra or {})}, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def python(self, code: str) -> str:
        done = subprocess.run([str(self.venv / "bin" / "python"), "-c", code], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.strip()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # Dependencies from the project's environment, appended after the venv's own site-packages; its .pth
    # files are not run, so the checkout's editable install of prtriage stays out of sight.
    Path(purelib, "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    pip("--python", str(venv / "bin" / "python"), "install", "--no-deps", str(wheel))
    home = root / "home"
    cwd = root / "elsewhere"
    cwd.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CACHE_HOME": str(home / "cache"), "LANG": "C.UTF-8"}
    return Installed(venv=venv, cwd=cwd, env=env)


def test_the_wheel_carries_every_file_prtriage_reads(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in CARRIED if name not in names]
    assert missing == []
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    location = Path(installed.python("import app; print(app.__file__)"))
    assert location.is_relative_to(installed.venv)
    miles = Path(installed.python("from app.analysis.core.policy import builtin_policy as b; "
                                  "print(b('radixark', 'miles'))"))
    assert miles.is_relative_to(installed.venv) and miles.is_file()


def test_demo_runs_from_any_directory(installed: Installed) -> None:
    done = installed.run("demo", "--once", "--port", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": failure: Breaks 1 existing CI suite" in done.stdout


def test_db_upgrade_migrates_a_database(installed: Installed, tmp_path: Path) -> None:
    database = tmp_path / "prtriage.db"
    done = installed.run("db", "upgrade", extra={"DATABASE_URL": f"sqlite:///{database}"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is at revision" in done.stdout + done.stderr
    assert database.stat().st_size > 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_healthy(url: str, process: subprocess.Popen[str], seconds: float = 60) -> httpx.Response:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "serve exited before answering"
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"no answer from {url} in {seconds} s")


def test_serve_answers_healthz(installed: Installed, tmp_path: Path) -> None:
    key = tmp_path / "app.private-key.pem"
    key.write_text(make_app_key().private_pem)
    key.chmod(0o600)
    port = _free_port()
    env = {**installed.env, "GITHUB_APP_ID": "1", "GITHUB_PRIVATE_KEY_PATH": str(key),
           "GITHUB_WEBHOOK_SECRET": "secret", "PRTRIAGE_DATA_DIR": str(tmp_path / "data"),
           "PRTRIAGE_WORKERS": "0"}
    log = tmp_path / "serve.log"
    with log.open("w") as output:
        process = subprocess.Popen([str(installed.venv / "bin" / "prtriage"), "serve", "--port", str(port)],
                                   cwd=installed.cwd, env=env, stdout=output, stderr=subprocess.STDOUT,
                                   text=True)
    try:
        answer = _wait_healthy(f"http://127.0.0.1:{port}/healthz", process)
        assert answer.status_code == 200, answer.text
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait(60)
    assert status == 0, log.read_text()
    assert f"http://127.0.0.1:{port}/" in log.read_text()


def _default_layout(example: Path, into: Path) -> None:
    """The bundled example as the default policy expects a repository: its CI script under tests/."""
    for side in ("base", "head"):
        shutil.copytree(example / side, into / side, ignore=shutil.ignore_patterns("__pycache__"))
        (into / side / "tests").mkdir()
        (into / side / "ci" / "test_e2e.py").rename(into / side / "tests" / "test_e2e.py")


def test_check_with_the_builtin_default_policy(installed: Installed) -> None:
    example = Path(installed.python("from app.bundled import bundled; print(bundled('examples'))"))
    assert example.is_relative_to(installed.venv)
    _default_layout(example / "incident", installed.cwd / "repo")
    done = installed.run("check", "--base-tree", "repo/base", "--head-tree", "repo/head")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[blocking] new_rejection arguments.py:21 (in this diff)" in done.stdout
    assert "tests/test_e2e.py#2" in done.stdout

