"""A fine-tune's step-time terms by hand: LoRA's thin adapter GEMMs at the bandwidth roofline, and the frozen
base's dequantisation as each library runs it (bitsandbytes before every use; AutoGPTQ's torch unpacking
before each forward only, its 16.5 bytes per weight)."""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.estimate.finetune import (
    GPTQ_TORCH_DEQUANT_BYTES,
    base_linear_bytes,
    gptq4_bits_per_weight,
    linear_params_per_layer,
    nf4_bits_per_weight,
)
from trilemma.estimate.layer_ops import finetune_layer_s
from trilemma.estimate.roofline import device_constants
from trilemma.presets import constants, get_hardware
from trilemma.resolve import finetune_fields, make_plan, resolve_model
from trilemma.specs import Precision
from trilemma.validate.finetune import predict_row, rows

T, R = 2048.0, 16


def _layer(method: str, base: str, targets: str = "q_proj") -> tuple:
    """finetune_layer_s of llama2-7b on an A100 80GB, one micro-batch of T tokens, tp 1; and its constants."""
    m, _ = resolve_model("llama2-7b")
    hw = get_hardware("a100-80gb")
    plan = make_plan(
        m, "10M", 2048, 2048 * 8, "bf16",
        **finetune_fields(m, method, lora_rank=R, lora_targets=targets, base_precision=base),
    )  # fmt: skip
    c = device_constants(constants(), hw, Precision.BF16)
    bw = hw.hbm_bw_bytes_per_s * c["hbm"]
    return (
        m,
        c,
        bw,
        finetune_layer_s(m, plan, T, 1.0, hw.peak(Precision.BF16), hw.hbm_bw_bytes_per_s, 2.0, c),
    )


def test_gptq4_bits_per_weight_by_hand() -> None:
    # AutoGPTQ's QuantLinear: 4 bits a weight, an fp16 scale and a 4-bit zero per 128 input rows of a column
    assert gptq4_bits_per_weight() == 4.0 + (16 + 4) / 128 == 4.15625
    assert base_linear_bytes("gptq4", 4096) == pytest.approx(4.15625 / 8)
    assert (
        GPTQ_TORCH_DEQUANT_BYTES == 16.5
    )  # shift 0.5+4, cast 4+1, and 1+1, subtract 1+1, scale 1+2


def test_lora_adapter_gemms_are_memory_bound_at_rank_16() -> None:
    """q_proj's adapter (4096 → 16 → 4096) moves its operands once at the bandwidth: x·Aᵀ reads x (T × d)
    and A, writes T × r; ·Bᵀ reads that and B, writes T × d; then the scale and the add (5 passes of T × d)."""
    m, c, bw, (fwd, bwd, *_rest) = _layer("lora", "bf16")
    d = m.d_model
    a = 2.0 * (T * d + d * R + T * R) / bw
    b = 2.0 * (T * R + R * d + T * d) / bw
    assert float(fwd) == pytest.approx(a + b + 5 * 2.0 * T * d / bw, rel=1e-9)
    assert float(bwd) == pytest.approx(2 * (a + b) + 2 * 2.0 * T * d / bw, rel=1e-9)


def test_gptq_dequantises_by_torch_unpacking_and_not_in_the_backward() -> None:
    """gptq4: 16.5 bytes per weight of the layer plus 5 launches per linear module, in the forward only;
    nf4: bitsandbytes' (stored bytes + the 16-bit copy) per weight, in the backward again."""
    m, c, bw, (_f, bwd_g, dq_g, *_k) = _layer("qlora", "gptq4")
    w = linear_params_per_layer(m)
    assert float(dq_g) == pytest.approx(w * 16.5 / bw + 7 * 5 * c["kernel_s"], rel=1e-9)
    _m, _c, _bw, (_f2, bwd_n, dq_n, *_k2) = _layer("qlora", "nf4")
    assert float(dq_n) == pytest.approx(
        w * (nf4_bits_per_weight() / 8 + 2) / bw + 7 * c["kernel_s"]
    )
    assert float(bwd_n - bwd_g) == pytest.approx(
        float(dq_n), rel=1e-9
    )  # the same adapters otherwise


def test_qwen_7b_gptq_qlora_short_step_within_fifteen_percent() -> None:
    """Qwen's README (QwenLM/Qwen@e6f2a7a, 'Profiling of Memory and Speed'): Qwen-7B Q-LoRA (its GPTQ Int4
    model), 256 tokens, batch 1 × 8 accumulated on one A100 80GB: 3.0 s/it, against LoRA's 1.2 s/it."""
    row = next(r for r in rows() if r["case"] == "qwen-7b qlora 256 Qwen finetune.py")
    assert row["base_precision"] == "gptq4" and float(row["reported_step_s"]) == 3.0
    case = predict_row(row)
    assert abs(case.step_error) <= 0.15, case.predicted_step_s
    assert np.isfinite(case.predicted_gib)
