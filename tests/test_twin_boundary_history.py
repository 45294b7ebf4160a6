"""Launches run to their training boundary at revisions older than a policy's validator (NVIDIA/Megatron-LM
before `parse_and_validate_args`, 2025-11 to 2026-04): each entry script goes through `initialize_megatron`,
which asserts a GPU before it parses, validates, then sets process-wide globals once per process and builds
the tokenizer from a vocabulary file CI mounts, and only then touches the device. Every base suite of the
real history failed at one of these (`Megatron requires CUDA.`, `args is already initialized.`, a
FileNotFoundError for `/mnt/artifacts/.../vocab.json`, `tokenizer_path: /mnt/artifacts/... is invalid`, an
EOFError from the asynchronous checkpoint writer's `Manager()`, whose process the sandbox cannot start);
the twin reproduces each in the real sandbox.
"""

from __future__ import annotations

from pathlib import Path

from harness_twin import job, line_of, results, run_sandboxed
from test_twin_boundary import boundary_policy, launch, write_repo

from app.analysis.core.model import Outcome

GLOBAL_VARS = '''\
import multiprocessing
import os

_GLOBAL_ARGS = None


def set_global_variables(args):
    global _GLOBAL_ARGS
    assert _GLOBAL_ARGS is None, "args is already initialized."
    _GLOBAL_ARGS = args
    if args.async_save:  # the asynchronous checkpoint writer's results queue
        multiprocessing.get_context("spawn").Manager().Queue()
    if args.tokenizer_model is not None:  # 2026-02 to 04: TikTokenizer checks its file before reading it
        if not os.path.exists(args.tokenizer_model):
            raise ValueError(f"tokenizer_path: {args.tokenizer_model} is invalid")
    with open(args.vocab_file, encoding="utf-8") as handle:  # the tokenizer, built after validation
        handle.read()
'''

PRETRAIN = '''\
import argparse

import torch

from megatron import global_vars


def initialize_megatron():
    assert torch.cuda.is_available(), "Megatron requires CUDA."
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--global-batch-size", type=int, required=True)
    parser.add_argument("--micro-batch-size", type=int, required=True)
    parser.add_argument("--vocab-file", required=True)
    parser.add_argument("--tokenizer-model")
    parser.add_argument("--async-save", action="store_true")
    args = parser.parse_args()
    assert args.global_batch_size % args.micro_batch_size == 0, "global batch size is not divisible"
    global_vars.set_global_variables(args)
    torch.cuda.set_device(0)


if __name__ == "__main__":
    initialize_megatron()
'''


def test_megatron_launches_before_its_validator_reach_their_boundary(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"pretrain_gpt.py": PRETRAIN, "megatron/__init__.py": "",
                                 "megatron/global_vars.py": GLOBAL_VARS, "data/vocab.json": "{}\n"})
    entry, mounted = "pretrain_gpt.py", "--global-batch-size 8 --micro-batch-size 2 --vocab-file"
    found = results(run_sandboxed(repo, job([
        # the first is the warm leader's warm-up, the others run in children forked after it
        launch("mounted", entry, f"{mounted} /mnt/artifacts/text/bpe/vocab.json"),
        launch("mounted-again", entry, f"{mounted} /mnt/artifacts/text/bpe/vocab.json"),
        launch("in-tree", entry, f"{mounted} data/vocab.json"),
        launch("missing-in-tree", entry, f"{mounted} data/gone.json"),
        launch("tiktoken", entry, f"{mounted} data/vocab.json --tokenizer-model /mnt/artifacts/m/vocab.json"),
        launch("tiktoken-in-tree", entry, f"{mounted} data/vocab.json --tokenizer-model data/gone.json"),
        launch("async-save", entry, f"{mounted} data/vocab.json --async-save"),
        launch("indivisible", entry, "--global-batch-size 7 --micro-batch-size 2 --vocab-file x.json"),
    ], boundary_policy(), workers=1)))
    opened = line_of(repo, "megatron/global_vars.py", "with open(args.vocab_file")
    for suite in ("mounted", "mounted-again"):
        assert found[suite].outcome == Outcome(
            "accepted", None, "reached the training boundary open (the file is on CI's hosts (a dataset, "
            "tokenizer, weights or checkpoint CI mounts))", "megatron/global_vars.py", opened), suite
    assert found["in-tree"].outcome == Outcome(
        "accepted", None, "reached the training boundary torch.cuda.set_device (device work needs the GPUs "
        "CI has)", entry, line_of(repo, entry, "torch.cuda.set_device(0)"))
    checked = line_of(repo, "megatron/global_vars.py", "raise ValueError(")
    assert found["tiktoken"].outcome == Outcome(
        "accepted", None, "reached the training boundary /mnt/artifacts/m/vocab.json (the file is on CI's "
        "hosts (a dataset, tokenizer, weights or checkpoint CI mounts))", "megatron/global_vars.py", checked)
    assert found["tiktoken-in-tree"].outcome == Outcome(
        "rejected", "ValueError", "tokenizer_path: data/gone.json is invalid", "megatron/global_vars.py",
        checked)
    assert found["async-save"].outcome == Outcome(
        "accepted", None, "reached the training boundary multiprocessing.process.BaseProcess.start (it "
        "starts worker processes)", "megatron/global_vars.py",
        line_of(repo, "megatron/global_vars.py", ".Manager()"))
    # a file of the tree the launch names and the tree lacks stays the launch's own error
    gone = found["missing-in-tree"].outcome
    assert (gone.outcome, gone.exception, gone.line) == ("rejected", "FileNotFoundError", opened)
    assert found["indivisible"].outcome == Outcome(
        "rejected", "AssertionError", "global batch size is not divisible", entry,
        line_of(repo, entry, "assert args.global_batch_size %"))
