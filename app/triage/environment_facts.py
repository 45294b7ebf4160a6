"""What a main health's analysis environment was (docs/policy.md, "The analysis environment"), kept beside
the policy's source in the health's `policy` JSON, so the repository page can say under which Python and with
which packages the default branch was judged, and what the harness stubbed.

Read after the doctor ran: the environment is built by then, so this only reads its marker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.analysis.core.policy import Policy
from app.engine.check_steps import analysis_environment
from app.engine.environments import MARKER, declared


def environment_facts(policy: Policy, tree: Path, cache_dir: Path) -> dict[str, Any]:
    """The environment POLICY declares at TREE, as the doctor used it: `python` (the version the harness ran
    under), `python_asked` (`harness.python`), `requirements` (`harness.requirements` and those read by
    `harness.requirements_from`), `installed` (the environment's `pip freeze`; empty: the standard library
    alone), `digest` (its content, part of every cache key), `stub_modules` (stubbed even when installed) and
    `stub_missing_modules` (a module the environment lacks is stubbed, else its import fails)."""
    interpreter = analysis_environment(policy, tree, cache_dir)
    harness = policy.harness
    requirements = declared(harness, tree).requirements
    return {"python": interpreter.version, "python_asked": list(harness.python),
            "requirements": list(requirements),
            "installed": _installed(Path(interpreter.python)) if requirements else [],
            "digest": interpreter.digest, "stub_modules": sorted(harness.stub_modules),
            "stub_missing_modules": harness.stub_missing_modules}


def _installed(python: Path) -> list[str]:
    """The `name==version` of each distribution the environment of PYTHON (its `bin/python`) holds, as its
    marker recorded them when it was built; empty when the marker cannot be read."""
    try:
        marker = json.loads((python.parent.parent / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    installed = marker.get("installed") if isinstance(marker, dict) else None
    return [str(line) for line in installed] if isinstance(installed, list) else []
