"""A plain stand-in harness for checking the twin itself: run as `python -B standin.py JOB.json`.

Independent of prtriage's harness on purpose, so that a disagreement between the two points at one of them:
its own stubs for missing modules, its own argparse stand-in for Megatron's parse_args, the policy's
fixtures served by a patched `open`. No sandbox: it only ever runs the generator's own output. Prints one
JSON document on stdout.
"""

from __future__ import annotations

import argparse
import builtins
import fnmatch
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import json
import os
import pathlib
import runpy
import sys
import time
import traceback
import types
from collections.abc import Callable, Sequence
from typing import Any

_real_open = builtins.open
_real_exists = os.path.exists
_real_path_exists = pathlib.Path.exists
_learned: dict[str, Any] = {}


class Stub:
    """Answers every attribute and call; used as a decorator it returns what it decorates."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return Stub(f"{self._name}()")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)


class StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = Stub(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, missing: set[str]) -> None:
        self.missing = missing

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] in self.missing:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install(job: dict[str, Any]) -> None:
    missing = {name for name in job["stub"] if importlib.util.find_spec(name) is None}
    sys.meta_path.append(StubFinder(missing))
    fixtures = job["fixtures"]
    prefixes = tuple(job["existing_prefixes"])

    def fixture(path: Any) -> str | None:
        text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
        if text is None or _real_exists(text):
            return None
        return next((content for pattern, content in fixtures if fnmatch.fnmatchcase(text, pattern)), None)

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        served = fixture(file) if "r" in mode else None
        if served is not None:
            return io.StringIO(served)
        return _real_open(file, mode, *args, **kwargs)

    def exists(path: Any) -> bool:
        text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else ""
        return _real_exists(path) or str(text).startswith(prefixes) or fixture(path) is not None

    builtins.open = fake_open
    os.path.exists = exists
    pathlib.Path.exists = lambda self, **kw: exists(self)  # type: ignore[method-assign]
    time.sleep = lambda seconds: None
    megatron_arguments = importlib.import_module("megatron.training.arguments")
    megatron_arguments.parse_args = _megatron_stand_in(job["attribute_defaults"])  # type: ignore[attr-defined]
    transformers = importlib.import_module("transformers")
    config = types.SimpleNamespace(**job["hf_config"])
    transformers.AutoConfig = types.SimpleNamespace(  # type: ignore[attr-defined]
        from_pretrained=lambda *args, **kwargs: config
    )
    argparse.Namespace.__getattr__ = _namespace_miss  # type: ignore[method-assign]


def _namespace_miss(self: argparse.Namespace, name: str) -> Any:
    if name in _learned and sys._getframe(1).f_code.co_filename != argparse.__file__:
        return _learned[name]
    raise AttributeError(name, name=name, obj=self)


def _megatron_stand_in(defaults: dict[str, Any]) -> Callable[..., argparse.Namespace]:
    def parse_args(extra_args_provider: Any = None, ignore_unknown_args: bool = False) -> argparse.Namespace:
        parser = argparse.ArgumentParser(allow_abbrev=False)
        if extra_args_provider is not None:
            parser = extra_args_provider(parser) or parser
        namespace, unknown = parser.parse_known_args(sys.argv[1:])
        flag: str | None = None
        values: list[str] = []
        for word in [*unknown, "--"]:
            if word.startswith("--"):
                if flag is not None:
                    coerced = [_coerce(v) for v in values]
                    setattr(
                        namespace,
                        flag[2:].replace("-", "_"),
                        coerced[0] if len(coerced) == 1 else coerced or True,
                    )
                flag, values = word, []
            else:
                values.append(word)
        for name, value in defaults.items():
            if not hasattr(namespace, name):
                setattr(namespace, name, value)
        return namespace

    return parse_args


def _coerce(value: str) -> Any:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def in_child(work: Callable[[], Any]) -> Any:
    """Run `work` in a forked child and return its JSON-able result (or the child's error)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            result = {"ok": work()}
        except BaseException:
            result = {"error": traceback.format_exc(limit=-3)}
        with os.fdopen(write_fd, "w") as pipe:
            json.dump(result, pipe, default=str)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data) if data else {"error": "child died"}


def run_script(repo: str, script: str) -> Any:
    command_utils = importlib.import_module("miles.utils.external_utils.command_utils")
    ci_register = importlib.import_module("tests.ci.ci_register")

    launches: list[dict[str, Any]] = []

    def execute_train(
        train_args: str,
        num_gpus_per_node: int,
        megatron_model_type: str | None,
        train_script: str = "train.py",
        before_ray_job_submit: Any = None,
        extra_env_vars: dict[str, str] | None = None,
    ) -> None:
        launches.append(
            {
                "train_args": train_args,
                "model_type": megatron_model_type,
                "train_script": train_script,
                "extra_env": extra_env_vars or {},
            }
        )

    setattr(command_utils, "execute_train", execute_train)  # noqa: B010  (a module mypy cannot see)
    setattr(command_utils, "exec_command", _no_command)  # noqa: B010
    sys.argv = [script]
    try:
        runpy.run_path(os.path.join(repo, script), run_name="__main__")
    except SystemExit as exc:  # typer apps exit 0 when done
        if exc.code not in (0, None):
            raise
    return {"launches": launches, "registration": ci_register.REGISTRY}


def _no_command(cmd: str, capture_output: bool = False) -> str | None:
    """exec_command with nothing run: `wc -l` of nothing, when the caller reads the output."""
    return "0\n" if capture_output else None


def validate_suite(suite: dict[str, Any]) -> Any:
    parse_args = importlib.import_module("miles.utils.arguments").parse_args
    entry, argv, env = suite["entry"], suite["argv"], suite["env"]

    os.environ.update(env)
    sys.argv = [entry, *argv]
    for _ in range(50):
        try:
            parse_args()
            return {"outcome": "accepted"}
        except AttributeError as exc:
            if isinstance(exc.obj, argparse.Namespace) and exc.name and exc.name not in _learned:
                _learned[exc.name] = None
                continue
            return _rejected(exc)
        except (Exception, SystemExit) as exc:
            return _rejected(exc)
    return {"outcome": "error", "message": "learning did not converge"}


def _rejected(exc: BaseException) -> dict[str, Any]:
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename.endswith("miles/utils/arguments.py"):
            line = lineno
    return {"outcome": "rejected", "exception": type(exc).__name__, "message": str(exc)[:300], "line": line}


def main() -> None:
    with _real_open(sys.argv[1]) as handle:
        job = json.load(handle)
    repo = job["repo"]
    os.chdir(repo)
    sys.path.insert(0, repo)
    install(job)
    if job["mode"] == "scripts":
        importlib.import_module("miles.utils.external_utils.command_utils")  # once, before the forks
        results = {script: in_child(functools.partial(run_script, repo, script)) for script in job["scripts"]}
        print(json.dumps(results))
        return
    start = time.perf_counter()
    importlib.import_module("miles.utils.arguments")

    import_seconds = time.perf_counter() - start
    outcomes = {suite["id"]: in_child(functools.partial(validate_suite, suite)) for suite in job["suites"]}
    print(json.dumps({"import_seconds": import_seconds, "outcomes": outcomes}))


if __name__ == "__main__":
    main()
