"""Regenerate the exported plans in this folder (python examples/export/generate.py).

The README's default plan — Llama-2-7B on 2,048 A100-80GB for its published 2T tokens — for each
engine, with the pins the engine needs, and a solve optimum:

    trilemma export --to megatron --out examples/export/megatron
    trilemma export --to torchtitan --zero 3 --out examples/export/torchtitan
    trilemma export --to deepspeed --no-sp --out examples/export/deepspeed
    trilemma export --to hf --tp 1 --global-batch 8388608 --out examples/export/hf
    trilemma export --to megatron --out examples/export/solve-megatron solve examples/scenarios/fast-and-cheap.toml

and a QLoRA fine-tune of Llama-2-7B on one A100 (rank 16, alpha 32, every linear projection, NF4
base with double quantisation, paged 8-bit AdamW) for HF Trainer + PEFT, in hf-qlora/:

    trilemma export --to hf --model llama2-7b --gpu a100-80gb --gpus 1 --tokens 100M --finetune qlora \
        --lora-rank 16 --lora-alpha 32 --optimizer paged-adamw-8bit --out examples/export/hf-qlora
"""

from __future__ import annotations

from pathlib import Path

from trilemma.cli import main

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

COMMANDS = {
    "megatron": ["--to", "megatron"],
    "torchtitan": ["--to", "torchtitan", "--zero", "3"],
    "deepspeed": ["--to", "deepspeed", "--no-sp"],
    "hf": ["--to", "hf", "--tp", "1", "--global-batch", "8388608"],
    "solve-megatron": ["--to", "megatron", "solve", str(ROOT / "examples" / "scenarios" / "fast-and-cheap.toml")],
    "hf-qlora": ["--to", "hf", "--model", "llama2-7b", "--gpu", "a100-80gb", "--gpus", "1", "--tokens", "100M",
                 "--finetune", "qlora", "--lora-rank", "16", "--lora-alpha", "32", "--optimizer", "paged-adamw-8bit"],
}


if __name__ == "__main__":
    for folder, args in COMMANDS.items():
        to = args[:2]
        rest = args[2:]
        assert main(["export", *to, "--out", str(HERE / folder), *rest]) == 0, folder
