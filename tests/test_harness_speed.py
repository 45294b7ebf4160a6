"""What makes validation cheaper must not change what it finds: bytecode shared by the run's processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "app" / "sandbox" / "harness"


def _python(code: str, cwd: Path) -> str:
    """`code` in a fresh interpreter with the harness directory on its path, as validate.py runs (-B)."""
    done = subprocess.run([sys.executable, "-B", "-s", "-c", textwrap.dedent(code)], cwd=cwd, text=True,
                          capture_output=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(HARNESS)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_repository_module_compiled_once_is_read_back_by_the_next_import(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "mod.py").write_text("VALUE = 1\n")
    out = _python(f"""
        import importlib, os, sys
        import bytecache
        bytecache.install({str(repo)!r})
        sys.path.insert(0, {str(repo)!r})
        import pkg.mod
        print(pkg.mod.VALUE, type(pkg.mod.__loader__).__name__)
        source = {str(repo / "pkg" / "mod.py")!r}
        stat = os.stat(source)
        with open(source, "w") as handle:
            handle.write("VALUE = 2\\n")  # same size, and the same mtime below: only bytecode can say 1
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        del sys.modules["pkg.mod"]
        import pkg.mod
        print(pkg.mod.VALUE)
        scratch = bytecache._scratch
        print(sorted(name for _, _, names in os.walk(scratch) for name in names))
        bytecache.remove()
        print(os.path.exists(scratch))
    """, tmp_path)
    first, second, written, left = out.splitlines()
    assert first == "1 RepoSourceLoader"
    assert second == "1"  # the second import read what the first compiled
    assert written == f"['__init__.cpython-{sys.version_info.major}{sys.version_info.minor}.pyc', " \
                      f"'mod.cpython-{sys.version_info.major}{sys.version_info.minor}.pyc']"
    assert not any(p.name == "__pycache__" for p in repo.rglob("*"))  # nothing written beside the source
    assert left == "False"


def test_installed_modules_keep_their_own_loader_and_bytecode(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    out = _python(f"""
        import sys
        import bytecache
        bytecache.install({str(repo)!r})
        sys.path.insert(0, {str(repo)!r})
        import json.decoder, yaml
        print(type(yaml.__loader__).__name__, type(json.decoder.__loader__).__name__)
        bytecache.remove()
    """, tmp_path)
    assert out.split() == ["SourceFileLoader", "SourceFileLoader"]
