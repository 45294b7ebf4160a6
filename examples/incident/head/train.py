"""The example trainer's entry point: CI launches it; prtriage only replays its argument validation."""

from arguments import parse_args

if __name__ == "__main__":
    args = parse_args()
    print(f"training on {args.num_gpus} GPUs (LoRA rank {args.lora_rank})")
