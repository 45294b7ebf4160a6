"""A repository whose CI scripts pass a file on CI's hosts (`--prompt-data /mnt/ci-data/...`) that its
validator checks exists, and a policy written without that host directory: blind as written, seen once a
refine round adds it (tests/test_twin_refined_check.py; the App's, tests/service/test_refined_triage.py)."""

from __future__ import annotations

from launch_twin import ARGPARSE_TRAIN, launch_policy

DATA = "/mnt/ci-data/prompts.jsonl"  # on CI's hosts; no policy below names /mnt/
HOST_TRAIN = ARGPARSE_TRAIN.replace(
    '    parser.add_argument("--lr", type=float, default=1e-4)\n',
    '    parser.add_argument("--lr", type=float, default=1e-4)\n'
    '    parser.add_argument("--prompt-data", default=None)\n').replace(
    "def validate(args):\n",
    "def validate(args):\n"
    "    if args.prompt_data is not None and not os.path.exists(args.prompt_data):\n"
    '        raise FileNotFoundError(f"--prompt-data {args.prompt_data} does not exist")\n').replace(
    "import argparse\n", "import argparse\nimport os\n").replace(
    "    return parser.parse_args()\n",
    "    args = parser.parse_args()\n    validate(args)\n    return args\n")
CI_SCRIPT = '''\
import subprocess

subprocess.run(["python3", "train.py", "--tp", "{tp}", "--world", "8", "--prompt-data", "{data}"], check=True)
'''
# A named validator, as the built-in policies have: run to the training boundary instead, a CI host's file
# is where training starts (accepted), and nothing is blind.
POLICY = launch_policy(comment="written before CI kept its prompts under /mnt/",
                       validation="validation:\n  paths: [train.py]\n  entry: train:parse_args\n"
                                  "  functions: [train:validate]\n")


def host_files() -> dict[str, str]:
    """The repository's files by path: train.py, and CI scripts launching it with --tp 2 and --tp 4."""
    scripts = {f"tests/test_tp{tp}.py": CI_SCRIPT.replace("{tp}", str(tp)).replace("{data}", DATA)
               for tp in (2, 4)}
    return {"train.py": HOST_TRAIN, **scripts}
