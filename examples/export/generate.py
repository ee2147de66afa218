"""Regenerate the exported plans in this folder (python examples/export/generate.py).

The README's default plan — Llama-2-7B on 2,048 A100-80GB for its published 2T tokens — for each
engine, with the pins the engine needs, and a solve optimum:

    trilemma export --to megatron --out examples/export/megatron
    trilemma export --to torchtitan --zero 3 --out examples/export/torchtitan
    trilemma export --to deepspeed --no-sp --out examples/export/deepspeed
    trilemma export --to hf --tp 1 --global-batch 8388608 --out examples/export/hf
    trilemma export --to megatron --out examples/export/solve-megatron solve examples/scenarios/fast-and-cheap.toml

and, through the Python API (the command line has no fine-tune flags yet), a QLoRA fine-tune of
Llama-2-7B on 8 A100s (rank 16, alpha 32, every projection, NF4 base, paged 8-bit AdamW) for HF
Trainer + PEFT, in hf-qlora/. Until TrainingPlan carries its fine-tune fields (the --finetune flags),
that layout is the full-training estimate of the same run; trilemma.export.plan.finetune_of is where
the exporters will read them.
"""

from __future__ import annotations

from pathlib import Path

from trilemma.api import estimate, export
from trilemma.cli import main
from trilemma.export import FineTune
from trilemma.report.export import write_export

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

COMMANDS = {
    "megatron": ["--to", "megatron"],
    "torchtitan": ["--to", "torchtitan", "--zero", "3"],
    "deepspeed": ["--to", "deepspeed", "--no-sp"],
    "hf": ["--to", "hf", "--tp", "1", "--global-batch", "8388608"],
    "solve-megatron": ["--to", "megatron", "solve", str(ROOT / "examples" / "scenarios" / "fast-and-cheap.toml")],
}

QLORA = FineTune(method="qlora", lora_rank=16, lora_alpha=32, lora_targets=("attention", "mlp"), base_precision="nf4",
                 optimizer="paged_adamw_8bit")

if __name__ == "__main__":
    for folder, args in COMMANDS.items():
        to = args[:2]
        rest = args[2:]
        assert main(["export", *to, "--out", str(HERE / folder), *rest]) == 0, folder
    est = estimate("llama2-7b", "a100-80gb", 8, tokens=1e8, global_batch_tokens=64 * 4096, layout={"tp": 1, "pp": 1})
    write_export(export(est, "hf", finetune=QLORA), str(HERE / "hf-qlora"))
