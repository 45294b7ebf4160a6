"""`prtriage init`'s detection of a `workflow_steps` source: the shell scripts GitHub workflows' `run:` steps
name that launch the application the validation runs (`python3 -m verl.trainer.main_ppo`), each step run
as CI runs it. Reads the tree only; each choice carries its reason, as the starter's others do."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from app.analysis.core.tree_reading import read_text


def steps_source(root: Path, launched: list[tuple[str, list[str]]], entries: list[str],
                 why: dict[str, str]) -> dict[str, Any]:
    """The source of the workflow steps whose scripts (LAUNCHED, from `launching_scripts`) launch one of
    ENTRIES, the applications validated; its choices' reasons go into WHY."""
    scripts = sorted({_script_glob(path) for path, found in launched if set(found) & set(entries)})
    entry_pattern = "^(" + "|".join(re.escape(e) for e in entries) + ")$"
    source: dict[str, Any] = {"kind": "workflow_steps", "workflows": [".github/workflows/*.yml"],
                              "scripts": scripts, "entry": entry_pattern,
                              "launchers": ["python", "python3", "torchrun", "ray"], "env_from": ["exported"]}
    hosted = _hosted_jobs(root, [path for path, _ in launched])
    if hosted is not None:
        source["env"] = {"HOME": "/home/runner" if hosted else "/root"}
        why["matrix.sources.env"] = ("the jobs run on GitHub's hosted runners, whose HOME is /home/runner"
                                     if hosted else "the jobs run on self-hosted runners (runs-on labels "
                                     "of their own), in CI's container as root: the scripts' $HOME is /root")
    return source


def launching_scripts(root: Path, apps: set[str]) -> list[tuple[str, list[str]]]:
    """The shell scripts the workflows' run: steps name, with the applications each launches (`-m pkg.x`)."""
    named: set[str] = set()
    for workflow in sorted((root / ".github" / "workflows").glob("*.y*ml")):
        named |= set(re.findall(r"(?<![\w./-])((?:\./)?[\w./-]+\.sh)\b", read_text(workflow)))
    found = []
    for name in sorted(named):
        path = root / name.removeprefix("./")
        text = read_text(path) if path.is_file() else ""
        launched = [m for m in re.findall(r"-m\s+([\w.]+)", text) if m in apps]
        if launched:
            found.append((path.relative_to(root).as_posix(), launched))
    return found


def _hosted_jobs(root: Path, scripts: list[str]) -> bool | None:
    """Whether the jobs whose steps run SCRIPTS run on GitHub's hosted runners (`ubuntu-latest` ...); None
    when no job says."""
    labels: list[str] = []
    for workflow in sorted((root / ".github" / "workflows").glob("*.y*ml")):
        try:
            document = yaml.safe_load(read_text(workflow))
        except yaml.YAMLError:
            continue
        jobs = document.get("jobs") if isinstance(document, dict) else None
        for job in jobs.values() if isinstance(jobs, dict) else []:
            text = yaml.safe_dump(job.get("steps")) if isinstance(job, dict) else ""
            if any(script in text for script in scripts):
                labels.append(str(job.get("runs-on")))
    if not labels:
        return None
    hosted = sum(bool(re.match(r"\W*(ubuntu|windows|macos)-", label)) for label in labels)
    return hosted * 2 > len(labels)


def _script_glob(path: str) -> str:
    parts = PurePosixPath(path).parts
    return f"{'/'.join(parts[:2])}/**/*.sh" if len(parts) > 2 else f"{parts[0]}/*.sh"
