"""CI: the end-to-end runs, full fine-tuning and LoRA, both on colocated GPUs."""

import subprocess

COMMON = "--num-gpus 8 --colocate --disable-weights-backuper"

for extra in ("", "--lora-rank 16"):
    subprocess.run(f"python3 train.py {COMMON} {extra}", shell=True, check=True)
