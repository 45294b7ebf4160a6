"""prtriage as users install it: a wheel built from a copy of the project's own files, and a fresh virtual
environment holding that wheel and its dependencies at the versions constraints.txt pins, nothing else."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a wheel is built from: the project's files, never what a developer's checkout has lying around.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", "tests",
                                    "benchmarks", ".mypy_cache", ".ruff_cache", ".pytest_cache", "*.db")


def pip(*args: str, timeout: float = 600) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True, timeout=timeout,
                   capture_output=True, text=True)


def build_wheel(root: Path) -> Path:
    """The project's wheel, built under ROOT from a copy of its files."""
    source = root / "source" / "prtriage"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCE)
    out = root / "wheel"
    pip("wheel", "--no-deps", "--wheel-dir", str(out), str(source))
    [built] = out.glob("prtriage-*.whl")
    return built


def plain_venv(wheel: Path, venv: Path) -> Path:
    """`pip install` of WHEEL into a new virtual environment VENV, as README says (constraints.txt pinning the
    dependencies); its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip("--python", str(python), "install", "-c", str(ROOT / "constraints.txt"), str(wheel))
    return python
