"""The figures issue 12's floors are stated in, computed from the shipped data and calibration.

- ``measured_mfu``: the best step MFU measured per chip family in the throughput rows (model FLOPs,
  PaLM's convention: MFU rows as reported; TFLOP/s, tokens/s and step times converted with the row's
  own model FLOPs per token), the reference no plan may exceed by more than 5 points.
- ``highest_plan_mfu``: the highest step MFU the planner gives any plan of a fixed sweep (Llama 2
  7B/13B/70B and GPT-3 175B on 64, 512 and 2,048 devices) at given precisions, set against that.
- ``gemm_against_mamf``: the step model's GEMM term set against a chip's measured best matmul (MAMF):
  at the measured shape, and the fastest GEMM it gives over a grid of shapes (which must not beat it).
- ``small_config_errors``: the leave-one-source-out |log(predicted / reported)| of the single-node
  throughput rows of models of at most 2B parameters, as the last calibration stored them.

``benchmarks/time_floors.py`` prints both beside the floors; ``tests/test_step_mfu.py`` asserts them.
"""

from __future__ import annotations

import collections
import math

from trilemma.estimate.flops import model_flop_per_token
from trilemma.estimate.params import param_counts
from trilemma.units import TERA
from trilemma.validate.cases import load_cases

#: single node, at most this many parameters: issue 12's "small configurations"
SMALL_PARAMS = 2e9
#: the plans whose step MFU is set against the measured best: models and device counts
SWEEP_MODELS = ("llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b")
SWEEP_COUNTS = (64, 512, 2048)


def measured_mfu() -> dict[str, float]:
    """The best measured step MFU (0-1) per chip family (``HardwareSpec.family``), from the shipped
    throughput rows."""
    best: dict[str, float] = collections.defaultdict(float)
    for c in load_cases("throughput")[0]:
        st = c.plan.stages[0]
        peak = c.hardware.peak(c.plan.precision)
        per_token = float(model_flop_per_token(c.model, st.seq_len, param_counts(c.model)))
        if c.metric == "mfu":
            v = c.reported
        elif c.metric == "model_tflops_per_gpu":
            v = c.reported * TERA / peak
        elif c.metric == "tokens_per_s_per_gpu":
            v = c.reported * per_token / peak
        elif c.metric == "step_s":
            v = st.global_batch_tokens * per_token / (c.reported * c.n_gpus * peak)
        else:  # hardware FLOPs count recomputation: not comparable with model FLOPs
            continue
        best[c.hardware.family] = max(best[c.hardware.family], v)
    return dict(best)


def highest_plan_mfu(gpu: str, precisions: tuple[str, ...] = ("bf16",)) -> tuple[float, str, int, str]:
    """(step MFU 0-1, model, devices, precision) of the sweep's plan with the highest MFU on ``gpu``: 1e11
    tokens, every plan that fits physically (memory headroom 0, not only those the band's margin admits);
    a precision and count at which nothing fits is passed over. (0, "", 0, "") when none fits."""
    from trilemma.errors import TrilemmaError
    from trilemma.estimate.choose import estimate_plan
    from trilemma.specs.build import make_cluster, make_plan, resolve_model

    best = (0.0, "", 0, "")
    for prec in precisions:
        for name in SWEEP_MODELS:
            m = resolve_model(name)[0]
            for n in SWEEP_COUNTS:
                try:  # trilemma.api.estimate's time corner, without the loss it adds
                    e = estimate_plan(m, make_cluster(gpu, n, memory_headroom=0.0), make_plan(m, 1e11, precision=prec))
                except TrilemmaError:
                    continue
                best = max(best, (e.time.mfu, name, n, prec))
    return best


#: the sides (M, N and K) of the shape grid the GEMM term is searched over: 128 to 32,768, powers of two and 3×
GEMM_SIDES = tuple(sorted([2.0 ** k for k in range(7, 16)] + [3 * 2.0 ** k for k in range(7, 14)]))


def gemm_against_mamf(gpu: str) -> list[tuple[str, float, float, float]]:
    """(precision, model GEMM rate at the MAMF shape, measured MAMF, fastest model GEMM over GEMM_SIDES³), each
    as a fraction of the precision's peak, for each precision ``gpu`` has a measured MAMF for."""
    import itertools

    from trilemma.estimate.time import gemm_rate
    from trilemma.presets import constants, get_hardware

    hw, c = get_hardware(gpu), constants()
    out = []
    for prec, mamf in hw.mamf_flop_per_s.items():
        peak = hw.peak(prec)
        at = gemm_rate(hw, prec, *hw.mamf_shape[prec], c) / peak
        top = max(gemm_rate(hw, prec, M, N, K, c) for M, N, K in itertools.product(GEMM_SIDES, repeat=3)) / peak
        out.append((str(prec), at, mamf / peak, top))
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
