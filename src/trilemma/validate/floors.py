"""The figures the time floors are stated in, computed from the shipped data and calibration.

- ``measured_mfu``: the best step MFU measured per chip family in the throughput rows (model FLOPs,
  PaLM's convention: MFU rows as reported; TFLOP/s, tokens/s and step times converted with the row's
  own model FLOPs per token), the reference no plan may exceed by more than 5 points.
- ``highest_plan_mfu``: the highest step MFU the planner gives any plan of a fixed sweep (Llama 2
  7B/13B/70B and GPT-3 175B on 64, 512 and 2,048 devices) at given precisions, set against that.
- ``gemm_against_mamf``: the step model's GEMM term set against a chip's measured best matmul (MAMF):
  at the measured shape, and the fastest GEMM it gives over a grid of shapes (which must not beat it).
- ``korthikanti_layer_ms``: one transformer layer's forward + backward time, in the five configurations of
  Korthikanti et al. 2022's Table 4 (22B model, 8 A100s, TP 8), beside the published milliseconds.
- ``small_config_errors``: the leave-one-source-out |log(predicted / reported)| of the single-node
  throughput rows of models of at most 2B parameters, as the last calibration stored them.

``benchmarks/time_floors.py`` prints both beside the floors; ``tests/test_step_mfu.py`` asserts them.
"""

from __future__ import annotations

import collections
import math

from trilemma.estimate.flops import model_flop_per_token
from trilemma.estimate.params import param_counts
from trilemma.units import KILO, TERA
from trilemma.validate.cases import load_cases

#: single node, at most this many parameters: the time floors' "small configurations"
SMALL_PARAMS = 2e9
#: the plans whose step MFU is set against the measured best: models and device counts
SWEEP_MODELS = ("llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b")
SWEEP_COUNTS = (64, 512, 2048)


def floor_gpus() -> list[str]:
    """The hardware presets the MFU floor is read on: every one whose chip family has a measured step in the
    throughput rows (a family's best measured MFU is the reference its chips are held to), in preset order."""
    from trilemma.presets import hardware_presets

    families = set(measured_mfu())
    return [name for name, hw in hardware_presets().items() if hw.family in families]


#: precisions whose matmuls run at the same rate on the same units, compared as one class
MATH_CLASS = {"bf16": "16-bit", "fp16": "16-bit"}


def math_class(precision: str) -> str:
    """The class a precision's step MFU is compared within: bf16 and fp16 together, each other alone."""
    return MATH_CLASS.get(str(precision), str(precision))


def measured_mfu(by_precision: bool = False, cases: list | None = None) -> dict:
    """The best measured step MFU (0-1) per chip family (``HardwareSpec.family``), from the shipped
    throughput rows (or ``cases``); with ``by_precision``, per (family, ``math_class`` of the row's
    precision). A ``forward_backward_s`` row (no optimizer update) counts as the step's MFU: an upper
    bound on it, by the update's few percent."""
    best: dict = collections.defaultdict(float)
    for c in load_cases("throughput")[0] if cases is None else cases:
        st = c.plan.stages[0]
        peak = c.hardware.peak(c.plan.precision)
        per_token = float(model_flop_per_token(c.model, st.seq_len, param_counts(c.model)))
        if c.metric == "mfu":
            v = c.reported
        elif c.metric == "model_tflops_per_gpu":
            v = c.reported * TERA / peak
        elif c.metric == "tokens_per_s_per_gpu":
            v = c.reported * per_token / peak
        elif c.metric in ("step_s", "forward_backward_s"):
            v = st.global_batch_tokens * per_token / (c.reported * c.n_gpus * peak)
        else:  # hardware FLOPs count recomputation: not comparable with model FLOPs
            continue
        key = (
            (c.hardware.family, math_class(c.plan.precision)) if by_precision else c.hardware.family
        )
        best[key] = max(best[key], v)
    return dict(best)


def fp32_step_checks(a100_csv: str, h100_csv: str) -> list:
    """The measured fp32 steps that are checks, not calibration rows (tests/data): the CS336 models' forward
    and backward on an A100-40GB (``a100_csv``, the backtest schema) and the same models' whole steps
    (forward, backward, AdamW) on an H100 (``h100_csv``: d_model, context, h100_step_s), as cases of the A100
    rows moved to h100-sxm with metric ``step_s``: ``measured_mfu(by_precision=True, cases=...)`` then gives
    each family's best measured fp32 step. A whole step's MFU is below its forward and backward's."""
    import csv
    import dataclasses

    from trilemma.presets import get_hardware
    from trilemma.validate.cases import load_file

    a100 = load_file(a100_csv, "throughput")[1]
    with open(h100_csv, encoding="utf-8") as f:
        rows = {
            (int(r["d_model"]), int(r["context"])): float(r["h100_step_s"])
            for r in csv.DictReader(x for x in f if not x.startswith("#"))
        }
    h100 = get_hardware("h100-sxm")
    out = list(a100)
    for c in a100:
        key = (c.model.d_model, int(c.plan.stages[0].seq_len))
        if key in rows:
            out.append(dataclasses.replace(c, hardware=h100, metric="step_s", reported=rows[key]))
    return out


def highest_plan_mfu(
    gpu: str, precisions: tuple[str, ...] = ("bf16",)
) -> tuple[float, str, int, str]:
    """(step MFU 0-1, model, devices, precision) of the sweep's plan with the highest MFU on ``gpu``: 1e11
    tokens, every plan that fits physically (memory headroom 0, not only those the band's margin admits);
    a precision and count at which nothing fits is passed over. (0, "", 0, "") when none fits."""
    from trilemma.errors import TrilemmaError
    from trilemma.estimate.choose import estimate_plan
    from trilemma.resolve import make_cluster, make_plan, resolve_model

    best = (0.0, "", 0, "")
    for prec in precisions:
        for name in SWEEP_MODELS:
            m = resolve_model(name)[0]
            for n in SWEEP_COUNTS:
                try:  # trilemma.api.estimate's time corner, without the loss it adds
                    e = estimate_plan(
                        m,
                        make_cluster(gpu, n, memory_headroom=0.0),
                        make_plan(m, 1e11, precision=prec),
                    )
                except TrilemmaError:
                    continue
                best = max(best, (e.time.mfu, name, n, prec))
    return best


#: the sides (M, N and K) of the shape grid the GEMM term is searched over: 128 to 32,768, powers of two and 3×
GEMM_SIDES = tuple(sorted([2.0**k for k in range(7, 16)] + [3 * 2.0**k for k in range(7, 14)]))


def gemm_against_mamf(gpu: str) -> list[tuple[str, float, float, float]]:
    """(precision, model GEMM rate at the MAMF shape, measured MAMF, fastest model GEMM over GEMM_SIDES³), each
    as a fraction of the precision's peak, for each precision ``gpu`` has a measured MAMF for."""
    import numpy as np

    from trilemma.estimate.roofline import gemm_rate
    from trilemma.presets import constants, get_hardware

    hw, c = get_hardware(gpu), constants()
    M, N, K = np.meshgrid(GEMM_SIDES, GEMM_SIDES, GEMM_SIDES, indexing="ij")
    out = []
    for prec, mamf in hw.mamf_flop_per_s.items():
        peak = hw.peak(prec)
        at = float(gemm_rate(hw, prec, *hw.mamf_shape[prec], c)) / peak
        top = float(gemm_rate(hw, prec, M, N, K, c).max()) / peak
        out.append((str(prec), at, mamf / peak, top))
    return out


#: arXiv 2205.05198 (Korthikanti et al. 2022) Table 4: "Time to complete the forward and backward pass of a
#: single transformer layer of the 22B model" (h 6144, 64 heads, s 2048, micro-batch 4, TP 8 on 8 A100-80GB),
#: combined milliseconds by (recompute, sequence parallelism)
KORTHIKANTI_TABLE_4_MS = {
    ("none", False): 19.6,
    ("none", True): 19.0,
    ("full", False): 27.2,
    ("selective", False): 20.9,
    ("selective", True): 20.3,
}


def korthikanti_layer_ms() -> dict[tuple[str, bool], tuple[float, float]]:
    """(recompute, sp) → (the step model's forward + backward milliseconds of one layer, Table 4's): the
    22B throughput row's model and plan at its TP 8, micro-batch 4, each configuration of Table 4 in turn.
    One layer is the layer classes of the compute (GEMMs, attention core, elementwise, launches: the LM
    head and the optimizer left out) plus the exposed TP communication, over the layers of the one stage."""
    import numpy as np

    from trilemma.estimate.evaluate import evaluate
    from trilemma.estimate.layouts import LayoutArrays
    from trilemma.presets import constants
    from trilemma.resolve import make_cluster
    from trilemma.validate.predict import resolve_layout

    consts = constants()
    case = next(
        c
        for c in load_cases("throughput")[0]
        if c.group == "arXiv:2205.05198" and c.model.d_model == 6144 and c.model.n_layers == 48
    )
    base = resolve_layout(case, consts)[0]
    cl = make_cluster(case.hardware, case.n_gpus, memory_headroom=0.0)
    out = {}
    for (rc, sp), ms in KORTHIKANTI_TABLE_4_MS.items():
        lay = base.model_copy(update={"recompute": rc, "sp": sp})
        t = (
            evaluate(case.model, cl, case.plan, LayoutArrays.from_layouts([lay]), consts)
            .stages[0]
            .time
        )
        layer = sum(
            float(np.asarray(v).reshape(-1)[0]) for k, v in t.ops_s.items() if k != "lm_head"
        )
        layer += float(np.asarray(t.tp_comm_s).reshape(-1)[0])
        out[(rc, sp)] = (KILO * layer / case.model.n_layers, ms)  # seconds → milliseconds
    return out


def small_config_errors() -> list[float]:
    """|log(LOSO predicted / reported)| of each small-configuration throughput row (one node, at most
    SMALL_PARAMS parameters), from calibrated.toml's stored leave-one-source-out predictions."""
    from trilemma.presets import calibration_rows

    cases = {(c.kind, c.row): c for c in load_cases("throughput")[0]}
    out = []
    for r in calibration_rows():
        c = cases.get((r["kind"], int(r["row"])))
        if c is None or r.get("loso_predicted") is None:
            continue
        if c.n_gpus <= c.hardware.devices_per_node and param_counts(c.model).total <= SMALL_PARAMS:
            out.append(abs(math.log(r["loso_predicted"] / r["reported"])))
    return out
