"""Analysis environments: declared by the policy, built by pip into the cache, the only packages the sandbox
sees. pip installs from a local directory of wheels made by the test (PIP_FIND_LINKS, PIP_NO_INDEX): real pip,
real virtual environments, real sandbox, no index needed."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from needs import working_sandbox

from app.analysis.core.policy import Harness, Limits, Policy, PolicyError, RequirementsFile, parse_policy
from app.engine import environments
from app.engine.check_steps import AnalysisError, analysis_environment, run_check
from app.engine.environments import (
    EnvironmentProblem,
    declared,
    environments_dir,
    find_python,
    listed,
    prepare,
    site_packages,
)
from app.engine.matrix_capture import capture_key
from app.sandbox.runner import SandboxSpec, run_harness
from app.trees.cachedir import prune

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "sandbox_programs"


@pytest.fixture
def bwrap() -> None:
    working_sandbox()


def make_wheel(directory: Path, name: str, version: str, source: str) -> Path:
    """A pure-Python wheel of one module NAME, written by hand (the format is a zip with three metadata
    files), so that pip installs it from DIRECTORY without any index."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}.py": source,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: prtriage-tests\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = [f"{path},sha256={_urlsafe_digest(text)},{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = directory / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _urlsafe_digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


@pytest.fixture
def wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local wheel directory pip is pointed at, and environments built in this test's own directory."""
    directory = tmp_path / "wheels"
    directory.mkdir()
    make_wheel(directory, "envprobe-pkg", "1.0", "WHERE = 'envprobe 1.0'\n")
    make_wheel(directory, "envprobe-pkg", "2.0", "WHERE = 'envprobe 2.0'\n")
    monkeypatch.setenv("PIP_FIND_LINKS", str(directory))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PRTRIAGE_ENV_DIR", str(tmp_path / "envs"))
    return directory


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    tree.mkdir()
    tree.chmod(0o755)
    (tree / "README.md").write_text("the tree under analysis\n")
    return tree


def imports_in_sandbox(repo: Path, harness: Harness, cache: Path) -> dict[str, str]:
    interpreter = prepare(harness, repo, cache)
    spec = SandboxSpec(program="probe.py", repo_dir=repo, job={"action": "inspect", "paths": [], "home": "/"},
                       limits=Limits(total_seconds=60), harness_dir=PROGRAMS, interpreter=interpreter)
    run = run_harness(spec)
    [report] = [m for m in run.messages if m.get("type") == "inspect"]
    return dict(report["imports"])


@pytest.mark.usefixtures("bwrap")
def test_the_sandbox_sees_the_declared_packages_and_nothing_beside_prtriage(wheels: Path, repo: Path,
                                                                             tmp_path: Path) -> None:
    # pytest, numpy, pydantic, jinja2 and yaml all sit in the interpreter running this test
    for name in ("pytest", "numpy", "pydantic", "jinja2", "yaml"):
        __import__(name)
    harness = Harness(requirements=["envprobe-pkg==2.0"], real_packages=["envprobe_pkg"])
    interpreter = prepare(harness, repo, tmp_path / "cache")
    done = subprocess.run([interpreter.python, "-c", "import envprobe_pkg; print(envprobe_pkg.WHERE)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "envprobe 2.0"
    seen = imports_in_sandbox(repo, harness, tmp_path / "cache")
    assert seen == {"json": "ok", "sqlite3": "ok", "ssl": "ok", "jinja2": "ModuleNotFoundError",
                    "numpy": "ModuleNotFoundError", "pydantic": "ModuleNotFoundError",
                    "pytest": "ModuleNotFoundError", "yaml": "ModuleNotFoundError"}


def test_an_environment_is_built_once_and_reused(wheels: Path, tmp_path: Path) -> None:
    harness = Harness(requirements=["envprobe-pkg==1.0"])
    notes: list[tuple[str, int, int, str]] = []
    first = prepare(harness, None, tmp_path / "cache", progress=lambda *note: notes.append(note),
                    used_by="policy A")
    assert [(step, done) for step, done, _, _ in notes] == [("environment", 0), ("environment", 1)]
    assert "preparing the analysis environment" in notes[0][3]
    started = time.monotonic()
    again = prepare(harness, None, tmp_path / "cache", progress=lambda *note: notes.append(note),
                    used_by="policy B")
    assert time.monotonic() - started < 1.0  # a lookup, no pip
    assert len(notes) == 2 and again == first
    [environment] = listed(tmp_path / "cache")
    assert environment["requirements"] == ["envprobe-pkg==1.0"]
    assert environment["installed"] == ["envprobe-pkg==1.0"]
    assert environment["used_by"] == ["policy A", "policy B"]
    assert environment["path"].startswith(str(tmp_path / "envs"))


def test_the_digest_follows_what_is_installed(wheels: Path, tmp_path: Path) -> None:
    one = prepare(Harness(requirements=["envprobe-pkg==1.0"]), None, tmp_path / "cache")
    two = prepare(Harness(requirements=["envprobe-pkg==2.0"]), None, tmp_path / "cache")
    bare = prepare(Harness(), None, tmp_path / "cache")
    assert len({one.digest, two.digest, bare.digest}) == 3
    policy = Policy.model_validate({"validation": {"paths": ["a.py"], "entry": "a:main"},
                                    "matrix": {"sources": []}})
    assert len({capture_key(policy, one), capture_key(policy, two), capture_key(policy, bare)}) == 3


def test_an_environment_holds_its_requirements_compiled_and_nothing_else(wheels: Path,
                                                                         tmp_path: Path) -> None:
    # prtriage's own pip installs into it (`pip --python`): no pip, no setuptools of its own
    interpreter = prepare(Harness(requirements=["envprobe-pkg==1.0"]), None, tmp_path / "cache")
    [environment] = listed(tmp_path / "cache")
    assert environment["installed"] == ["envprobe-pkg==1.0"]
    probe = "import importlib.util as u; print([n for n in ('pip', 'setuptools') if u.find_spec(n)])"
    done = subprocess.run([interpreter.python, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    [site] = site_packages(Path(environment["path"]))
    tag = sys.implementation.cache_tag
    assert (site / "__pycache__" / f"envprobe_pkg.{tag}.pyc").is_file()  # compiled on the host, once


def test_without_a_pip_of_its_own_prtriage_gives_the_environment_one(
        wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environments, "_own_pip", lambda: [])  # as an interpreter without pip (uv's venvs)
    interpreter = prepare(Harness(requirements=["envprobe-pkg==2.0"]), None, tmp_path / "cache")
    [environment] = listed(tmp_path / "cache")
    freeze = [interpreter.python, "-m", "pip", "freeze", "--all", "--disable-pip-version-check"]
    frozen = subprocess.run(freeze, capture_output=True, text=True, check=True)
    # every distribution the environment holds, as pip lists it: its own pip too
    assert environment["installed"] == sorted(frozen.stdout.split())
    assert "envprobe-pkg==2.0" in environment["installed"]
    assert any(line.startswith("pip==") for line in environment["installed"])


def test_no_requirement_is_the_bare_standard_library(tmp_path: Path) -> None:
    interpreter = prepare(Harness(), None, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # nothing to build
    python = find_python(())
    assert (interpreter.python, interpreter.binds) == (python.executable, (sys.base_prefix,))
    assert interpreter.hidden == python.site and all("-packages" in path for path in interpreter.hidden)


def test_a_requirement_pip_cannot_install_names_the_key(wheels: Path, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as raised:
        prepare(Harness(requirements=["envprobe-pkg==9.9"]), None, tmp_path / "cache")
    message = str(raised.value)
    assert message.startswith("harness.requirements: pip could not install the analysis environment")
    assert "envprobe-pkg==9.9" in message and "\n" not in message
    assert listed(tmp_path / "cache") == []  # nothing half-built is kept
    assert not any(p.name.endswith(".partial") for p in environments_dir(tmp_path / "cache").iterdir())


def test_a_python_the_host_lacks_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match=r"^harness\.python: no Python 3\.2 or 3\.3 on this machine"):
        prepare(Harness(python=["3.2", "3.3"]), None, tmp_path / "cache")
    own = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert find_python(("3.2", own)).minor == own  # the first the host has


def test_the_engine_reports_an_environment_problem_as_could_not_analyse(wheels: Path, tmp_path: Path) -> None:
    policy = Policy.model_validate({"validation": {"paths": ["a.py"], "entry": "a:main"},
                                    "matrix": {"sources": []}, "harness": {"requirements": ["nothing-here"]}})
    with pytest.raises(AnalysisError, match=r"^harness\.requirements: pip could not install"):
        analysis_environment(policy, tmp_path, tmp_path / "cache")


def test_requirements_are_read_from_the_trees_files(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        "# CI's packages\n-r more.txt\n--index-url https://elsewhere.example/simple\ntorch==2.13.0  # cpu\n"
        "flash_attn>=2\nPyYAML\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["hydra-core==1.3.2"]\n'
        '[project.optional-dependencies]\ntest = ["pytest>=8", "Transformer-Engine"]\n')
    harness = Harness(requirements=["packaging"], requirements_from=[
        RequirementsFile(file="requirements.txt", exclude=["flash-attn"]),
        RequirementsFile(file="pyproject.toml"),
        RequirementsFile(file="pyproject.toml", extra="test", exclude=["transformer_engine"])])
    assert declared(harness, tmp_path).requirements == (
        "packaging", "torch==2.13.0", "PyYAML", "hydra-core==1.3.2", "pytest>=8")
    (tmp_path / "uv.lock").write_text('version = 1\n[[package]]\nname = "torch"\nversion = "2.13.0"\n'
                                      '[[package]]\nname = "pyyaml"\nversion = "6.0.3"\n')
    locked = Harness(requirements_from=[RequirementsFile(file="uv.lock", packages=["PyYAML", "torch"])])
    assert declared(locked, tmp_path).requirements == ("PyYAML==6.0.3", "torch==2.13.0")
    unlocked = Harness(requirements_from=[RequirementsFile(file="uv.lock", packages=["networkx"])])
    with pytest.raises(EnvironmentProblem, match=r"^harness\.requirements_from \(uv\.lock\): the lock file "
                                                 r"pins no networkx"):
        declared(unlocked, tmp_path)
    missing = Harness(requirements_from=[RequirementsFile(file="pyproject.toml", extra="docs")])
    with pytest.raises(EnvironmentProblem,
                       match=r"^harness\.requirements_from \(pyproject\.toml\): no extra"):
        declared(missing, tmp_path)
    outside = Harness(requirements_from=[RequirementsFile(file="../elsewhere.txt")])
    with pytest.raises(EnvironmentProblem, match="not a file of the tree"):
        declared(outside, tmp_path)


@pytest.mark.parametrize("line", ["--index-url https://elsewhere.example/simple", "-e .", "-r other.txt",
                                  "torch==2.13.0\n--extra-index-url x", ""])
def test_a_policy_lists_requirement_specifiers_only(line: str) -> None:
    raw = {"validation": {"paths": ["a.py"], "entry": "a:main"}, "matrix": {"sources": []},
           "harness": {"requirements": [line]}}
    with pytest.raises(PolicyError, match=r"harness\.requirements"):
        parse_policy(json.dumps(raw), "policy.yml")


def test_a_policy_names_python_versions() -> None:
    raw = {"validation": {"paths": ["a.py"], "entry": "a:main"}, "matrix": {"sources": []},
           "harness": {"python": "3.12"}}
    assert parse_policy(json.dumps(raw), "policy.yml").harness.python == ["3.12"]
    raw["harness"] = {"python": ["3.12", "latest"]}
    with pytest.raises(PolicyError, match=r"harness\.python"):
        parse_policy(json.dumps(raw), "policy.yml")


def test_cache_prune_removes_an_unused_environment(wheels: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRTRIAGE_ENV_DIR")  # the cache's own envs/, which prune looks after
    cache = tmp_path / "cache"
    prepare(Harness(requirements=["envprobe-pkg==1.0"]), None, cache)
    [environment] = listed(cache)
    assert Path(environment["path"]).parent == cache / "envs"
    kept = prune(cache, 0)
    assert kept.removed == 0 and listed(cache)  # used in the last hour: never taken from a running check
    old = time.time() - 2 * 3600
    os.utime(environment["path"], (old, old))
    report = prune(cache, 0)
    assert report.removed == 1 and listed(cache) == []


def prtriage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, **env})


def test_env_build_and_list_from_the_command_line(wheels: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yml"
    policy.write_text(json.dumps({"validation": {"paths": ["a.py"], "entry": "a:main"},
                                  "matrix": {"sources": []},
                                  "harness": {"requirements": ["envprobe-pkg==2.0"]}}))
    cache = ["--cache-dir", str(tmp_path / "cache")]
    dry = prtriage("env", "build", "--policy", str(policy), "--dry-run", "--format", "json", *cache, env={})
    assert dry.returncode == 0, dry.stderr
    key = json.loads(dry.stdout)["key"]
    assert not (tmp_path / "envs").exists()  # nothing built
    built = prtriage("env", "build", "--policy", str(policy), "--format", "json", *cache, env={})
    assert built.returncode == 0, built.stderr
    assert "preparing the analysis environment" in built.stderr  # said even when stderr is no terminal
    document = json.loads(built.stdout)
    assert document["installed"] == ["envprobe-pkg==2.0"]
    listing = prtriage("env", "list", "--format", "json", *cache, env={})
    [environment] = json.loads(listing.stdout)["environments"]
    assert environment["digest"] == document["digest"] and environment["used_by"] == ["a:main (a.py)"]
    assert Path(environment["path"]).name == key  # what a CI cache is keyed by names the built directory
    policy.write_text(policy.read_text().replace("envprobe-pkg==2.0", "envprobe-pkg==7"))
    failed = prtriage("env", "build", "--policy", str(policy), *cache, env={})
    assert failed.returncode == 3
    [line] = [line for line in failed.stderr.splitlines() if line.startswith("prtriage:")]
    assert line.startswith("prtriage: cannot analyse: harness.requirements: pip could not install")
    assert "Traceback" not in failed.stderr


@pytest.mark.usefixtures("bwrap")
def test_a_check_builds_what_the_base_declares_never_what_the_head_does(wheels: Path, tmp_path: Path) -> None:
    """The policy reads requirements.txt; the pull request changes it. The environment is the base's."""
    example = ROOT / "examples" / "incident"
    trees = {}
    for side, pin in (("base", "envprobe-pkg==1.0"), ("head", "envprobe-pkg==2.0")):
        tree = shutil.copytree(example / side, tmp_path / side)
        (tree / "requirements.txt").write_text(f"{pin}\n")
        tree.chmod(0o755)
        trees[side] = tree
    raw = yaml.safe_load((example / "policy.yml").read_text())
    raw["harness"] = {"requirements_from": [{"file": "requirements.txt"}]}
    report = run_check(trees["base"], trees["head"], Policy.model_validate(raw), base_sha=None, head_sha=None,
                       cache_dir=tmp_path / "cache", allow_unsandboxed=False)
    assert [f.kind for f in report.findings if f.severity == "blocking"] == ["new_rejection"]
    [environment] = listed(tmp_path / "cache")
    assert environment["installed"] == ["envprobe-pkg==1.0"]
