"""The machine contract (INTERFACES.md): `--format json` prints exactly one JSON object on every exit status
of check, matrix, doctor and init, with `error` {kind, message} set exactly when the command could not run
(2) or ran blind (3). Each command's real process, each of its exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from needs import working_sandbox
from twin.miles import build_miles_twin

PROJECT = Path(__file__).resolve().parents[1]
EXAMPLE = PROJECT / "examples" / "incident"
BASE, HEAD, POLICY = str(EXAMPLE / "base"), str(EXAMPLE / "head"), str(EXAMPLE / "policy.yml")

# (command line after `prtriage`, with {tmp} for a scratch directory; exit status; error kind or None)
CASES = [
    (["check", "--base-tree", BASE, "--head-tree", BASE, "--policy", POLICY], 0, None),
    (["check", "--base-tree", BASE, "--head-tree", HEAD, "--policy", POLICY], 1, None),
    (["check", "--base-tree", BASE, "--head-tree", HEAD, "--bogus"], 2, "usage"),
    (["check", "--base-tree", BASE, "--head-tree", HEAD, "--policy", "{tmp}/missing.yml"], 2, "policy"),
    (["check", "--repo", "{tmp}/nowhere", "--base", "a", "--head", "b"], 2, "usage"),
    (["check", "--base-tree", BASE, "--head-tree", HEAD], 3, "analysis"),  # the default policy
    (["check", "--repo", "{tmp}", "--base", "a", "--head", "b"], 3, "analysis"),  # not a git repository
    (["matrix", "--tree", HEAD, "--policy", POLICY], 0, None),
    (["matrix"], 2, "usage"),
    (["matrix", "--repo", "{tmp}", "--rev", "a"], 3, "analysis"),
    (["doctor", "--tree", BASE, "--policy", POLICY], 0, None),
    (["doctor", "--tree", BASE, "--rev", "x"], 2, "usage"),
    (["doctor", "--tree", BASE], 3, "blind"),
    (["init", "--tree", "{tmp}/twin", "--output", "{tmp}/starter.yml"], 0, None),
    (["init", "--tree", BASE, "--output", POLICY], 2, "usage"),  # the file exists
    (["init", "--tree", BASE, "--output", "{tmp}/out.yml"], 3, "analysis"),  # no validator to detect
]


@pytest.mark.parametrize(("argv", "status", "kind"), CASES,
                         ids=[f"{argv[0]}-{status}-{i}" for i, (argv, status, _) in enumerate(CASES)])
def test_one_json_object_on_every_exit_status(argv: list[str], status: int, kind: str | None,
                                              tmp_path: Path) -> None:
    if status == 1 or (status == 0 and argv[0] != "check"):  # repository code runs
        working_sandbox()
    if "{tmp}/twin" in argv:
        build_miles_twin(tmp_path / "twin")
    words = [word.replace("{tmp}", str(tmp_path)) for word in argv]
    env = {k: v for k, v in os.environ.items()
           if k != "GITHUB_REPOSITORY" and (not k.startswith("PRTRIAGE_") or k == "PRTRIAGE_ENV_DIR")}
    done = subprocess.run([sys.executable, "-m", "app.cli", *words, "--format", "json", "--cache-dir",
                           str(tmp_path / "cache")], cwd=PROJECT, capture_output=True, text=True, timeout=600,
                          check=False, env=env)
    assert done.returncode == status, done.stdout + done.stderr
    document = json.loads(done.stdout)  # the whole of stdout: one object, nothing around it
    assert isinstance(document, dict), done.stdout
    if kind is None:
        assert "error" not in document, document["error"]
    else:
        assert document["error"]["kind"] == kind, document
        assert isinstance(document["error"]["message"], str) and document["error"]["message"]
        assert "Traceback" not in done.stderr
    if (argv[0] != "init" and status in (0, 1)) or kind == "blind":
        assert document["policy"]["source"] in ("option", "default"), document


def test_doctor_json_carries_the_policy_and_the_next_steps(tmp_path: Path) -> None:
    """What its stderr says, in its JSON too (each error group's hint: tests/test_doctor.py): the default
    policy found nothing here."""
    done = subprocess.run([sys.executable, "-m", "app.cli", "doctor", "--tree", BASE, "--format", "json",
                           "--cache-dir", str(tmp_path / "cache")], cwd=PROJECT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 3, done.stderr
    document = json.loads(done.stdout)
    assert document["policy"] == {"source": "default", "path": "policies/default.yml", "repository": None}
    assert any(step.startswith(f"`prtriage init --tree {BASE}`") for step in document["next_steps"])
    assert document["error"] == {"kind": "blind", "message": "could not analyse: no CI suite was captured, "
                                                             "so nothing could be replayed"}
