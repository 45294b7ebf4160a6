"""A producing job's `run:` steps, run as GitHub's runner runs them, and what they wrote to $GITHUB_OUTPUT.

A job whose matrix is `fromJSON(needs.<job>.outputs.<x>)` gets its rows from another job's step (NVIDIA-NeMo/
RL's pre-flight `evaluate` step runs `bash .github/scripts/plan-tests.sh` and `jq`, and writes
`h100_functional_test_scripts=[...]` to $GITHUB_OUTPUT). Here each step's text runs in the recording
bash (`bash -eo pipefail`, as the runner's default shell) with a scratch $GITHUB_OUTPUT and $GITHUB_ENV, the
tree as $GITHUB_WORKSPACE and the few tools such steps compute with (`find`, `jq`, `python3`) real; any other
command (`git`, `gh`, `curl`) does nothing and succeeds, and the sandbox has no network and no secrets. What
the host reads is the last step's outputs: a step that needed more than this gave none, and the host says so.

Runs INSIDE the sandbox: imports nothing of `app`, only the standard library and its sibling modules.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.sandbox.harness import intercept_shell
else:
    import intercept_shell

# Beside the recording bash's text tools: what steps that compute a matrix call (a file listing, JSON).
TOOLS = ("find", "jq", "ls", "xargs")
MAX_OUTPUTS = 256
MAX_OUTPUT_CHARS = 256 * 1024
_DELIMITED = re.compile(r"^([^=<\s]+)<<(\S+)$")


def prepare_tools() -> str:
    """The recording bash's tools, no launcher recorded, with TOOLS and this interpreter as `python3`."""
    tools = intercept_shell.prepare_tools([])
    search = os.environ.get("PATH", "/usr/bin:/bin")
    for tool in TOOLS:
        found = shutil.which(tool, path=search)
        if found and not os.path.exists(os.path.join(tools, tool)):
            os.symlink(found, os.path.join(tools, tool))
    for name in ("python", "python3"):
        os.symlink(sys.executable, os.path.join(tools, name))
    return tools


def run_steps(item: dict[str, Any], repo: str, seconds: float) -> tuple[dict[str, str], str | None]:
    """The outputs of the item's last step, and why there are none when a step failed."""
    tools = prepare_tools()
    scratch = tempfile.mkdtemp(prefix="prtriage-runner-", dir="/tmp")
    try:
        settings = intercept_shell.ShellSettings(tools, scratch, [], seconds)
        env = {**os.environ, **item["env"], "GITHUB_WORKSPACE": repo, "RUNNER_TEMP": scratch}
        outputs: dict[str, str] = {}
        for number, step in enumerate(item["steps"], 1):
            files = {name: os.path.join(scratch, f"{name.lower()}-{number}")
                     for name in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
            for path in files.values():
                open(path, "w").close()
            before = len(settings.problems)
            intercept_shell.run_shell(settings, "set -eo pipefail\n" + str(step["run"]),
                                      {**env, **step["env"], **files}, repo)
            if settings.status != 0:
                said = f": {settings.problems[before]}" if len(settings.problems) > before else ""
                return {}, f"step {step['name']} failed with status {settings.status}{said}"[:600]
            env.update(read_commands(files["GITHUB_ENV"]))
            outputs = read_commands(files["GITHUB_OUTPUT"])
        return outputs, None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(tools, ignore_errors=True)


def read_commands(path: str) -> dict[str, str]:
    """The `name=value` and `name<<DELIMITER` ... `DELIMITER` entries of a $GITHUB_OUTPUT or $GITHUB_ENV file,
    the last of a name winning, as the runner reads them."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(MAX_OUTPUT_CHARS * 4).splitlines()
    except OSError:
        return {}
    found: dict[str, str] = {}
    position = 0
    while position < len(lines) and len(found) < MAX_OUTPUTS:
        line = lines[position]
        delimited = _DELIMITED.match(line)
        if delimited is not None:
            end = next((i for i in range(position + 1, len(lines)) if lines[i] == delimited.group(2)), None)
            if end is None:
                break  # the runner fails the step on an unclosed delimiter
            found[delimited.group(1)] = "\n".join(lines[position + 1:end])[:MAX_OUTPUT_CHARS]
            position = end + 1
            continue
        name, equals, value = line.partition("=")
        if equals and name.strip():
            found[name.strip()] = value[:MAX_OUTPUT_CHARS]
        position += 1
    return found
