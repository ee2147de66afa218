"""Step MFU, goodput and totals of famous runs beside what their authors published.

    python benchmarks/published_steps.py

Each line is `trilemma.api.estimate` at the run's own GPU count, tokens, sequence, batch and, where
the source gives it, layout (the rest searched), set beside the source's figure. The step figures
compare like with like: model FLOPs (MFU, PaLM's convention) or hardware FLOPs (HFU, recomputation
included) as the source counts them. Goodput is the failure model's share × the straggler share.
Which of these rows the constants were fitted on is said in the last column: a fitted row is a check
of consistency, not of generalisation; the Llama 3.1 model card's GPU-hours are kept independent
(../shared/calibration/README.md) and never fitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trilemma.api import estimate
from trilemma.presets import get_hardware
from trilemma.resolve import make_plan, resolve_model
from trilemma.units import DAY, GIGA, HOUR


@dataclass(frozen=True)
class Check:
    name: str
    args: tuple[str, str, int, float]  # model, GPU, GPU count, tokens
    kw: dict[str, Any]
    step: tuple[str, float, str]  # "mfu" or "hfu", published value (0-1), its source
    total: (
        tuple[str, float, str] | None
    )  # "gpu_hours", "days", "busy_gpu_hours" or "busy_days"; value; source
    fitted: str


CHECKS = (
    Check(
        "Llama 2 70B",
        ("llama2-70b", "a100-80gb", 2048, 2e12),
        dict(seq_len=4096, global_batch_tokens=1024 * 4096),
        ("mfu", float("nan"), "no step figure published"),
        ("gpu_hours", 1_720_320, "arXiv:2307.09288 Table 2"),
        "its GPU-hours are a runs row (at an assumed 2,048 GPUs, the count of this plan)",
    ),
    Check(
        "LLaMA-65B",
        ("llama-65b", "a100-80gb", 2048, 1.4e12),
        dict(
            seq_len=2048,
            global_batch_tokens=2048 * 2048,
            layout=dict(recompute="selective", sp=True),
        ),
        (
            "mfu",
            6 * 65.2e9 * 380 / 312e12,
            "arXiv:2302.13971 §2.4: 380 tokens/s/GPU (6·N per token)",
        ),
        (
            "busy_gpu_hours",
            1_022_362,
            "arXiv:2302.13971 Table 15 (= 1.4T / 380 / 3600: no idle time)",
        ),
        "the 380 tokens/s is a throughput row; Table 15's 7B and 33B are busy_gpu_hours rows",
    ),
    Check(
        "GPT-3 175B, Narayanan's layout",
        ("gpt3-175b", "a100-80gb", 1024, 300e9),
        # the stack of 2021 as Megatron-LM's examples/pretrain_gpt3_175B.sh runs it: micro-batch 1, no
        # interleaving, --checkpoint-activations, fp16; no FlashAttention (2022), no sequence parallelism
        # (Korthikanti 2022), no distributed optimizer
        dict(
            seq_len=2048,
            global_batch_tokens=1536 * 2048,
            precision="fp16",
            flash=False,
            layout=dict(tp=8, pp=16, vp=1, zero=0, recompute="full", micro_batch=1, sp=False),
        ),
        ("hfu", 140e12 / 312e12, "arXiv:2104.04473 §5.1: 140 TFLOP/s per GPU (hardware FLOPs)"),
        (
            "busy_days",
            34.0,
            "arXiv:2104.04473 §5.1: 34 days estimated at 140 TFLOP/s (no idle time)",
        ),
        "its Table 1 neighbours (145.6B on 1,536 GPUs) are throughput rows",
    ),
    Check(
        "BLOOM 176B",
        ("bloom-176b", "a100-80gb", 384, 366e9),
        dict(
            seq_len=2048,
            global_batch_tokens=2048 * 2048,
            flash=False,
            inter_node_gb_s=6.25,
            layout=dict(tp=4, pp=12, vp=1, zero=1, recompute="full", micro_batch=2, sp=False),
        ),
        ("hfu", 156e12 / 312e12, "arXiv:2211.05100 §3.4: 156 TFLOP/s per GPU (hardware FLOPs)"),
        ("gpu_hours", 1_082_990, "arXiv:2211.05100 §3.5 (384 GPUs' wall clock)"),
        "both figures are rows (throughput and runs)",
    ),
    Check(
        "Llama 3.1 405B (16,384 GPUs)",
        ("llama3.1-405b", "h100-sxm", 16384, 15.6e12),
        dict(seq_len=8192, global_batch_tokens=16_777_216, layout=dict(tp=8, pp=16)),
        ("mfu", 0.41, "arXiv:2407.21783 Table 4 (BF16 MFU)"),
        ("gpu_hours", 30.84e6, "Llama 3.1 model card (kept independent)"),
        "none: Table 4's rows are carried skipped (FSDP inside pipeline stages)",
    ),
    Check(
        "Llama 3.1 405B (8,192 GPUs)",
        ("llama3.1-405b", "h100-sxm", 8192, 15.6e12),
        dict(seq_len=8192, global_batch_tokens=16_777_216, layout=dict(tp=8, pp=16)),
        ("mfu", 0.43, "arXiv:2407.21783 Table 4 (BF16 MFU)"),
        None,
        "none (as above)",
    ),
    # the only whole run on more than 124 nodes with a published total that is not kept independent. The
    # card gives no batch: 2,048 sequences assumed (the 7B card's 2,304 and the 40B's 1,152 bracket it);
    # the GPU count varied ("up to 4,096"), so at 4,096 the straggler share is, if anything, charged on
    # more nodes than the run had. Its card: "up to 4,096 A100 40GB GPUs in P4d instances", 400 Gb/s of EFA per
    # 8-GPU instance, as Falcon-7B's runs row states it
    Check(
        "Falcon-180B",
        ("falcon-180b", "a100-40gb", 4096, 3.5e12),
        dict(
            seq_len=2048,
            global_batch_tokens=2048 * 2048,
            layout=dict(tp=8, pp=8),
            inter_node_gb_s=6.25,
        ),
        ("mfu", float("nan"), "no step figure published"),
        (
            "gpu_hours",
            7.0e6,
            "huggingface.co/blog/falcon-180b: '~7,000,000 GPU hours' on up to 4,096 A100-40GB",
        ),
        "none: not a row (one significant digit, and the GPU count varied)",
    ),
)


def main() -> None:
    rows = []
    for c in CHECKS:
        kw = dict(c.kw)
        model, gpu, n, tokens = c.args
        hw: Any = get_hardware(gpu)
        if "inter_node_gb_s" in kw:  # the run's own network, as its calibration rows state it
            hw = hw.replace(
                name=f"{gpu} (own network)",
                inter_node_bw_bytes_per_s=kw.pop("inter_node_gb_s") * GIGA,
            )
        flash = kw.pop("flash", True)
        plan = make_plan(
            resolve_model(model)[0],
            tokens,
            kw["seq_len"],
            kw["global_batch_tokens"],
            kw.get("precision", "bf16"),
        ).model_copy(update={"flash_attention": flash})
        e = estimate(model, hw, n, tokens, plan=plan, layout=kw.get("layout"))
        t = e.time
        kind, pub, src = c.step
        ours = t.mfu if kind == "mfu" else t.hfu
        step = f"{kind.upper()} {ours:.1%}" + (
            f" vs {pub:.1%} ({ours / pub:.2f}×) — {src}" if pub == pub else f" — {src}"
        )
        fail = t.reliability.get("goodput", t.goodput)
        good = f"{t.goodput:.3f} = {fail:.3f} × {t.other_share:.3f}"
        if c.total is None:
            total = "—"
        else:
            what, value, tsrc = c.total
            # busy_*: the source's figure is its steps alone (tokens over its measured rate): no goodput
            secs = t.busy_s if what.startswith("busy_") else t.total_s
            mine = secs * n / HOUR if what.endswith("gpu_hours") else secs / DAY
            unit = ("GPU-h" if what.endswith("gpu_hours") else "days") + (
                " busy" if what.startswith("busy_") else ""
            )
            total = f"{mine:,.4g} vs {value:,.4g} {unit} ({mine / value:.2f}×) — {tsrc}"
            if what == "gpu_hours":  # how much of it is the steps alone, before goodput
                total += f"; the steps alone {t.busy_s * n / HOUR:,.4g} ({t.busy_s * n / HOUR / value:.2f}×)"
        lay = e.layout
        rows.append(
            (
                c.name,
                f"tp {lay.tp} pp {lay.pp} vp {lay.vp} dp {lay.dp} {lay.recompute}",
                step,
                good,
                total,
                c.fitted,
            )
        )
    for name, lay, step, good, total, fitted in rows:
        print(
            f"{name} [{lay}]\n  step    {step}\n  goodput {good}\n  total   {total}\n  fitted  {fitted}"
        )


if __name__ == "__main__":
    main()
