"""Command line of the example trainer: parse the flags, then validate how they combine."""

import argparse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="train.py", allow_abbrev=False)
    parser.add_argument("--num-gpus", type=int, default=8)
    parser.add_argument("--colocate", action="store_true", help="training and inference share the GPUs")
    parser.add_argument("--offload-train", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--disable-weights-backuper", action="store_true")
    parser.add_argument("--lora-rank", type=int, default=0, help="0 trains the full model")
    return parser


def validate_args(args: argparse.Namespace) -> None:
    assert args.num_gpus > 0, "--num-gpus must be positive"
    # colocated training must free the GPUs for inference: offload unless told otherwise
    if args.colocate and args.offload_train is None:
        args.offload_train = True


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    validate_args(args)
    return args
