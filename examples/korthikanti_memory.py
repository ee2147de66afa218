"""GPT-3 175B on A100-80GB, TP 8, PP 8 (Korthikanti et al. 2022, arXiv 2205.05198, Table 3):
our per-GPU memory breakdown beside the paper's activation memory (Table 2 per layer × L layers
in flight on the first 1F1B stage, §4.2.3; no interleaving; micro-batch 1; s = 2048; fp16;
no flash attention, as in the paper).

    python examples/korthikanti_memory.py
"""

from __future__ import annotations

from trilemma.api import evaluate_layout, make_cluster, make_plan, resolve_model
from trilemma.presets import constants
from trilemma.specs import Layout

GIB = 2.0**30
S, B, H, A, L, T = 2048, 1, 12288, 96, 96, 8

# Korthikanti Table 2, bytes per layer, times L layers (p micro-batches × L/p layers)
PAPER = [
    ("TP", "none", False, S * B * H * (10 + 24 / T + 5 * A * S / (H * T))),
    ("TP+SP", "none", True, S * B * H / T * (34 + 5 * A * S / H)),
    ("TP+SP+selective", "selective", True, S * B * H / T * 34),
    ("TP+SP+full recompute", "full", True, 2 * S * B * H / T),
]


def main() -> None:
    m, _ = resolve_model("gpt3-175b")
    plan = make_plan(m, 300e9, S, 64 * S, "fp16", flash_attention=False)
    cluster = make_cluster("a100-80gb", 64)
    print(
        f"{'configuration':<22} {'weights':>8} {'grads':>8} {'optim':>8} {'activ.':>8} {'other':>8} {'total':>8}"
        f" | {'paper act.':>10} {'ours/paper':>10}"
    )
    for name, rc, sp, per_layer in PAPER:
        layout = Layout(tp=T, pp=8, dp=1, vp=1, micro_batch=B, recompute=rc, sp=sp, zero=0)
        mem = evaluate_layout(m, cluster, plan, layout).memory
        paper = L * per_layer
        print(
            f"{name:<22} {mem.weights / GIB:8.2f} {mem.gradients / GIB:8.2f} {mem.optimizer / GIB:8.2f} "
            f"{mem.activations / GIB:8.2f} {mem.other / GIB:8.2f} {mem.per_gpu_bytes / GIB:8.2f} | "
            f"{paper / GIB:10.2f} {mem.activations / paper:10.3f}" + ("" if mem.fits else "  OOM")
        )
    c = constants()["memory"]
    print(
        f"GiB per GPU on the stage that needs most. other = logits (last stage) + {c['framework_overhead_bytes'] / GIB:.2f} "
        f"GiB framework overhead + {c['fragmentation']:.1%} fragmentation (calibrated);\n"
        "full recompute adds one live layer's activations during its backward (the paper's formula omits it)."
    )


if __name__ == "__main__":
    main()
