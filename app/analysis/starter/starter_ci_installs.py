"""The packages CI's workflows install in their `run:` steps, beside the project's dependency files.

A package the project's tests and features need may be in no dependency file: pytorch/torchtitan's
workflows install torchao themselves (`USE_CPP=0 python -m pip install --pre torchao --index-url ...`),
its pyproject.toml does not name it, and its float8 converter raises "torchao is not installed" where it
is absent. For `prtriage init` such a package is one CI has as much as a declared one
(`starter_tree.declared` asks here), at the version the commands agree on (`pinned_version`). Read from the
tree only, within the workflow bounds (the files are a pull request's content), the steps of local
composite actions included: `pip install`, `pip3 install`, `python -m pip install`, `uv pip install` and
`uv add`, their options skipped (`-r file` too: the dependency files' own reading covers them), each
requirement word's name and version specifiers kept; a word with a shell variable or an expression, a
path, a URL or an archive is left out, never guessed.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from app.analysis.core.tree_reading import read_text
from app.analysis.sources.composite_actions import job_steps
from app.analysis.sources.workflow_rows import MAX_WORKFLOW_BYTES, WorkflowError, tree_workflows

_EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.S)
_REQUIREMENT = re.compile(
    r"([A-Za-z][A-Za-z0-9._-]*)(?:\[[\w,.\s-]*\])?((?:\s*(?:===|==|~=|!=|<=|>=|<|>)\s*[\w.*+!-]+\s*,?)*)"
    r"\s*(?:;.*)?")
_ARCHIVE = re.compile(r"\.(?:whl|tar\.gz|tgz|zip|tar\.bz2)$", re.I)
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")
_PYTHON = re.compile(r"python[0-9.]*")
_PIP = re.compile(r"pip[0-9.]*")
# Words before the installer: `sudo`, `env X=1`, `time`; the shell's `if`, `then`, `do` ...
_PREFIXES = {"sudo", "env", "time", "exec", "command", "nice", "if", "then", "else", "do", "while", "until",
             "!", "{"}
# Options of pip and uv that take a value as the next word (`--index-url URL`, `-r requirements.txt`).
_VALUED = {
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--python", "-p", "--src",
    "--upgrade-strategy", "--progress-bar", "--only-binary", "--no-binary", "-C", "--config-settings",
    "--config-setting", "--trusted-host", "--platform", "--python-version", "--implementation", "--abi",
    "--index", "--default-index", "--group", "--extra", "--optional", "--cache-dir", "--log", "--proxy",
    "--retries", "--timeout", "--exists-action", "--cert", "--client-cert", "--keyring-provider",
    "--report", "--resolution", "--prerelease", "--index-strategy", "--torch-backend", "--exclude-newer",
    "--override", "--overrides", "--build-constraint", "--build-constraints", "--with", "--directory",
    "--project", "--package", "--branch", "--tag", "--rev", "--marker", "-m", "--link-mode",
}


def installed_by_ci(root: Path) -> dict[str, str]:
    """Each distribution CI's workflows install (its normalized name: `transformer-engine`), with the
    version specifiers their commands give it (`==2.1,<3`; empty where one gives none, or two differ)."""
    files = sorted(root.glob(".github/**/*.y*ml"))
    return dict(_installed(root, tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)))


def normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


@functools.lru_cache(maxsize=8)
def _installed(root: Path, files: tuple[tuple[str, int, int], ...]) -> tuple[tuple[str, str], ...]:
    """`installed_by_ci`'s answer, kept while the tree's workflow and action files (FILES) are unchanged:
    the starter asks it of every package it pins."""
    found: dict[str, set[str]] = {}
    for run in _run_texts(root):
        for name, specifiers in requirements_installed(run):
            found.setdefault(name, set()).add(specifiers)
    # Commands that disagree (a release check's `torchao==0.18.0`, the tests' nightly `torchao`) pin nothing.
    return tuple((name, next(iter(given)) if len(given) == 1 else "") for name, given in found.items())


def _run_texts(root: Path) -> Iterator[str]:
    """The shell texts of every workflow's jobs: their steps' `run:` (local composite actions' steps in
    place of their use), and the inputs handed to a reusable workflow or an action, which may run one
    (pytorch/test-infra's `linux_job_v2.yml` runs its `script:`; a text that installs nothing adds
    nothing)."""
    def read(path: str) -> str:
        return _bounded(root / path)

    for workflow, jobs in tree_workflows(root):
        for name, job in jobs.items():
            if not isinstance(job, dict):
                continue
            yield from _inputs(job)
            for job_step in job_steps(job.get("steps"), read, [], f"{workflow}:{name}"):
                run = job_step.step.get("run")
                yield from [run] if isinstance(run, str) else _inputs(job_step.step)


def _inputs(caller: dict[str, Any]) -> list[str]:
    given = caller.get("with")
    if "uses" not in caller or not isinstance(given, dict):
        return []
    return [value for value in given.values() if isinstance(value, str)]


def _bounded(path: Path) -> str:
    if path.stat().st_size > MAX_WORKFLOW_BYTES:
        raise WorkflowError(f"{path.name}: larger than {MAX_WORKFLOW_BYTES} bytes")
    return read_text(path)


def requirements_installed(run: str) -> Iterator[tuple[str, str]]:
    """(normalized name, specifiers) of each requirement a `run:` text's install commands name."""
    text = _EXPRESSION.sub("$EXPRESSION", run).replace("\\\n", " ")
    for line in text.split("\n"):
        for command in _commands(line):
            arguments = _install_arguments(command)
            if arguments is not None:
                yield from _requirements(arguments)


def _commands(line: str) -> Iterator[list[str]]:
    """A shell line's simple commands (split at `;`, `&&`, `|` ...), as words; nothing of a line shlex
    cannot split (a quote opened on another line)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return
    command: list[str] = []
    for word in words:
        if word and all(character in "();<>|&" for character in word):
            yield command
            command = []
        else:
            command.append(word)
    yield command


def _install_arguments(command: list[str]) -> list[str] | None:
    """The arguments after `install` (`add`) when COMMAND installs packages with pip or uv, else None."""
    words = list(command)
    prefixed = False  # a prefix's own options (`sudo -E`) are skipped with it
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in _PREFIXES
                     or (prefixed and words[0].startswith("-"))):
        prefixed = words.pop(0) in _PREFIXES or prefixed
    if not words:
        return None
    program = PurePosixPath(words[0]).name
    if _PYTHON.fullmatch(program) and words[1:3] == ["-m", "pip"]:
        words = words[3:]
    elif program == "uv" and words[1:2] == ["pip"]:
        words = words[2:]
    elif _PIP.fullmatch(program):
        words = words[1:]
    elif program == "uv" and words[1:2] == ["add"]:
        return words[2:]
    else:
        return None
    return words[1:] if words[:1] == ["install"] else None


def _requirements(arguments: list[str]) -> Iterator[tuple[str, str]]:
    skip = False
    for word in arguments:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in _VALUED
        elif "$" not in word and "/" not in word and ":" not in word and not _ARCHIVE.search(word):
            match = _REQUIREMENT.fullmatch(word)
            if match:
                yield normalized(match.group(1)), re.sub(r"\s+", "", match.group(2))
