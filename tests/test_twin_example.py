"""The bundled example does what examples/README.md promises, through the real command line."""

from __future__ import annotations

import shlex
from pathlib import Path

from twin.cli import PROJECT, prtriage

EXAMPLE = PROJECT / "examples" / "incident"
NEW_ASSERT = "assert not (args.lora_rank and args.offload_train and args.disable_weights_backuper)"


def documented_command() -> list[str]:
    """The `prtriage check ...` command of examples/README.md, without the program name."""
    readme = (PROJECT / "examples" / "README.md").read_text()
    command = readme.split("```\nprtriage check", 1)[1].split("```", 1)[0]
    return ["check", *shlex.split(command.replace("\\\n", " "))]


def test_the_documented_command_reports_the_broken_lora_suite(prtriage_cache: Path) -> None:
    run = prtriage(*documented_command(), "--format", "json", cache_dir=prtriage_cache)
    assert run.returncode == 1, run.describe()
    report = run.json()
    line = (EXAMPLE / "head" / "arguments.py").read_text().splitlines().index(f"    {NEW_ASSERT}, \\") + 1
    [finding] = report["findings"]
    assert (finding["kind"], finding["severity"], finding["suites"]) == ("new_rejection", "blocking",
                                                                         ["ci/test_e2e.py#2"])
    assert (finding["path"], finding["line"], finding["in_diff"]) == ("arguments.py", line, True)
    assert [suite["id"] for suite in report["suites"]] == ["ci/test_e2e.py", "ci/test_e2e.py#2"]
    assert (report["base"], report["head"]) == (None, None)


def test_the_readme_shows_what_the_text_report_says(prtriage_cache: Path) -> None:
    run = prtriage(*documented_command(), cache_dir=prtriage_cache)
    assert run.returncode == 1, run.describe()
    readme = (PROJECT / "examples" / "README.md").read_text()
    shown = readme.split("```\nBREAKS", 1)[1].split("```", 1)[0]
    assert ("BREAKS" + shown).strip() in run.stdout
