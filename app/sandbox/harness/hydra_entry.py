"""The validation entry of a Hydra application: compose its config with a suite's overrides, run its checks.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library,
and Hydra and OmegaConf from the interpreter (the repository's own dependencies, real packages). The entry
module is imported with `hydra.main` replaced by a decorator that only notes its arguments: the config
directory and name are the repository's, read from the place the application declares them, and the
decorated function never runs (it would start the training). A suite's argv is what Hydra's command line
takes: `--config-path`/`-cp`, `--config-name`/`-cn`, then overrides (`k=v`, `+k=v`,
`++k=v`, `~k`). Composing rejects what the running application would reject at start-up (a key the config
no longer has, a value of the wrong type); the checks are the repository's own start-up validation.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OPTIONS = {"--config-path": "config_path", "-cp": "config_path", "--config-name": "config_name",
           "-cn": "config_name"}
# `--config-dir` adds a search path before the primary config is loaded, which the compose API cannot do:
# a suite passing it is refused as not composable here, and so counts against the base's health.
UNSUPPORTED = ("--config-dir", "-cd")
RUN_OPTIONS = ("--multirun", "-m")  # a sweep: each job composes the same overrides, checked once here


class HydraEntryError(Exception):
    """The entry is no Hydra application this harness can compose."""


@dataclass
class Declared:
    """What `@hydra.main(...)` said, and the file of the function it decorated."""

    config_path: str | None
    config_name: str | None
    version_base: str | None
    source_file: str


class HydraUsageError(Exception):
    """A command line Hydra's own parser would refuse (an option it does not know, a missing value)."""


def make_entry(repo: str, target: str, hydra_policy: dict[str, Any],
               absent: Callable[[str], bool] = lambda target: False,
               drift: Callable[[str], None] = lambda note: None) -> Callable[[], None]:
    """The callable that validates `sys.argv` as `target`'s Hydra application would at start-up. A suite
    launched as another module of the repository (`python3 -m verl.experimental.transfer_queue.main_ppo`,
    `sys.argv[0]` the module's name or its file) is composed with that module's `@hydra.main` config, the
    decorated function of the same name. A check whose function (or one giving its arguments) is ABSENT at
    this revision, written after it or removed since, is left out and said to DRIFT: the config is still
    composed and the other checks run."""
    module_name, _, function = target.partition(":")
    declared = {module_name: declared_main(target)}
    checks = [_check(item) for item in hydra_policy.get("checks") or () if _present(item, absent, drift)]
    resolve = hydra_policy.get("resolve", True)

    def validate() -> None:
        launched = launched_module(repo, sys.argv[0]) or module_name
        if launched not in declared:
            declared[launched] = declared_main(f"{launched}:{function}")
        config = compose(declared[launched], sys.argv[1:])
        if resolve:
            from omegaconf import OmegaConf
            OmegaConf.resolve(config)
        for check in checks:
            check(config)

    validate.__qualname__ = f"hydra:{target}"
    return validate


def launched_module(repo: str, entry: str) -> str | None:
    """The module a suite launched: `python3 -m pkg.mod` (the entry word is the dotted name) or a file of the
    repository (`pkg/mod.py`); None for anything else (the policy's entry then stands)."""
    relative = os.path.relpath(entry, repo) if os.path.isabs(entry) else entry
    if relative.endswith(".py"):
        relative = relative[:-3].replace("/", ".")
    if relative.startswith(".") or "/" in relative:
        return None
    parts = relative.split(".")
    return relative if all(part.isidentifier() for part in parts) else None


def declared_main(target: str) -> Declared:
    """Import `module:function` with hydra.main noting its arguments; what it declared for `function`."""
    import hydra

    module_name, _, function = target.partition(":")
    noted: dict[str, Declared] = {}
    real_main = hydra.main

    def noting_main(config_path: str | None = None, config_name: str | None = None,
                    version_base: str | None = None) -> Callable[[Any], Any]:
        def decorate(task: Any) -> Any:
            code = getattr(task, "__code__", None)
            noted[getattr(task, "__qualname__", "")] = Declared(
                config_path, config_name, version_base, code.co_filename if code else "")
            return task
        return decorate

    hydra.main = noting_main
    try:
        importlib.import_module(module_name)
    finally:
        hydra.main = real_main
    if function not in noted:
        raise HydraEntryError(f"{target} is not decorated with @hydra.main")
    return noted[function]


def parse_command_line(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Hydra's options and the overrides, as its argparse-based parser splits them."""
    options: dict[str, str] = {}
    overrides: list[str] = []
    position = 0
    while position < len(words):
        word = words[position]
        name, equals, value = word.partition("=")
        if name in OPTIONS and equals:
            options[OPTIONS[name]] = value
        elif word in OPTIONS:
            if position + 1 >= len(words):
                raise HydraUsageError(f"argument {word}: expected one argument")
            position += 1
            options[OPTIONS[word]] = words[position]
        elif name in UNSUPPORTED:
            raise HydraEntryError(f"{name} is not supported by the harness's Hydra composition")
        elif word in RUN_OPTIONS:
            pass
        elif word.startswith("-"):
            raise HydraUsageError(f"unrecognized arguments: {word}")
        else:
            overrides.append(word)
        position += 1
    return options, overrides


def compose(declared: Declared, words: list[str]) -> Any:
    """The application's config as Hydra composes it for this command line."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    options, overrides = parse_command_line(words)
    config_path = options.get("config_path", declared.config_path)
    if config_path is None:
        raise HydraEntryError("the application declares no config_path")
    config_dir = os.path.normpath(os.path.join(os.path.dirname(declared.source_file), config_path))
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir, version_base=declared.version_base):
        return hydra_compose(config_name=options.get("config_name", declared.config_name),
                             overrides=overrides)


def _present(item: dict[str, Any], absent: Callable[[str], bool], drift: Callable[[str], None]) -> bool:
    function = item["function"]
    missing = [t for t in (function, *(item.get("kwargs_from") or {}).values()) if absent(t)]
    if missing:
        what = "none exists" if missing == [function] else f"{', '.join(missing)} does not exist"
        drift(f"validation.hydra.checks {function}: {what} at this revision; the check was left out")
    return not missing


def _check(item: dict[str, Any]) -> Callable[[Any], None]:
    function = item["function"]
    kwargs_from = dict(item.get("kwargs_from") or {})

    def check(config: Any) -> None:
        kwargs = {name: _resolve(target)(config) for name, target in kwargs_from.items()}
        _resolve(function)(config, **kwargs)

    return check


def _resolve(target: str) -> Any:
    """`package.module:attr.attr`, looked up at each call: record mode rewrites module functions in place."""
    module_name, _, attributes = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    for name in attributes.split("."):
        owner = getattr(owner, name)
    return owner
