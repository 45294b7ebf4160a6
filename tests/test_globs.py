"""Path globs mean one thing everywhere: the policy's repository globs and the harness's fixture paths, one
translation (app/sandbox/harness/globs.py) imported by both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.analysis.core.policy import glob_regex, path_matches
from app.sandbox.harness import globs

HARNESS = Path(__file__).resolve().parents[1] / "app" / "sandbox" / "harness"

CASES = [
    ("tests/e2e/**/test_*.py", "tests/e2e/megatron/test_glm5.py", True),
    ("tests/e2e/**/test_*.py", "tests/e2e/test_top.py", True),
    ("tests/e2e/**/test_*.py", "tests/e2e/a/b/c/test_deep.py", True),
    # The real miles tree: `*` crossed a `/` and the glob took a helper module for a CI script.
    ("tests/e2e/**/test_*.py", "tests/e2e/megatron/test_glm47_flash/_common.py", False),
    ("tests/e2e/**/test_*.py", "tests/e2e/megatron/test_glm47_flash/test_r3_mtp.py", True),
    ("miles/utils/**/*args*.py", "miles/utils/train_args.py", True),
    ("miles/utils/**/*args*.py", "miles/utils/x/y/parse_args.py", True),
    ("miles/*.py", "miles/utils/arguments.py", False),
    ("train?.py", "train1.py", True),
    ("train?.py", "train/.py", False),
    ("train[_-]async.py", "train_async.py", True),
    ("train[!_]async.py", "train_async.py", False),
    ("/root/models/*/config.json", "/root/models/Qwen3-4B/config.json", True),
    ("/root/models/*/config.json", "/root/models/a/b/config.json", False),
    ("/root/**", "/root/a/b", True),
    ("a.b", "axb", False),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), CASES)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert path_matches(path, pattern) is expected
    assert (globs.glob_regex(pattern).match(path) is not None) is expected


def test_the_harness_imports_the_one_translation_without_the_app() -> None:
    # as inside the sandbox: the harness directory on sys.path, and no `app` to import
    probe = (f"import sys; sys.path.insert(0, {str(HARNESS)!r}); sys.modules['app'] = None; "
             "import vpaths, globs; assert vpaths.glob_regex is globs.glob_regex; "
             "print(vpaths.glob_regex('a/**/b').pattern)")
    done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == glob_regex("a/**/b").pattern
