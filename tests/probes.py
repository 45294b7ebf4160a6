"""Run a probe program in a fresh interpreter, the way the sandbox starts the harness, and read its answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_probe_program(tmp_path: Path, program: str) -> Any:
    """Run `program` (`python -B -s`); its last line of output is one JSON value, returned."""
    script = tmp_path / "probe.py"
    script.write_text(program)
    done = subprocess.run([sys.executable, "-B", "-s", str(script)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
