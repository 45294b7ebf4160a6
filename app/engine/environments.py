"""Analysis environments: the Python and the packages a policy declares (`harness.python`,
`harness.requirements`, `harness.requirements_from`), built by pip into a virtual environment under the cache
directory, outside the sandbox, and reused by every later check (docs/policy.md, "The analysis environment").

pip, not uv: pip reads the configuration the user's pip already has (index, extra indexes, find-links,
constraints, certificates, proxies), which is what "the package index the user's pip is configured for"
means, and it is in every virtual environment prtriage can be installed into (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.analysis.core.policy import Harness, RequirementsFile, check_requirement
from app.bundled import package_file
from app.sandbox.interpreter import Interpreter
from app.trees.cachedir import cached_entry, disk_usage, use

SECTION = "envs"
INSTALLATION_SCRIPT = package_file("app.sandbox", "installation.py")
ENV_DIR_VARIABLE = "PRTRIAGE_ENV_DIR"
MARKER = "prtriage-env.json"
FORMAT = 2  # of the environment's key and marker: a change rebuilds every environment
BUILD_SECONDS = 3600.0
MAX_REQUIREMENTS_FILE = 1024 * 1024
# Variables never passed to pip: it runs packages' build code on the host.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PRIVATE_KEY|DATABASE_URL|QUEUE_URL|CREDENTIAL",
                         re.IGNORECASE)
Progress = Callable[[str, int, int, str], None]


class EnvironmentProblem(Exception):
    """The analysis environment cannot be had; the message names the policy key to look at."""


@dataclass(frozen=True)
class Python:
    """An installation of Python on the host."""

    executable: str
    version: str  # 3.12.1
    full: str  # sys.version
    base_prefix: str
    site: tuple[str, ...]  # its own site-packages, hidden in the sandbox

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class Declared:
    """What a policy asks for, its files read: the key of an environment."""

    python: tuple[str, ...]
    requirements: tuple[str, ...]


def declared(harness: Harness, tree: Path | None) -> Declared:
    """The requirements of HARNESS, with those of its `requirements_from` files read from TREE (the revision
    whose policy this is: the base, never the head)."""
    found = list(harness.requirements)
    for source in harness.requirements_from:
        if tree is None:
            raise EnvironmentProblem(f"harness.requirements_from: {source.file} needs a tree to read it from")
        found += read_requirements(tree, source)
    return Declared(tuple(harness.python), tuple(dict.fromkeys(found)))


def read_requirements(tree: Path, source: RequirementsFile) -> list[str]:
    path = (tree / source.file)
    key = f"harness.requirements_from ({source.file})"
    try:
        inside = path.resolve().is_relative_to(tree.resolve())
        if not inside or not path.is_file() or path.stat().st_size > MAX_REQUIREMENTS_FILE:
            raise EnvironmentProblem(f"{key}: not a file of the tree (or larger than 1 MiB)")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvironmentProblem(f"{key}: cannot read it: {exc}") from None
    if path.name.endswith(".lock"):
        lines = _locked_lines(text, source, key)
    elif path.name.endswith(".toml"):
        lines = _pyproject_lines(text, source, key)
    else:
        lines = _requirement_lines(text)
    excluded = {_normalized(name) for name in source.exclude}
    kept = []
    for line in lines:
        try:
            requirement = check_requirement(line)
        except ValueError as exc:
            raise EnvironmentProblem(f"{key}: {exc}") from None
        if _normalized(_name(requirement)) not in excluded:
            kept.append(requirement)
    return kept


def _requirement_lines(text: str) -> list[str]:
    # pip options (-r, -c, --index-url ...) are not followed: where pip looks is the user's configuration
    lines = (line.split(" #")[0].strip() for line in text.replace("\\\n", "").splitlines())
    return [line for line in lines if line and not line.startswith(("#", "-"))]


def _pyproject_lines(text: str, source: RequirementsFile, key: str) -> list[str]:
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        raise EnvironmentProblem(f"{key}: not TOML: {exc}") from None
    if source.extra is None:
        values = project.get("dependencies", [])
    else:
        values = project.get("optional-dependencies", {}).get(source.extra)
        if values is None:
            raise EnvironmentProblem(f"{key}: no extra {source.extra!r} in [project.optional-dependencies]")
    return [str(value) for value in values]


def _locked_lines(text: str, source: RequirementsFile, key: str) -> list[str]:
    """`name==version` for each of the source's packages, as the uv.lock pins it."""
    if not source.packages:
        raise EnvironmentProblem(f"{key}: a lock file needs `packages`, the distributions to take from it")
    try:
        locked = {_normalized(str(package.get("name", ""))): str(package.get("version", ""))
                  for package in tomllib.loads(text).get("package", [])}
    except (tomllib.TOMLDecodeError, AttributeError) as exc:
        raise EnvironmentProblem(f"{key}: not a uv.lock: {exc}") from None
    missing = [name for name in source.packages if not locked.get(_normalized(name))]
    if missing:
        raise EnvironmentProblem(f"{key}: the lock file pins no {', '.join(missing)}")
    return [f"{name}=={locked[_normalized(name)]}" for name in source.packages]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@(]", requirement, maxsplit=1)[0]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def prepare(harness: Harness, tree: Path | None, cache_dir: Path | None, *, progress: Progress | None = None,
            used_by: str = "") -> Interpreter:
    """The interpreter the sandbox runs for this policy: the standard library alone when it declares no
    requirement, else its virtual environment, built on first use (progress step "environment")."""
    wanted = declared(harness, tree)
    python = find_python(wanted.python)
    if not wanted.requirements:
        digest = _digest({"bare": python.executable, "python": python.full})
        return Interpreter(python=python.executable, binds=(python.base_prefix,), hidden=python.site,
                           digest=digest, version=python.version)
    directory = environments_dir(cache_dir) / environment_key(python, wanted.requirements)
    marker = _built(directory, python, wanted.requirements, progress)
    if used_by:
        _note_use(directory, used_by)
    return Interpreter(python=str(directory / "bin" / "python"), binds=(str(directory), python.base_prefix),
                       hidden=python.site, digest=marker["digest"], version=python.version)


def environments_dir(cache_dir: Path | None) -> Path:
    """Where analysis environments live: $PRTRIAGE_ENV_DIR (read when asked: an image's environments built
    ahead of time, tests sharing one directory), else the cache directory's `envs/`."""
    if os.environ.get(ENV_DIR_VARIABLE):
        return Path(os.environ[ENV_DIR_VARIABLE])
    if cache_dir is None:
        raise EnvironmentProblem("harness.requirements: no cache directory to build the analysis environment "
                                 f"in (give one, or set {ENV_DIR_VARIABLE})")
    return cache_dir / SECTION


def environment_key(python: Python, requirements: tuple[str, ...]) -> str:
    return _digest({"format": FORMAT, "python": python.executable, "version": python.full,
                    "requirements": sorted(requirements)}, length=24)


def _built(directory: Path, python: Python, requirements: tuple[str, ...],
           progress: Progress | None) -> dict[str, Any]:
    """The marker of the environment in DIRECTORY, built first when it is not there (one builder at a time
    per environment: a second waits for the first and then uses its result)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    marker = _marker(directory) if use(directory) else None
    if marker is not None:
        return marker
    with _build_lock(directory):
        marker = _marker(directory) if use(directory) else None
        if marker is not None:
            return marker
        if directory.exists():  # a build that died before its marker: never used, made again
            shutil.rmtree(directory, ignore_errors=True)
        what = f"Python {python.version}, {len(requirements)} requirements"
        if progress is not None:
            progress("environment", 0, 1, f"preparing the analysis environment ({what})")
        started = time.monotonic()
        cached_entry(directory, lambda partial: _build(partial, python, requirements, started))
        if progress is not None:
            progress("environment", 1, 1, f"analysis environment ready ({what}, "
                                          f"{time.monotonic() - started:.0f} s)")
    marker = _marker(directory)
    if marker is None:
        raise EnvironmentProblem(f"harness.requirements: the environment built in {directory} has no marker")
    return marker


def _build(partial: Path, python: Python, requirements: tuple[str, ...], started: float) -> None:
    log_path = partial / "build.log"
    own_pip = _own_pip()
    target = str(partial / "bin" / "python")
    # prtriage's own pip installs into the environment (`pip --python`): no pip of its own to unpack into it
    # first (ensurepip: 3.3 s of CPU, more at load), and the environment holds only what the policy asks for
    _run([python.executable, "-m", "venv", *(["--without-pip"] if own_pip else []), str(partial)], log_path,
         "harness.python", f"Python {python.version} could not make a virtual environment (its venv module)")
    listing = partial / "requirements.txt"
    listing.write_text("".join(f"{line}\n" for line in requirements), encoding="utf-8")
    pip = [*own_pip, "--python", target] if own_pip else [target, "-m", "pip"]
    _run([*pip, "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
          "--retries", "2", "--no-compile", "-r", str(listing)], log_path, "harness.requirements",
         f"pip could not install the analysis environment ({len(requirements)} requirements for Python "
         f"{python.version})")
    _compile(target, site_packages(partial), log_path)
    installed = installed_distributions(partial)
    document = {"format": FORMAT, "python": python.executable, "version": python.version,
                "requirements": list(requirements), "installed": installed,
                "digest": _digest({"python": python.full, "installed": installed}),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.monotonic() - started, 1), "used_by": []}
    (partial / MARKER).write_text(json.dumps(document, indent=1), encoding="utf-8")
    _open_to_others(partial)


@functools.cache
def _own_pip() -> list[str]:
    """pip as prtriage's interpreter has it, when it can install into another (`--python`, pip 22.3); else
    nothing: the environment then gets a pip of its own from its Python's ensurepip."""
    try:
        version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return []
    numbers = [int(part) if part.isdigit() else 0 for part in version.split(".")[:2]]
    return [sys.executable, "-m", "pip"] if numbers >= [22, 3] else []


def _compile(python: str, directories: list[Path], log_path: Path) -> None:
    """The installed modules' bytecode, on every core (pip compiles one file after the other): the sandbox
    reads the environment read-only, so each of its processes would compile them again. A file that does
    not compile is left to its importer, as pip leaves it."""
    argv = [python, "-m", "compileall", "-q", "-j", "0", *map(str, directories)]
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, check=False,
                           timeout=BUILD_SECONDS, env=_pip_env())


def site_packages(environment: Path) -> list[Path]:
    """The environment's site-packages directories (lib64 is often a link to lib: listed once)."""
    found: dict[Path, Path] = {}
    for path in sorted(environment.glob("lib*/python*/site-packages")):
        found.setdefault(path.resolve(), path)
    return list(found.values())


def installed_distributions(environment: Path) -> list[str]:
    """Every distribution installed in the environment, `name==version`, sorted: what `pip freeze` lists,
    read from the metadata without starting pip."""
    found = {f"{dist.metadata['Name']}=={dist.version}"
             for dist in importlib.metadata.distributions(path=[str(p) for p in site_packages(environment)])}
    return sorted(found)


def _run(argv: list[str], log_path: Path, key: str, what: str) -> None:
    try:
        with log_path.open("a", encoding="utf-8") as log:
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.PIPE,
                                  text=True, check=False, timeout=BUILD_SECONDS, env=_pip_env())
            log.write(done.stderr)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{key}: {what}: still running after {BUILD_SECONDS:.0f} s") from None
    except OSError as exc:
        raise EnvironmentProblem(f"{key}: {what}: {exc}") from None
    if done.returncode != 0:
        raise EnvironmentProblem(f"{key}: {what}: {_last_error(done.stderr)}")


def _last_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["no message"])[-1][:500]


def _pip_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not SECRET_NAME.search(name)}


def _open_to_others(root: Path) -> None:
    # the sandbox reads the environment as an unprivileged uid, whatever the umask was
    for directory, _, files in os.walk(root):
        os.chmod(directory, os.stat(directory).st_mode | 0o555)
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)


@contextlib.contextmanager
def _build_lock(directory: Path) -> Iterator[None]:
    # a dot name: the cache's pruning takes a lock file left over for an hour as a leftover temporary
    with open(directory.parent / f".{directory.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _marker(directory: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("format") == FORMAT else None


def _note_use(directory: Path, used_by: str) -> None:
    """Which policies used the environment (`prtriage env list`); best effort, a read-only cache skips it."""
    marker = _marker(directory)
    if marker is None or used_by in marker.get("used_by", []):
        return
    marker["used_by"] = [*marker.get("used_by", []), used_by][-20:]
    with contextlib.suppress(OSError):
        temporary = directory / f".{MARKER}.{os.getpid()}"
        temporary.write_text(json.dumps(marker, indent=1), encoding="utf-8")
        temporary.chmod(0o644)
        os.replace(temporary, directory / MARKER)


def listed(cache_dir: Path | None) -> list[dict[str, Any]]:
    """Every environment the cache holds, with its directory and size on disk."""
    found = []
    with contextlib.suppress(OSError):
        for entry in sorted(environments_dir(cache_dir).iterdir()):
            marker = _marker(entry) if entry.is_dir() and not entry.name.startswith(".") else None
            if marker is not None:
                found.append({**marker, "path": str(entry), "last_used": entry.stat().st_mtime,
                              "size": disk_usage(str(entry))})
    return found


def find_python(versions: tuple[str, ...]) -> Python:
    """The first of VERSIONS this host has (prtriage's own interpreter, else `pythonX.Y` on PATH); none
    asked for: prtriage's own."""
    own = _probe(sys.executable)
    if own is None:
        raise EnvironmentProblem(f"harness.python: the interpreter prtriage runs on ({sys.executable}) "
                                 "does not answer")
    if not versions:
        return own
    for version in versions:
        if own.minor == version:
            return own
        for candidate in _candidates(version):
            python = _probe(candidate)
            if python is not None and python.minor == version:
                return python
    raise EnvironmentProblem(f"harness.python: no Python {' or '.join(versions)} on this machine (looked for "
                             f"{', '.join(f'python{v}' for v in versions)} on PATH and in pyenv's versions; "
                             f"prtriage runs on {own.version}): install one, or add {own.minor} to the list")


def _candidates(version: str) -> list[str]:
    """Where a Python X.Y may be: on PATH, then installed by pyenv but not selected (its shim refuses)."""
    name = f"python{version}"
    found = [shutil.which(name) or ""]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    with contextlib.suppress(OSError):
        found += sorted((str(path) for path in pyenv.glob(f"{version}.*/bin/{name}")), reverse=True)
    return [path for path in found if path]


@functools.cache
def _probe(executable: str) -> Python | None:
    """What EXECUTABLE is (app/sandbox/installation.py run by it), or None when it does not run (a pyenv
    shim of a version not installed)."""
    try:
        done = subprocess.run([executable, "-I", str(INSTALLATION_SCRIPT)], capture_output=True, text=True,
                              check=True, timeout=60)
        found = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return Python(executable=found["executable"], version=found["version"], full=found["full"],
                  base_prefix=found["base_prefix"], site=tuple(found["site"]))


def _digest(document: dict[str, Any], length: int = 16) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:length]
