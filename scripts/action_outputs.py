"""The GitHub Action's outputs from `prtriage check --json-out`'s report and its exit status, as
`name=value` lines for $GITHUB_OUTPUT (action.yml, docs/action.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def outputs(report: dict[str, Any] | None, status: int) -> dict[str, str]:
    """What the App's check run would conclude, with the counts behind it. Exit 3 (could not analyse), 2
    (bad usage) or no report: action_required, as a required check must not pass."""
    findings = (report or {}).get("findings", [])
    blocking = sum(1 for finding in findings if finding.get("severity") == "blocking")
    warnings = sum(1 for finding in findings if finding.get("severity") == "warning")
    if report is None or status not in (0, 1):
        conclusion = "action_required"
    else:
        conclusion = "failure" if blocking else "neutral" if warnings else "success"
    return {"conclusion": conclusion, "blocking": str(blocking),
            "suites": str(len((report or {}).get("suites", []))), "base-acceptance": _acceptance(report)}


def _acceptance(report: dict[str, Any] | None) -> str:
    health = (report or {}).get("health") or {}
    share = (health.get("base") or {}).get("accepted_share")
    return "" if share is None else f"{share:.4f}"


def main(argv: list[str]) -> int:
    path, status = Path(argv[1]), int(argv[2])
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = None
    for name, value in outputs(report if isinstance(report, dict) else None, status).items():
        print(f"{name}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
