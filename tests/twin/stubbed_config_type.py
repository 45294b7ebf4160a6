"""A torchtitan-shaped twin whose tyro config types a field with an absent package the tree pins.

pytorch/torchtitan from a plain install: `prtriage init` made tyro real (the configuration stack) but left
grain stubbed, and every suite failed at `tyro.cli()`: "Could not create CLI parser from the provided type.
• Type typing.Tuple[typing.Any, ...] with struct-type values requires a default value" (its data loader's
config has `read_options: Annotated[grain.ReadOptions, tyro.conf.Suppress] = field(default_factory=
grain.ReadOptions)`, and pyproject.toml asks for `grain==0.2.18`). Here the package is `prtriage-twin-grain`,
a wheel the test writes: pip installs it from a local directory, as CI installs grain from PyPI.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

DISTRIBUTION = "prtriage-twin-grain"
MODULE = "prtriage_twin_grain"
VERSION = "1.0"
# the package as CI has it: a plain dataclass tyro builds its parser from
PACKAGE_SOURCE = textwrap.dedent("""\
    from dataclasses import dataclass


    @dataclass
    class ReadOptions:
        num_threads: int = 16
        prefetch_buffer_size: int = 500
    """)
MANAGER = "kestrel/config/manager.py"
LOADER = "kestrel/data/loader.py"

FILES = {
    "kestrel/__init__.py": "",
    "kestrel/config/__init__.py": "",
    MANAGER: """\
        import sys
        from dataclasses import dataclass, field

        import tyro

        from kestrel.data.loader import LoaderConfig


        @dataclass
        class Job:
            module: str = "llama"
            config: str = "debugmodel"
            dump_folder: str = "./outputs"
            loader: LoaderConfig = field(default_factory=LoaderConfig)


        class ConfigManager:
            def parse_args(self, args=None):
                args = sys.argv[1:] if args is None else args
                return tyro.cli(Job, args=args)
        """,
    "kestrel/data/__init__.py": "",
    LOADER: f"""\
        from dataclasses import dataclass, field
        from typing import Annotated

        import tyro

        import {MODULE} as grain


        @dataclass(kw_only=True)
        class LoaderConfig:
            seed: int = 42
            read_options: Annotated[grain.ReadOptions, tyro.conf.Suppress] = field(
                default_factory=grain.ReadOptions
            )
        """,
    "kestrel/train.py": "from kestrel.config.manager import ConfigManager\n\nConfigManager().parse_args()\n",
    "run_train.sh": """\
        MODULE=${MODULE:-"llama"}
        CONFIG=${CONFIG:-"debugmodel"}
        torchrun --nproc_per_node=8 -m kestrel.train --module ${MODULE} --config ${CONFIG} "$@"
        """,
    "tests/__init__.py": "",
    "tests/integration_tests/__init__.py": """\
        from dataclasses import dataclass


        @dataclass
        class OverrideDefinitions:
            override_args: tuple = ()
            test_name: str = "default"
            disabled: bool = False
            configs: tuple = ()
        """,
    "tests/integration_tests/features.py": """\
        from tests.integration_tests import OverrideDefinitions


        def build_features_test_list():
            return [
                OverrideDefinitions([["--loader.seed 7"]], test_name="seed"),
                OverrideDefinitions([["--dump_folder ./elsewhere"]], test_name="dump"),
            ]
        """,
    "tests/integration_tests/run_tests.py": """\
        def command(fn, output_dir, test_name):
            dump_folder_arg = f"--dump_folder {output_dir}/{test_name}"
            return f"MODULE={fn.__module__} CONFIG={fn.__name__} ./run_train.sh " + dump_folder_arg
        """,
    ".github/workflows/features.yaml": """\
        jobs:
          test:
            steps:
              - run: python -m tests.integration_tests.run_tests $RUNNER_TEMP/out --ngpu 8
        """,
    "pyproject.toml": f"""\
        [project]
        name = "kestrel"
        dependencies = ["{DISTRIBUTION}=={VERSION}", "tyro"]
        """,
}


def build_stubbed_config_twin(root: Path) -> Path:
    for relative, text in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root
