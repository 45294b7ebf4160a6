"""What capture recorded, made into suites: a script's launches of the entry, or the definitions a
python_definitions function returned, with the note saying why a script yielded none or only some.

Pure: the capture harness's messages come in as plain dicts; nothing here runs a process or reads a file.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.analysis.core.model import CaptureFailure, Suite
from app.analysis.sources.python_definitions_keys import PythonDefinitions
from app.analysis.sources.source_keys import Recording
from app.analysis.sources.source_kind import MAX_DEFINED_CHARS, Found, ScriptReport

RUNTIME_ENV_OPTION = "--runtime-env-json"
PARTIAL = "partial capture: "  # reason prefix of a script that yielded suites and then failed
MAX_DEFINED_WORDS = 512  # of one python_definitions suite: the sandbox's word, bounded again on the host


def from_launches(report: ScriptReport, source: Recording, repo_mount: str) -> Found:
    """What one script's report yields to a source that runs scripts and records their launches."""
    if report.status == "disabled":
        return Found(disabled=[report.script], ran=False)
    found = suites_from_launches(report.script, report.launches, source, repo_mount)
    outcome, note = script_kind(report, found, source)
    return Found(found, outcome, note)


def from_definitions(report: ScriptReport, source: PythonDefinitions, repo_mount: str) -> Found:
    """What one python_definitions function's report yields: its definitions' runs, and those CI skips."""
    disabled = [f"{report.script}::{name}" for name in report.disabled]
    if report.status == "disabled":
        return Found(disabled=disabled, ran=False)
    found = suites_from_definitions(report, source)
    outcome, note = definitions_kind(report, found)
    return Found(found, outcome, note, disabled)


def suites_from_definitions(report: ScriptReport, source: PythonDefinitions) -> list[Suite]:
    """The suites a python_definitions function reported: ids `function::name`, argv as reported (bounded,
    words only), the source's entry and env. A malformed item is left out."""
    suites: list[Suite] = []
    for item in report.suites:
        argv = item.get("argv") if isinstance(item, Mapping) else None
        if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
            continue
        name = str(item.get("name"))[:MAX_DEFINED_CHARS]
        suites.append(Suite(id=f"{report.script}::{name}", script=report.script,
                            argv=tuple(word[:MAX_DEFINED_CHARS] for word in argv[:MAX_DEFINED_WORDS]),
                            env=dict(source.env), entry=source.entry))
    return suites


def suites_from_launches(script: str, launches: Sequence[Mapping[str, Any]], source: Recording,
                         repo_mount: str) -> list[Suite]:
    """One suite per launch of the source's entry, in launch order; ids `script`, `script#2`, ..."""
    entry_pattern = re.compile(source.entry)
    suites: list[Suite] = []
    for launch in launches:
        words = [str(w) for w in launch.get("argv") or ()]
        position = next((i for i, word in enumerate(words) if entry_pattern.search(word)), None)
        if position is None:
            continue
        suite_id = script if not suites else f"{script}#{len(suites) + 1}"
        suites.append(Suite(id=suite_id, script=script, argv=tuple(words[position + 1:]),
                            env=_suite_env(words[:position], launch, source),
                            entry=_repo_relative(words[position], str(launch.get("cwd") or ""), repo_mount)))
    return suites


def _suite_env(before_entry: list[str], launch: Mapping[str, Any], source: Recording) -> dict[str, str]:
    env: dict[str, str] = {}
    if "exported" in source.env_from:
        exported = {str(k): str(v) for k, v in (launch.get("env") or {}).items()}
        env.update({k: v for k, v in exported.items() if not source.env_keep or k in source.env_keep})
    if "runtime_env_json" in source.env_from:
        env.update(runtime_env_vars(before_entry))
    return env


def runtime_env_vars(words: Sequence[str]) -> dict[str, str]:
    """The `env_vars` of the last `--runtime-env-json` option among `words` (ray job submit's job env)."""
    found: dict[str, str] = {}
    for i, word in enumerate(words):
        if word.startswith(RUNTIME_ENV_OPTION + "="):
            text: str | None = word[len(RUNTIME_ENV_OPTION) + 1:]
        elif word == RUNTIME_ENV_OPTION and i + 1 < len(words):
            text = words[i + 1]
        else:
            continue
        try:
            runtime_env = json.loads(text or "")
        except ValueError:
            continue
        env_vars = runtime_env.get("env_vars") if isinstance(runtime_env, dict) else None
        if isinstance(env_vars, dict):
            found = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in env_vars.items()}
    return found


def _repo_relative(word: str, cwd: str, repo_mount: str) -> str:
    mount = repo_mount.rstrip("/")
    path = word if posixpath.isabs(word) or not cwd else posixpath.join(cwd, word)
    path = posixpath.normpath(path)
    if path.startswith(mount + "/"):
        return path[len(mount) + 1:]
    return word


def script_kind(report: ScriptReport, found: list[Suite],
                source: Recording) -> tuple[str, CaptureFailure | None]:
    """"captured" | "partial" | "no_entry" | "failed", with the note that says why (None: ran clean).

    A script that ran to its end without launching the entry is a CI script of another kind (pytest, a
    server): no failure of capture. One that was stopped before any entry launch is a failure: its suites
    may be the ones it never reached.
    """
    if found:
        if report.reason:  # stopped after its launches, or a launch bash could not run: some may be lost
            return "partial", CaptureFailure(report.script, PARTIAL + report.reason)
        return "captured", None
    if report.ended:
        return "no_entry", CaptureFailure(report.script, _launched(report, source))
    return "failed", CaptureFailure(report.script, report.reason or "no launch recorded")


def definitions_kind(report: ScriptReport, found: list[Suite]) -> tuple[str, CaptureFailure | None]:
    """A python_definitions function is "captured", "partial" (some definitions failed) or "failed"."""
    if found:
        if report.reason:
            return "partial", CaptureFailure(report.script, PARTIAL + report.reason)
        return "captured", None
    return "failed", CaptureFailure(report.script, report.reason or "no suite defined")


def _launched(report: ScriptReport, source: Recording) -> str:
    commands = list(dict.fromkeys(_command_name(launch) for launch in report.launches))
    if not commands:
        return "ran to its end and launched nothing"
    shown = ", ".join(commands[:4]) + (f" and {len(commands) - 4} more" if len(commands) > 4 else "")
    return f"ran to its end; launched {shown}, not the entry ({source.entry})"


def _command_name(launch: Mapping[str, Any]) -> str:
    """The launched program, with the module or script it runs (`python3 -m pytest`, `python3 x.py`)."""
    words = [str(w) for w in launch.get("argv") or ()][:3]
    if len(words) >= 3 and words[1] == "-m":
        return " ".join(words)
    return " ".join(words[:2]) if len(words) >= 2 and not words[1].startswith("-") else " ".join(words[:1])
