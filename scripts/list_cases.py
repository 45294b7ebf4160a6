"""What a policy's host-listed sources (yaml_args recipes) list at one revision of a git repository, by kind:
suites, cases disabled (scopes CI does not run) and not considered (scopes the policy leaves out), with the
scopes of each. Reads the repository through git alone (a bare mirror will do); runs nothing of it.

    python scripts/list_cases.py --git-dir /work/.mirror/NVIDIA+Megatron-LM/repo \
        --policy policies/NVIDIA/Megatron-LM.yml [--rev HEAD]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
from pathlib import Path

from app.analysis.core.policy import load_policy
from app.analysis.sources.recipes import list_cases
from app.analysis.sources.yaml_args_keys import YamlArgs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("--policy", required=True, type=Path)
    parser.add_argument("--rev", default="HEAD")
    options = parser.parse_args()
    git = ["git", f"--git-dir={options.git_dir}"]
    listed = subprocess.run([*git, "ls-tree", "-r", "--name-only", options.rev], capture_output=True,
                            text=True, check=True).stdout
    paths = [path for path in listed.split("\n") if path]

    def read(path: str) -> str:
        return subprocess.run([*git, "show", f"{options.rev}:{path}"], capture_output=True, text=True,
                              check=True).stdout

    for index, source in enumerate(load_policy(options.policy).matrix.sources):
        if not isinstance(source, YamlArgs):
            continue
        listing = list_cases(source, paths, read)
        print(f"matrix.sources[{index}]: {len(listing.suites)} suites, {len(listing.disabled)} cases "
              f"disabled {_scopes(listing.disabled)}, {len(listing.not_considered)} not considered "
              f"{_scopes(listing.not_considered)}")


def _scopes(labels: list[str]) -> dict[str, int]:
    """'gpt/x (scope mr-broken)' labels counted by scope."""
    return dict(collections.Counter(label.rsplit("(scope ", 1)[-1].rstrip(")") for label in labels))


if __name__ == "__main__":
    main()
