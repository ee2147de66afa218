"""fp32 on a GPU at the shapes of the sweep's highest fp32 plan: a device check of the time floors' last line.

    python benchmarks/fp32_step.py [--gpu h100-sxm] [--layers 4] [--steps 8] [--out fp32_step.json]

The floor: no plan's step MFU more than 5 points above the best measured for its chip family. The sweep's
highest fp32 plan on H100 (``trilemma.validate.floors.highest_plan_mfu``: Llama 2 13B on 64 GPUs, TP 2) is
predicted at ~70% of the fp32 peak, because its GEMMs (4,096 tokens × 5,120-7,680 wide at TP 2) run, by the
GEMM law fitted to H100's cuBLAS SGEMMs (hardware.toml ``measured_half_dim``), at ~72%, between the 68% and
75.5% measured at 4,096³ and 8,192³. The largest fp32 step measured on Hopper is the CS336 2.7B model's, 2,048 tokens of
d 2,560 (tests/data/cs336_fp32_h100.csv: ~52% for the whole step, its forward and backward predicted within
10%): the plan's shapes are beyond any measured step, so only a measurement decides it. This script takes:

1. The plan's own GEMMs (each layer's QKV, output, MLP projections; forward, input gradient and weight
   gradient shapes), timed as fp32 ``torch.mm`` with TF32 off (``NVIDIA_TF32_OVERRIDE=0``, matmul precision
   "highest"), beside the rate the step model gives each (``trilemma.estimate.roofline.gemm_rate``).
2. A real fp32 training step (``trilemma probe``: forward, backward, AdamW) of ``--layers`` layers of that
   model at its sequence and micro-batch on one GPU, its MFU against the preset's fp32 peak, beside the
   planner's prediction for the same one-GPU step on the preset.

Then the floor line with this measurement as the family's fp32 reference. H100 and H200 are one die (GH100:
132 SMs, the same clocks and 66.9 TFLOP/s of fp32); H200's faster memory matters little at fp32's rates.
About three minutes on one H100 or H200 (the step slice needs ~40 GB). On a CPU (for tests) it runs the
same code on whatever small shapes are given and prints the measurement beside the named preset's reading.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")  # cuBLAS: no TF32 in any process this one starts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from thin_matmul import positive, preset_for  # noqa: E402


def plan_gemms(m, tp: int, tokens: int) -> list[tuple[str, tuple[int, int, int]]]:
    """(label, (M, N, K)) of one layer's dense matmuls per micro-batch of ``tokens`` tokens at tensor
    parallelism ``tp`` (Megatron's split: QKV and MLP up/gate column-parallel, output and down row-
    parallel), each forward with its input-gradient and weight-gradient shapes (the backward's two GEMMs)."""
    d, f = m.d_model, m.ffn_dim
    fwd = [
        ("QKV", (tokens, (m.d_attn + 2 * m.d_kv) // tp, d)),
        ("attention out", (tokens, d, m.d_attn // tp)),
        ("MLP up", (tokens, f // tp, d)),
        ("MLP down", (tokens, d, f // tp)),
    ]
    out = []
    for name, (M, N, K) in fwd:
        out += [
            (f"{name} fwd", (M, N, K)),
            (f"{name} dgrad", (M, K, N)),
            (f"{name} wgrad", (K, N, M)),
        ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--gpu",
        default=None,
        help="hardware preset (default: from the device name; required on a CPU)",
    )
    ap.add_argument(
        "--model",
        default=None,
        help="model preset (default: the sweep's highest fp32 plan on --gpu)",
    )
    ap.add_argument(
        "--seq", type=positive, default=None, help="tokens per sequence (default: the plan's)"
    )
    ap.add_argument(
        "--micro-batch",
        type=positive,
        default=None,
        help="sequences per micro-batch (default: the plan's)",
    )
    ap.add_argument(
        "--tp",
        type=positive,
        default=None,
        help="tensor parallelism the GEMMs are split by (default: the plan's)",
    )
    ap.add_argument(
        "--layers", type=positive, default=4, help="layers of the model in the timed training step"
    )
    ap.add_argument(
        "--steps", type=positive, default=8, help="timed optimizer steps of the training step"
    )
    ap.add_argument("--reps", type=positive, default=10, help="repetitions of each timed GEMM")
    ap.add_argument("--out", default=None, help="write the figures to this JSON file")
    a = ap.parse_args()

    import torch

    from trilemma.errors import TrilemmaError
    from trilemma.estimate.choose import estimate_plan
    from trilemma.estimate.flops import model_flop_per_token
    from trilemma.estimate.params import param_counts
    from trilemma.estimate.roofline import gemm_rate
    from trilemma.presets import constants, get_hardware
    from trilemma.resolve import make_cluster, make_plan, resolve_model
    from trilemma.specs import Precision
    from trilemma.validate.floors import highest_plan_mfu

    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    name = torch.cuda.get_device_name() if cuda else "cpu"
    preset = a.gpu or (preset_for(name) if cuda else None)
    if preset is None:
        ap.error(f"--gpu: no preset for device {name!r}; name one (e.g. --gpu h100-sxm)")
    try:
        hw = get_hardware(preset)
    except TrilemmaError as err:
        ap.error(f"--gpu: {err}")
    if Precision.FP32 not in hw.peak_flop_per_s:
        ap.error(f"--gpu: {preset} has no fp32 peak; name a GPU preset with one")
    torch.set_float32_matmul_precision("highest")
    consts, peak = constants(), hw.peak(Precision.FP32)

    if a.model is not None:
        try:
            resolve_model(a.model)
        except TrilemmaError as err:
            ap.error(f"--model: {err}")
    top_mfu, top_model, top_n, _ = highest_plan_mfu(preset, ("fp32",))
    model_name = a.model or top_model
    m = resolve_model(model_name)[0]
    lay = None
    if top_model == model_name:
        lay = estimate_plan(
            m,
            make_cluster(preset, top_n, memory_headroom=0.0),
            make_plan(m, 1e11, precision="fp32"),
        ).layout
    seq = a.seq or m.seq_len or 2048
    mb = a.micro_batch or (lay.micro_batch if lay else 1)
    tp = a.tp or (lay.tp if lay else 1)
    print(
        f"{name} ({dev}), TF32 off (NVIDIA_TF32_OVERRIDE={os.environ['NVIDIA_TF32_OVERRIDE']}, "
        f"allow_tf32={torch.backends.cuda.matmul.allow_tf32}); preset {preset}, fp32 peak {peak / 1e12:.1f} TFLOP/s"
    )
    print(
        f"sweep's highest fp32 plan on {preset}: {top_model} on {top_n} devices, MFU {top_mfu:.1%}"
        + (f" (tp {lay.tp}, micro-batch {lay.micro_batch})" if lay else "")
    )
    report: dict = {
        "device": name,
        "preset": preset,
        "peak_fp32_flop_per_s": peak,
        "model": model_name,
        "seq": seq,
        "micro_batch": mb,
        "tp": tp,
        "highest_plan": {"model": top_model, "devices": top_n, "mfu": top_mfu},
        "gemms": [],
        "step": None,
    }

    # ---- 1. the plan's GEMMs
    def timed_mm(x: torch.Tensor, y: torch.Tensor) -> float:
        for _ in range(2):
            x @ y
        if cuda:
            torch.cuda.synchronize()
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            for _ in range(a.reps):
                x @ y
            t1.record()
            torch.cuda.synchronize()
            return t0.elapsed_time(t1) / 1e3 / a.reps
        t = time.perf_counter()
        for _ in range(a.reps):
            x @ y
        return (time.perf_counter() - t) / a.reps

    print(
        f"\n1. one layer's GEMMs of {model_name} at tp {tp}, {mb * seq:,} tokens per micro-batch (fp32 torch.mm)"
    )
    print(
        f"{'GEMM':<22} {'M×N×K':>22} {'measured TFLOP/s':>17} {'% of peak':>10} {'model %':>8} {'model/meas':>11}"
    )
    flop_sum = meas_s = model_s = 0.0
    for label, (M, N, K) in plan_gemms(m, tp, mb * seq):
        x = torch.randn(M, K, device=dev)
        y = torch.randn(K, N, device=dev)
        sec = timed_mm(x, y)
        del x, y
        flop = 2.0 * M * N * K
        model = float(gemm_rate(hw, Precision.FP32, M, N, K, consts))
        flop_sum, meas_s, model_s = flop_sum + flop, meas_s + sec, model_s + flop / model
        print(
            f"{label:<22} {f'{M}×{N}×{K}':>22} {flop / sec / 1e12:>17.2f} {flop / sec / peak:>10.1%} "
            f"{model / peak:>8.1%} {model / (flop / sec):>10.2f}×"
        )
        report["gemms"].append(
            {"label": label, "mnk": [M, N, K], "measured_s": sec, "model_flop_per_s": model}
        )
    print(
        f"{'all of them':<22} {'':>22} {flop_sum / meas_s / 1e12:>17.2f} {flop_sum / meas_s / peak:>10.1%} "
        f"{flop_sum / model_s / peak:>8.1%} {meas_s / model_s:>10.2f}×"
    )

    # ---- 2. a real fp32 training step of a slice of the model, on one device
    os.environ.setdefault("TRILEMMA_CONFIG_DIR", tempfile.mkdtemp(prefix="trilemma-fp32-"))
    from trilemma.probe import run_probe
    from trilemma.request import ProbeRequest

    print(
        f"\n2. fp32 training step: {a.layers} layers of {model_name}, seq {seq} × micro-batch {mb}, one {dev} "
        "(trilemma probe: forward, backward, AdamW)",
        flush=True,
    )
    try:
        r = run_probe(
            ProbeRequest(
                model=model_name,
                layers=a.layers,
                seq=seq,
                micro_batch=mb,
                precision="fp32",
                device=dev,
                steps=a.steps,
            )
        )
    except TrilemmaError as err:
        print(f"the training step could not run: {err}")
        r = None
    if r is not None and r.measured.step_time is not None:
        spec = r.model
        step_s = r.measured.step_time.median_s
        per_token = float(model_flop_per_token(spec, seq, param_counts(spec)))
        mfu = mb * seq * per_token / (step_s * peak)
        pred = estimate_plan(
            spec,
            make_cluster(preset, 1, memory_headroom=0.0),
            make_plan(
                spec, 100 * mb * seq, seq_len=seq, global_batch_tokens=mb * seq, precision="fp32"
            ),
            layout={"tp": 1, "pp": 1, "micro_batch": mb, "recompute": "none"},
        )
        print(
            f"measured {step_s:.4g} s a step, MFU {mfu:.1%} of {preset}'s fp32 peak; planner on {preset}: "
            f"{pred.time.step_s:.4g} s, MFU {pred.time.mfu:.1%} (predicted/measured {pred.time.step_s / step_s:.2f}×)"
        )
        print(
            f"(a slice of {a.layers} layers on one device, no tensor parallelism: its MFU is the slice's; the "
            f"sweep's plan has all {m.n_layers} layers over the one LM head, and its TP collectives)"
        )
        print(
            f"floor: the sweep's highest fp32 plan {top_mfu:.1%} against this step's {mfu:.1%} + 5 = {mfu + 0.05:.1%}: "
            + ("holds" if top_mfu <= mfu + 0.05 else "MISS")
        )
        report["step"] = {
            "layers": a.layers,
            "step_s": step_s,
            "mfu": mfu,
            "predicted_step_s": pred.time.step_s,
            "predicted_mfu": pred.time.mfu,
            "floor_holds": top_mfu <= mfu + 0.05,
        }
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=1) + "\n")
        print(f"written: {a.out}")


if __name__ == "__main__":
    main()
