"""The house's import rules, read from the source: analysis/ is pure (no GitHub, no store, no web, no
queue), PyGithub lives only in github/, and the sandbox harness, which runs inside bubblewrap against
repository code, imports nothing of the app but itself."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"


def _module(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[str]:
    """Every module PATH imports, anywhere in it (inside functions too), as an absolute name."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _violations(where: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((APP / where).rglob("*.py")):
        for name in _imports(path):
            if any(name == bad or name.startswith(bad + ".") for bad in forbidden):
                found.append(f"{path.relative_to(APP.parent)} imports {name}")
    return sorted(set(found))


def test_analysis_is_pure() -> None:
    forbidden = ("app.github", "app.store", "app.dashboard", "app.webhooks", "app.demo.localgithub",
                 "fastapi", "starlette", "sqlalchemy", "huey", "github", "httpx", "requests")
    assert _violations("analysis", forbidden) == []


def test_pygithub_lives_only_in_github() -> None:
    outside = [line for line in _violations(".", ("github",)) if not line.startswith("app/github/")]
    assert outside == []


def test_the_harness_imports_nothing_of_the_app_but_itself() -> None:
    leaks = [line for line in _violations("sandbox/harness", ("app",))
             if not line.split(" imports ")[1].startswith("app.sandbox.harness")]
    assert leaks == []


def test_the_rules_see_imports() -> None:
    # the reader itself: a module known to import the store is seen doing so
    assert any(name.startswith("app.store") for name in _imports(APP / "processes" / "recovery.py"))
