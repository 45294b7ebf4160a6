"""A base revision's validation results, kept for the next check of the same job.

Pull requests of one repository are checked against the same base, again and again (each push to a pull
request, every pull request opened on the same main): the base's validation is the same computation each
time, as long as everything it reads is the same. The key is all of it: the tree's content, the whole
policy, every suite (id, argv, environment, entry), the harness's own files and the analysis environment's
digest (its Python and every package installed in it). Two checks share an entry only when their base
validation would be the same job: a pull request's suites are part of the key, so no pull request reaches
another's entry with suites of its own. The head is never cached (its lines are traced, and it is what
changes).

Beside the results, the repository modules the base's validation imported (the validation paths learned
at that base) are kept under a key of the tree, the policy and the harness alone: a later check reads
them before it knows its suites, to decide whether a change touches validation code at all.

Only a run that was sandboxed and gave every suite an answer (accepted or rejected) is kept: an `error`
(a time limit on a loaded machine, a sandbox that died) is not carried into the next check.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from app.analysis.core.model import MAX_LEARNED, Suite, SuiteResult, checked_imports
from app.analysis.core.policy import Policy
from app.sandbox.interpreter import Interpreter
from app.trees.treehash import fingerprints, tree_digest

log = logging.getLogger(__name__)

HARNESS_DIR = Path(__file__).resolve().parents[1] / "sandbox" / "harness"
MAX_ENTRIES = 64  # per cache dir: a base per open pull request's base, and a few policies


def validation_key(tree: Path, policy: Policy, suites: tuple[Suite, ...], interpreter: Interpreter) -> str:
    """What the base's validation reads, hashed: the analysis environment by its digest (its Python and
    every package installed in it)."""
    document = {
        "tree": tree_digest(fingerprints(tree)),
        "policy": policy.model_dump(mode="json", by_alias=True),
        "suites": [s.to_json() for s in suites],
        "harness": _harness_digest(),
        "environment": interpreter.digest,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def lookup(cache_dir: Path, key: str, suites: tuple[Suite, ...]) -> dict[str, SuiteResult] | None:
    """The results stored under KEY, one per suite, or None."""
    path = _path(cache_dir, key)
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        if entry.get("key") != key:
            return None
        results = {r.suite_id: r for r in (SuiteResult.from_json(raw) for raw in entry["results"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if set(results) != {s.id for s in suites}:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: kept when the directory is trimmed or pruned
    return results


def store(cache_dir: Path, key: str, results: dict[str, SuiteResult], *, sandboxed: bool) -> bool:
    """Keep RESULTS under KEY when they are worth keeping; whether they were stored."""
    if not sandboxed or any(r.outcome.outcome == "error" for r in results.values()):
        return False
    return _write(cache_dir / "validation", _path(cache_dir, key),
                  {"key": key, "results": [r.to_json() for r in results.values()]})


def _write(directory: Path, path: Path, entry: dict[str, object]) -> bool:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=directory, prefix=".tmp-", suffix=".json",
                                         delete=False, encoding="utf-8") as handle:
            handle.write(json.dumps(entry))
        os.replace(handle.name, path)
        _trim(directory)
    except OSError as exc:  # a cache that cannot be written only costs time
        log.warning("could not store the base's validation in %s: %s", directory, exc)
        return False
    return True


def learned_key(base_digest: str, policy: Policy) -> str:
    """What decides which modules the base's validation imports, hashed (without the suites: the
    decision is taken before they are captured); BASE_DIGEST is the base tree's `tree_digest`."""
    document = {"tree": base_digest, "harness": _harness_digest(),
                "policy": policy.model_dump(mode="json", by_alias=True)}
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def lookup_learned(cache_dir: Path, key: str) -> frozenset[str] | None:
    """The modules the validation imported at the base stored under KEY; None when none were learned."""
    try:
        entry = json.loads(_learned_path(cache_dir, key).read_text(encoding="utf-8"))
        if entry.get("key") != key:
            return None
        return frozenset(checked_imports(entry["imported"], MAX_LEARNED))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store_learned(cache_dir: Path, key: str, paths: frozenset[str], *, sandboxed: bool) -> bool:
    """Keep the learned PATHS of a sandboxed run under KEY; whether they were stored."""
    if not sandboxed:
        return False
    return _write(cache_dir / "learned", _learned_path(cache_dir, key),
                  {"key": key, "imported": sorted(paths)})


def learned_from(results: dict[str, SuiteResult], max_failures: float) -> frozenset[str] | None:
    """Every module some suite's validation imported; None when no suite got an answer (an error tells
    nothing of what validation would import) or when there are more than MAX_LEARNED (a set cut short would
    call a change to the rest untouched).

    None too when more than MAX_FAILURES (the policy's `health.max_base_failures`) of the suites fail: such a
    base is blind, and what its suites imported before they failed does not stand for what CI's import. On
    slime's revisions of late 2025 every Megatron suite stopped at one import (a stubbed torch's constant
    negated): learned from them, changes to the modules after it came out "untouched", nothing run."""
    answered = [r for r in results.values() if r.outcome.outcome != "error"]
    failed = sum(1 for r in results.values() if r.outcome.outcome != "accepted")
    if not answered or failed > max_failures * len(results):
        return None
    learned = frozenset(path for result in answered for path in result.imported)
    return learned if len(learned) <= MAX_LEARNED else None


def _learned_path(cache_dir: Path, key: str) -> Path:
    return cache_dir / "learned" / f"{key[:32]}.json"


def _path(cache_dir: Path, key: str) -> Path:
    return cache_dir / "validation" / f"{key[:32]}.json"


def _trim(directory: Path) -> None:
    entries = sorted(directory.glob("[!.]*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for stale in entries[MAX_ENTRIES:]:
        stale.unlink(missing_ok=True)


def _harness_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(HARNESS_DIR.iterdir()):
        if path.suffix in (".py", ".sh") and path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
