"""Validation reached through the suite's entry script: the script runs as `__main__`, as CI starts it, and
the run stops where the validation entry returns.

For repositories whose entry scripts each pass their own extra-args provider and defaults to one shared
validator (Megatron-LM: `pretrain_gpt.py`, `examples/inference/.../gpt_dynamic_inference.py` all call
`parse_and_validate_args(extra_args_provider=..., args_defaults=...)`): calling the validator directly
would miss the script's flags. Runs INSIDE the sandbox: the standard library only.
"""

from __future__ import annotations

import importlib
import io
import os
import runpy
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import boundary
else:
    import boundary

_compiled: dict[str, types.CodeType] = {}  # script path -> its code: compiled once by the leader, inherited


class EntryReturned(BaseException):
    """The validation entry returned: the suite is accepted and the rest of the script (training) never
    runs. A BaseException: the script's own `except Exception` does not swallow it."""


class EntryNotCalled(Exception):
    """The entry script ended without calling the validation entry."""


def through_script(module: Any, name: str, target: str) -> Callable[[], None]:
    """Wrap `module.name` so that its return ends the run, and return what runs the suite's script.

    The script imports the entry by name at its top (`from m import parse_and_validate_args`), which it
    re-executes on every run: it binds the wrapper."""
    validator = getattr(module, name)

    def stop_after(*args: Any, **kwargs: Any) -> Any:
        validator(*args, **kwargs)
        raise EntryReturned()

    stop_after.__name__ = stop_after.__qualname__ = name
    setattr(module, name, stop_after)

    def run_script() -> None:
        script = sys.argv[0]
        sys.path.insert(0, os.path.dirname(script))  # as `python script.py` puts the script's directory
        try:
            _run(script, "__main__")
        except EntryReturned:
            return
        finally:
            _leave_path(os.path.dirname(script))
        raise EntryNotCalled(f"{os.path.basename(script)} ended without calling {target}")

    return run_script


def launch(repo: str) -> Callable[[], None]:
    """What runs a suite's own launch, to its end or to a training boundary: the entry script
    (`sys.argv[0]`) as `__main__`, or, when no such file exists, the module its repo-relative name is
    (`verl.trainer.main_ppo`, launched as `python -m`). A `sys.exit(0)` on the way ends it cleanly."""

    def run_launch() -> None:
        script = sys.argv[0]
        try:
            if os.path.isfile(script):
                _run_with_path(script, "__main__")
            else:
                runpy.run_module(_module_name(repo, script), run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise

    return run_launch


def _module_name(repo: str, target: str) -> str:
    return os.path.relpath(target, repo).removesuffix(".py").replace("/", ".")


def _run_with_path(script: str, name: str) -> None:
    sys.path.insert(0, os.path.dirname(script))  # as `python script.py` puts the script's directory
    try:
        _run(script, name)
    finally:
        _leave_path(os.path.dirname(script))


def prime_launches(repo: str, entries: set[str]) -> None:
    """`prime` for launches: a script's top, or a module's import (its `__main__` block does not run)."""
    for entry in sorted(e for e in entries if e):
        target = os.path.join(repo, entry)
        try:
            if os.path.isfile(target):
                _run_with_path(target, "__prtriage_prime__")
            else:
                importlib.import_module(_module_name(repo, target))
        except (Exception, SystemExit, boundary.TrainingBoundary):
            continue


def prime(repo: str, entries: set[str]) -> None:
    """Run each entry script's top (its imports and definitions, not its `__main__` block) once in the
    leader, so that every warm leader forked from it inherits the imports. A script that fails here fails
    again in its suites, which report it."""
    for entry in sorted(e for e in entries if e):
        script = os.path.join(repo, entry)
        sys.path.insert(0, os.path.dirname(script))
        try:
            _run(script, "__prtriage_prime__")
        except (Exception, SystemExit):
            continue
        finally:
            _leave_path(os.path.dirname(script))


def _leave_path(directory: str) -> None:
    """Take the script's directory off sys.path again, unless the script did so itself (NeMo RL's
    run_grpo_single_controller.py drops examples/ so that a directory there is no namespace package)."""
    if directory in sys.path:
        sys.path.remove(directory)


def _run(script: str, name: str) -> None:
    """`runpy.run_path(script, run_name=name)` for a source file, its code compiled once per run: each
    suite would otherwise compile its entry script again (Megatron-LM's pretrain_gpt.py: some 5 ms, 570
    times a check). As runpy does: a fresh module under `name` for the run, `__file__` and argv[0] the
    script."""
    code = _compiled.get(script)
    if code is None:
        with io.open_code(script) as handle:
            source = handle.read()
        # dont_inherit: this module's own `from __future__` flags are no part of the script
        code = _compiled[script] = compile(source, script, "exec", dont_inherit=True)
    module = types.ModuleType(name)
    module.__dict__.update(__file__=script, __cached__=None, __loader__=None, __package__="", __spec__=None)
    previous, argv0 = sys.modules.get(name), sys.argv[0]
    sys.modules[name], sys.argv[0] = module, script
    try:
        exec(code, module.__dict__)
    finally:
        sys.argv[0] = argv0
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
