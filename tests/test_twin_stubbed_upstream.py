"""Options of a stubbed upstream parser read by the repository's validation, through real `prtriage check`.

radixark/miles from 2026-03 on: `validate_args` sets `args.sglang_dp_size = args.sglang_data_parallel_size`
and compares it (`if args.sglang_dp_size > 1`). SGLang's `ServerArgs.add_cli_args(parser)` defines that
option; SGLang is absent here (stubbed), so no parser defined it, the harness learned None and every base
suite failed with a TypeError: the analysis was blind on every commit of those months. Where a stubbed or
replaced upstream parser parsed, such an option gets the neutral value of its name's shape, listed in the
health as assumed; where every parser ran for real, reading an option none defines still blocks.

volcengine/verl from 2025-09-26 to 2025-10-21: a star import of a stubbed upstream module gave nothing, and
the importer's subclass of one of its classes failed with a NameError on every suite.
"""

from __future__ import annotations

from pathlib import Path

from harness_twin import line_of
from launch_twin import (
    NEW_ASSERT,
    REFUSED,
    base_repo,
    check,
    ci_scripts,
    launch_policy,
    one_blocking_rejection,
    pull_request,
)

SGLANG_TRAIN = '''\
import argparse

import torch.distributed as dist
from sglang.srt.server_args import ServerArgs


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--world", type=int, default=8)
    ServerArgs.add_cli_args(parser)  # SGLang's own options
    return parser.parse_args()


def validate(args):
    args.sglang_dp_size = args.sglang_data_parallel_size
    if args.sglang_dp_size > 1:
        assert args.sglang_enable_dp_attention, "dp > 1 needs dp attention"
    assert args.world % args.tp == 0, "world size must divide by tp"


def main():
    args = parse_args()
    validate(args)
    dist.init_process_group(backend="nccl")


if __name__ == "__main__":
    main()
'''
SGLANG_LINES = ("from sglang.srt.server_args import ServerArgs\n",
                "    ServerArgs.add_cli_args(parser)  # SGLang's own options\n",
                "    args.sglang_dp_size = args.sglang_data_parallel_size\n",
                "    if args.sglang_dp_size > 1:\n",
                '        assert args.sglang_enable_dp_attention, "dp > 1 needs dp attention"\n')
PLAIN_TRAIN = SGLANG_TRAIN
for _line in SGLANG_LINES:
    assert _line in PLAIN_TRAIN
    PLAIN_TRAIN = PLAIN_TRAIN.replace(_line, "")  # every parser real: argparse's alone
POLICY = launch_policy(stub_modules="torch, sglang")


def sglang_pull_request(tmp_path: Path, train: str, added: str) -> Path:
    """A repository whose `main` launches TRAIN with --tp 2 and --tp 4, and a branch `pr` adding ADDED
    after the validator's last assert."""
    repo = base_repo(tmp_path, {"train.py": train, **ci_scripts()})
    pull_request(repo, "train.py", added)
    return repo


def test_an_option_a_stubbed_upstream_parser_defines_is_assumed_and_the_analysis_sees(tmp_path: Path) -> None:
    repo = sglang_pull_request(tmp_path, SGLANG_TRAIN, NEW_ASSERT)
    # before: both base suites failed with "'>' not supported between 'NoneType' and 'int'", blind (exit 3);
    # now the real change is caught, at its line, for the one suite it rejects
    report, finding = one_blocking_rejection(check(tmp_path, repo, POLICY))
    health = report["health"]
    assert health["base"] == {"accepted": 2, "rejected": 0, "error": 0, "accepted_share": 1.0}
    assert health["assumed"] == [
        {"name": "sglang_data_parallel_size", "value": 1, "base_suites": 2, "head_suites": 2}]
    assert health["assumed_rejections"] == []  # the refusal of tp 4 reads no assumed option
    assert (finding["path"], finding["line"]) == ("train.py", line_of(repo, "train.py", "assert args.tp < 4"))
    # and the assumption is said in the text report too
    assert ("assumed 1 option a stubbed or replaced upstream parser may define (no parser here does; neutral "
            "by name): sglang_data_parallel_size=1") in check(tmp_path, repo, POLICY, form="text").stdout


def test_reading_an_option_no_parser_defines_still_blocks_where_every_parser_ran(tmp_path: Path) -> None:
    added = "    args.tp_per_stage = args.tp // (args.pipeline_size or 1)\n"  # AttributeError on CI
    repo = sglang_pull_request(tmp_path, PLAIN_TRAIN, added)
    run = check(tmp_path, repo, POLICY)
    assert run.returncode == 1, run.describe()
    report = run.json()
    health = report["health"]
    assert health["assumed"] == [] and health["stubbed_parser_reads"] == []
    blocking = {f["message"]: f for f in report["findings"] if f["severity"] == "blocking"}
    finding = blocking["reads args.pipeline_size, which no parser defines"]
    assert finding["suites"] == ["tests/test_tp2.py", "tests/test_tp4.py"]
    assert (finding["path"], finding["line"]) == (
        "train.py", line_of(repo, "train.py", "args.tp_per_stage = "))


def test_a_rejection_decided_by_an_assumed_value_is_blindness_not_a_finding(tmp_path: Path) -> None:
    # miles-like: new validation compares an SGLang option no parser here defines; the harness assumed 1
    added = '    assert args.sglang_data_parallel_size > 1 or args.tp < 4, "tp 4 needs sglang dp"\n'
    repo = sglang_pull_request(tmp_path, SGLANG_TRAIN, added)
    run = check(tmp_path, repo, POLICY)
    # CI's SGLang may well default it otherwise: a warning saying why, nothing blocks
    assert run.returncode == 0, run.describe()
    report = run.json()
    health = report["health"]
    assert health["could_analyse"] is True, health["reason"]
    assert health["assumed_rejections"] == ["tests/test_tp4.py"]
    assert [f for f in report["findings"] if f["severity"] == "blocking"] == []
    [finding] = [f for f in report["findings"] if f["kind"] == "new_rejection"]
    assert (finding["severity"], finding["suites"]) == ("warning", REFUSED)
    assert (finding["path"], finding["line"]) == (
        "train.py", line_of(repo, "train.py", "tp 4 needs sglang dp"))
    assert finding["message"] == (
        "AssertionError: tp 4 needs sglang dp (rests on the value the harness assumed for "
        "args.sglang_data_parallel_size, which a stubbed or replaced upstream parser may define: the "
        "harness's blindness, not blocking)")
    text = check(tmp_path, repo, POLICY, form="text").stdout
    assert "sglang_data_parallel_size=1; 1 head rejection rests on them: not blocking" in text


def test_an_assumed_option_read_in_the_message_alone_leaves_the_rejection_blocking(tmp_path: Path) -> None:
    added = ('    assert args.tp < 4, '
             'f"tp 4 is not supported with sglang dp {args.sglang_data_parallel_size}"\n')
    repo = sglang_pull_request(tmp_path, SGLANG_TRAIN, added)
    report, finding = one_blocking_rejection(check(tmp_path, repo, POLICY))
    assert report["health"]["assumed_rejections"] == []
    assert finding["message"] == "AssertionError: tp 4 is not supported with sglang dp 1"


STAR_MODEL = '''\
from megatron.core.transformer.attention import *


class VisionSelfAttention(SelfAttention):
    def forward(self, hidden: Tensor, mask: Optional[Tensor] = None):
        return apply_rotary_pos_emb(hidden)
'''


def test_a_star_import_of_a_stubbed_upstream_module_gives_what_the_module_reads(tmp_path: Path) -> None:
    # volcengine/verl from 2025-09-26 to 2025-10-21: the entry's import reached a model module doing
    # `from megatron.core.transformer.attention import *` then `class ...(SelfAttention)`; the star import
    # took nothing from the stub, every base suite failed "NameError: name 'SelfAttention' is not defined"
    # and the analysis was blind (exit 3) on every commit of those weeks
    train = PLAIN_TRAIN.replace("import torch.distributed as dist\n",
                                "import torch.distributed as dist\nimport model  # noqa: F401\n")
    repo = base_repo(tmp_path, {"train.py": train, "model.py": STAR_MODEL, **ci_scripts()})
    pull_request(repo, "train.py", NEW_ASSERT)
    run = check(tmp_path, repo, launch_policy(stub_modules="torch, megatron"))
    report, finding = one_blocking_rejection(run)
    assert report["health"]["base"] == {"accepted": 2, "rejected": 0, "error": 0, "accepted_share": 1.0}
    assert (finding["path"], finding["line"]) == ("train.py", line_of(repo, "train.py", "assert args.tp < 4"))
