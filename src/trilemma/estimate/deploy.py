"""A trained model on a deployment target: memory, decode and prefill speed, energy per token.

Decoding one token at batch 1 reads every weight once and the whole KV cache once: it is bound by
memory bandwidth, not compute (Pope et al. 2022, "Efficiently Scaling Transformer Inference",
arXiv 2211.05102 §2; Kim et al. 2023, "SqueezeLLM", arXiv 2306.07629 §3: "memory wall").

    bytes per token   = weights read × bits per weight / 8 + KV cache read
    decode tokens/s   = η_runtime × bandwidth / bytes per token
    prefill tokens/s  = η_prefill × peak FLOP/s / (2 × N)            (compute-bound, 2 FLOP per weight)
    energy per token  = device power / decode tokens/s

η_runtime (the share of peak bandwidth a runtime class reaches) is fitted on published on-device decode
measurements (data/ondevice.csv; presets/devices.toml [efficiency]). The input embedding of an untied
model is a table lookup: one row is read per token, not the table. Weights at a quantised precision carry
one fp16 scale per group of 32 (ggml Q4_0/Q8_0, MLC-LLM q4f16_1): 4.5 and 8.5 bits per weight.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from trilemma.errors import InputError
from trilemma.presets import deploy_efficiency, get_device
from trilemma.specs.device import DeviceSpec
from trilemma.units import fmt_bytes

#: bits per weight with group scales: 4 or 8 bits + a 16-bit scale per 32 weights (ggml block_q4_0/block_q8_0:
#: 18 and 34 bytes per 32 weights, ggml-common.h; MLC-LLM q4f16_1: group 32, fp16 scale)
GROUP = 32
DEPLOY_BITS = {"int4": 4 + 16 / GROUP, "int8": 8 + 16 / GROUP, "fp16": 16.0}
#: the weights' precision on the device when none is said (--deploy-precision)
DEFAULT_DEPLOY_PRECISION = "int4"
#: bytes per KV-cache element (fp16 cache: llama.cpp's default type_k/type_v f16, MLC-LLM's)
KV_BYTES = 2.0


def kv_cache_bytes(n_layers: int, kv_dim: int, context: float, kv_bytes: float = KV_BYTES) -> float:
    """KV cache of one sequence at ``context`` tokens, bytes: K and V, each n_layers × context × kv_dim
    (kv_dim = KV heads × head dim: GQA/MQA shrink it)."""
    return 2.0 * n_layers * kv_dim * context * kv_bytes


def weight_bytes(params: float, bits_per_weight: float) -> float:
    """Weights stored at ``bits_per_weight`` (scales included), bytes."""
    return params * bits_per_weight / 8.0


def decode_bytes_per_token(
    params_read: float,
    bits_per_weight: float,
    n_layers: int,
    kv_dim: int,
    context: float,
    weights_bytes: float | None = None,
    params_total: float | None = None,
) -> float:
    """Bytes read from memory to decode one token at batch 1: the weights read (all but an untied input
    embedding) and the KV cache at ``context`` tokens. ``weights_bytes`` (a reported file size for
    ``params_total`` weights) replaces params × bits where given."""
    if weights_bytes is not None and params_total:
        w = weights_bytes * params_read / params_total
    else:
        w = weight_bytes(params_read, bits_per_weight)
    return w + kv_cache_bytes(n_layers, kv_dim, context)


def decode_tokens_per_s(
    bandwidth_bytes_per_s: float, efficiency: float, bytes_per_token: float
) -> float:
    """Memory-bound decode rate at batch 1, tokens/s: η × bandwidth / bytes per token."""
    return efficiency * bandwidth_bytes_per_s / bytes_per_token


def prefill_tokens_per_s(peak_flop_per_s: float, efficiency: float, params: float) -> float:
    """Compute-bound prompt processing, tokens/s: η × peak / (2 FLOP per weight per token)."""
    return efficiency * peak_flop_per_s / (2.0 * params)


@dataclass(frozen=True)
class Deployment:
    """A model on a device: memory (bytes), speed (tokens/s), energy (J per token)."""

    device: str
    kind: str
    precision: str
    bits_per_weight: float
    context: int
    weights_bytes: float
    kv_cache_bytes: float
    runtime_bytes: (
        float  # the runtime's share kept free for buffers and activations (runtime_share × usable)
    )
    total_bytes: float
    usable_bytes: float
    usable_source: str
    fits: bool
    margin_bytes: float  # usable − runtime share − weights − KV (negative: does not fit)
    decode_tokens_per_s: float
    decode_tokens_per_s_low: float  # the fit's leave-one-out 80% band
    decode_tokens_per_s_high: float
    prefill_tokens_per_s: float
    energy_per_token_j: float
    bandwidth_efficiency: float
    runtime: str
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d


def deploy(
    params_total: float,
    params_read: float,
    n_layers: int,
    kv_dim: int,
    device: DeviceSpec,
    precision: str,
    context: int,
    efficiency: dict[str, Any],
) -> Deployment:
    """One model on one device at ``precision`` (int4, int8, fp16) with a KV cache of ``context`` tokens.
    ``efficiency``: devices.toml [efficiency] (per-runtime η, runtime_share, prefill, band)."""
    bits = DEPLOY_BITS[precision]
    w = weight_bytes(params_total, bits)
    kv = kv_cache_bytes(n_layers, kv_dim, context)
    share = float(efficiency["runtime_share"])
    runtime = device.usable_bytes * share
    margin = device.usable_bytes - runtime - w - kv
    eta = float(efficiency[device.runtime])
    tps = decode_tokens_per_s(
        device.bandwidth_bytes_per_s,
        eta,
        decode_bytes_per_token(params_read, bits, n_layers, kv_dim, context),
    )
    peak = device.peak_flop_per_s.get(
        "int8" if precision == "int8" and "int8" in device.peak_flop_per_s else "fp16",
        max(device.peak_flop_per_s.values(), default=0.0),
    )
    pre = prefill_tokens_per_s(peak, float(efficiency["prefill"]), params_total) if peak else 0.0
    lo, hi = float(efficiency.get("band_low", 1.0)), float(efficiency.get("band_high", 1.0))
    notes = []
    if "ASSUMED" in device.usable_source:
        notes.append(f"usable memory ASSUMED: {device.usable_source}")
    notes.append(
        f"prefill efficiency {efficiency['prefill']} is ASSUMED (no published prefill rows fitted)"
    )
    return Deployment(
        device=device.name,
        kind=device.kind,
        precision=precision,
        bits_per_weight=bits,
        context=context,
        weights_bytes=w,
        kv_cache_bytes=kv,
        runtime_bytes=runtime,
        total_bytes=w + kv + runtime,
        usable_bytes=device.usable_bytes,
        usable_source=device.usable_source,
        fits=margin >= 0,
        margin_bytes=margin,
        decode_tokens_per_s=tps,
        decode_tokens_per_s_low=tps * lo,
        decode_tokens_per_s_high=tps * hi,
        prefill_tokens_per_s=pre,
        energy_per_token_j=device.power_w / tps,
        bandwidth_efficiency=eta,
        runtime=device.runtime,
        notes=tuple(notes),
    )


#: post-training quantisation's loss penalty, nats/token, where a measurement exists (None: none is applied)
#: int8: llama.cpp's Q8_0 of LLaMA-3-8B on Wikitext-2, PPL 6.234284 against f16's 6.233160 (ggml-org/llama.cpp
#: PR #6936, examples/perplexity documentation): ln(6.234284 / 6.233160) = 0.00018 nats. One model, one corpus:
#: the order of magnitude, not a law. int4: no published law in N and D, and no row of that table in the
#: shipped sources: not applied, and the output says so.
QUANT_LOSS_NATS: dict[str, float | None] = {"fp16": 0.0, "int8": 0.00018, "int4": None}
QUANT_LOSS_SOURCE = {
    "fp16": "the trained weights (bf16/fp16): no quantisation",
    "int8": "llama.cpp PR #6936: LLaMA-3-8B Q8_0 vs f16 on Wikitext-2, ln(PPL ratio) = 0.00018 nats",
    "int4": "no published law or shipped measurement for 4-bit post-training quantisation: not applied",
}


def deploy_model(
    model: Any,
    pc: Any,
    device: DeviceSpec,
    precision: str,
    context: int,
    efficiency: dict[str, Any],
) -> Deployment:
    """``deploy`` for a ModelSpec with its ParamCounts: all weights stored; decode reads the active ones (a MoE
    reads its routed experts only) less an untied input embedding (a lookup of one row)."""
    unread = 0 if model.tied_embeddings else model.vocab_size * model.d_model
    return deploy(
        float(pc.total),
        float(pc.active) - unread,
        model.n_layers,
        model.kv_cache_width / 2,  # the cache's K and V width (MLA: its latent, over 2)
        device,
        precision,
        context,
        efficiency,
    )


def with_deploy(
    est: Any, device: str, precision: str = DEFAULT_DEPLOY_PRECISION, context: int | None = None
) -> Any:
    """The estimate with where the trained model must run: ``device`` (presets/devices.toml, or a hardware
    preset) at ``precision`` (int4, int8, fp16) with a KV cache of ``context`` tokens (default: the plan's
    sequence length) — memory, fits with its margin, decode and prefill tokens/s, energy per token
    (trilemma.estimate.deploy), and the quantisation's loss penalty where one is measured."""

    if precision not in DEPLOY_BITS:
        raise InputError("deploy-precision", precision, ", ".join(DEPLOY_BITS))
    ctx = max(s.seq_len for s in est.plan.stages) if context is None else int(context)
    if ctx < 1:
        raise InputError("context", context, "a positive number of tokens")
    dep = deploy_model(
        est.model, est.params, get_device(device), precision, ctx, deploy_efficiency()
    )
    doc = dep.to_dict()
    pen = QUANT_LOSS_NATS[precision]
    doc["quantisation_loss_nats"] = pen
    doc["quantisation_loss_source"] = QUANT_LOSS_SOURCE[precision]
    if est.loss is not None:
        doc["loss_deployed"] = None if pen is None else est.loss.mean + pen
    warnings = (
        ()
        if dep.fits
        else (
            f"{est.model.name} at {precision} does not fit {dep.device}: it needs "
            f"{fmt_bytes(dep.total_bytes)} of the {fmt_bytes(dep.usable_bytes)} an app may use there",
        )
    )
    return replace(est, deploy=doc, warnings=est.warnings + warnings)


def attach_deploy(
    est: Any, device: str, precision: str = "int4", context: int | str | None = None
) -> Any:
    """The estimate with where the trained model must run (``with_deploy``), its arguments checked:
    an Estimate, and a context of a positive whole number of tokens ("4k" read as 4,096)."""
    from trilemma.estimate.result import Estimate
    from trilemma.units import parse_count

    if not isinstance(est, Estimate):
        raise InputError("estimate", est, "an Estimate (trilemma.api.estimate)")
    if isinstance(context, str):
        context = parse_count(context, "context")
    if context is not None and (
        isinstance(context, bool) or not float(context).is_integer() or context < 1
    ):
        raise InputError("context", context, "a positive whole number of tokens")
    return with_deploy(est, device, precision, None if context is None else int(context))
