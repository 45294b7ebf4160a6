"""A twin whose validation calls a helper module that `validation.paths` does not name (the slime case:
a regression there came out "untouched", with nothing run)."""

from __future__ import annotations

from pathlib import Path

import yaml

TRAIN = "from arguments import parse_args\n\nif __name__ == '__main__':\n    parse_args()\n"
CI_SCRIPT = "import subprocess\n\nsubprocess.run(['python3', 'train.py', '--colocate', '--lora'])\n"
ARGUMENTS = '''import argparse

from helpers import checks


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--colocate", action="store_true")
    parser.add_argument("--lora", action="store_true")
    args = parser.parse_args()
    validate(args)
    return args


def validate(args):
    checks.check_parallelism(args)
'''
CHECKS = '''def check_parallelism(args):
    assert args.lora or not args.colocate, "colocate needs lora"
'''
NEW_ASSERT = CHECKS + '''    assert not (args.colocate and args.lora), "LoRA cannot run colocated"
'''
HELPER = "helpers/checks.py"
UNIMPORTED = "tools/report.py"


def policy_text(paths: list[str]) -> str:
    return yaml.safe_dump({
        "version": 1,
        "validation": {"paths": paths, "entry": "arguments:parse_args", "functions": ["arguments:validate"]},
        "matrix": {"sources": [{"kind": "record_launches", "scripts": ["tests/test_*.py"],
                                "entry": r"(^|/)train\.py$"}]},
        "harness": {"limits": {"suite_seconds": 20, "total_seconds": 120}}})


def build_tree(root: Path, changes: dict[str, str] | None = None) -> Path:
    files = {"arguments.py": ARGUMENTS, "helpers/__init__.py": "", HELPER: CHECKS,
             UNIMPORTED: "def main():\n    return 0\n", "train.py": TRAIN, "tests/test_lora.py": CI_SCRIPT,
             **(changes or {})}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    root.chmod(0o755)
    return root
