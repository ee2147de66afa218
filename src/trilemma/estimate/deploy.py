"""A trained model on a deployment target under a runtime: memory, decode and prefill speed, energy.

Decoding one token at batch 1 reads every weight once and the whole KV cache once: it is bound by
memory bandwidth, not compute (Pope et al. 2022, "Efficiently Scaling Transformer Inference",
arXiv 2211.05102 §2; Kim et al. 2023, "SqueezeLLM", arXiv 2306.07629 §3: "memory wall").

    bytes per token   = weights read × bits per weight / 8 + KV cache read
    decode s/token    = bytes per token / (share × bandwidth) + fixed cost per token
    prefill s/prompt  = max(2 × N × prompt / (prefill share × unit peak), weights / (share × bandwidth))
    energy per token  = device power / decode tokens/s (per answer, per charge: trilemma.estimate.device_energy)

The runtime (presets/runtimes.toml) says which compute unit runs prefill and decode, the share of peak
bandwidth it reaches, its fixed cost per token and its prefill share of the unit's peak, each fitted on
published rows (data/ondevice.csv; trilemma.validate.ondevice). An untied input embedding reads one row per
token. Weight formats (presets/weight_formats.toml) carry their scales: ggml Q4_0 is 4.5 bits per weight.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from trilemma.errors import InputError
from trilemma.estimate.device_energy import energy_fields
from trilemma.presets import (
    deploy_efficiency,
    get_device,
    get_format,
    get_runtime,
    runtime_presets,
)
from trilemma.specs.device import DeviceSpec
from trilemma.specs.runtime import RuntimeSpec, WeightFormat
from trilemma.units import fmt_bytes

#: bits per weight of the generic formats (presets/weight_formats.toml int4, int8, fp16)
DEPLOY_BITS = {"int4": 4 + 16 / 32, "int8": 8 + 16 / 32, "fp16": 16.0}
#: the weights' precision on the device when neither it nor a runtime is said (--deploy-precision)
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


def reached_bandwidth(
    bandwidth_bytes_per_s: float, share: float, ceiling_bytes_per_s: float | None = None
) -> float:
    """The bandwidth a runtime reads weights at, bytes/s: its share of the device's peak, or at most the
    ceiling of a unit with a memory path of its own (RuntimeSpec.ceiling_bound)."""
    reached = share * bandwidth_bytes_per_s
    return reached if ceiling_bytes_per_s is None else min(reached, ceiling_bytes_per_s)


def decode_tokens_per_s(
    bandwidth_bytes_per_s: float, share: float, bytes_per_token: float, per_token_s: float = 0.0
) -> float:
    """Memory-bound decode rate at batch 1, tokens/s: 1 / (bytes / (share × bandwidth) + fixed cost)
    (``share × bandwidth``: reached_bandwidth, with ``share`` 1 where it is already reached)."""
    return 1.0 / (bytes_per_token / (share * bandwidth_bytes_per_s) + per_token_s)


def prefill_tokens_per_s(
    peak_flop_per_s: float,
    prefill_share: float,
    params_read: float,
    prompt_tokens: float,
    weights_read_s: float = 0.0,
    serial: bool = False,
) -> float:
    """Prompt processing, tokens/s: 2 FLOP per weight per token at the share of the unit's peak, and one
    pass over the weights (``weights_read_s``, s), overlapped, or first where ``serial`` (ceiling_bound)."""
    compute_s = 2.0 * params_read * prompt_tokens / (prefill_share * peak_flop_per_s)
    both = compute_s + weights_read_s if serial else max(compute_s, weights_read_s)
    return prompt_tokens / both


def runtime_for(device: DeviceSpec, runtime: str | None) -> RuntimeSpec:
    """The runtime named (or the device's own), refused where the device lacks its chip maker or unit."""
    rt = get_runtime(device.runtime if runtime is None else runtime)
    ok = [r.name for r in runtime_presets().values() if _runs_on(r, device)]
    if not _runs_on(rt, device):
        raise InputError(
            "runtime", runtime, f"a runtime that runs on {device.name}: {', '.join(ok)}"
        )
    return rt


def _runs_on(rt: RuntimeSpec, device: DeviceSpec) -> bool:
    vendor = not rt.chip_vendors or any(v.lower() in device.chip.lower() for v in rt.chip_vendors)
    npu = "npu" not in (rt.prefill_unit, rt.decode_unit) or device.npu_flop_per_s > 0
    return vendor and npu


def format_for(rt: RuntimeSpec, precision: str | None) -> WeightFormat:
    """The weight format named (or the runtime's default), refused where the runtime does not run it."""
    fmt = get_format(rt.default_format if precision is None else precision)
    if fmt.name not in rt.formats:
        raise InputError(
            "deploy-precision", precision, f"a format of {rt.name}: {', '.join(rt.formats)}"
        )
    return fmt


def runtime_constants(rt: RuntimeSpec, efficiency: dict[str, Any]) -> dict[str, Any]:
    """The runtime's fitted share, fixed cost per token and prefill share, or — for a runtime without
    published rows — the pooled fit of its units ([efficiency.pooled], devices.toml) and the wider band."""
    pooled = efficiency.get("pooled", {})
    dec, pre = pooled.get(rt.decode_unit, {}), pooled.get(rt.prefill_pool, {})
    own = rt.fit_rows > 0 and (rt.bandwidth_share or rt.bandwidth_ceiling_bytes_per_s) is not None
    tag = "" if own else "_loro"
    ceiling = (
        rt.bandwidth_ceiling_bytes_per_s if own else pooled.get("ceiling", {}).get(rt.decode_unit)
    )
    return {
        "share": 1.0
        if rt.ceiling_bound
        else rt.bandwidth_share
        if own
        else float(dec["bandwidth_share"]),
        "ceiling": float(ceiling) if rt.ceiling_bound and ceiling else None,
        "per_token_s": (rt.per_token_s or 0.0) if own else float(dec["per_token_s"]),
        "prefill_share": rt.prefill_share
        if rt.prefill_share is not None
        else pre.get("prefill_share"),
        "own_fit": own,
        "band": (float(efficiency["band_low" + tag]), float(efficiency["band_high" + tag])),
    }


@dataclass(frozen=True)
class Deployment:
    """A model on a device under a runtime: memory (bytes), speed (tokens/s), energy (J per token)."""

    device: str
    kind: str
    runtime: str
    prefill_unit: str
    decode_unit: str
    precision: str  # the weight format (presets/weight_formats.toml)
    precision_class: str  # int2, int3, int4, int8 or fp16
    bits_per_weight: float
    context: int
    weights_bytes: float
    kv_cache_bytes: float
    runtime_bytes: (
        float  # the runtime's share kept free for buffers and activations (share × usable)
    )
    total_bytes: float
    usable_bytes: float
    usable_source: str
    fits: bool
    margin_bytes: float  # usable − runtime share − weights − KV (negative: does not fit)
    decode_tokens_per_s: float
    decode_tokens_per_s_low: float  # the 80% band of the held-out fit (by row, or by runtime)
    decode_tokens_per_s_high: float
    prefill_tokens_per_s: (
        float | None
    )  # a prompt of ``context`` tokens; None: no peak known for the unit
    energy_per_token_j: float
    energy_per_answer_j: (
        float  # a chat answer (ANSWER_*_TOKENS): its prompt's prefill and its decode
    )
    energy_per_answer_j_low: (
        float  # at the decode band's fast end (trilemma.estimate.device_energy)
    )
    energy_per_answer_j_high: float  # at its slow end
    battery_wh: float | None  # the battery's rated energy (None: no battery, or none published)
    battery_source: str
    answers_per_charge: float | None  # battery Wh × 3600 / J per answer, with its band
    answers_per_charge_low: float | None
    answers_per_charge_high: float | None
    bandwidth_efficiency: float  # the runtime's share of peak bandwidth in decode
    per_token_s: float  # the runtime's fixed cost per generated token
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
    fmt: WeightFormat,
    context: int,
    efficiency: dict[str, Any],
    rt: RuntimeSpec,
    head_extra_bytes: tuple[float, float] = (0.0, 0.0),
) -> Deployment:
    """One model on one device under runtime ``rt`` at weight format ``fmt`` with a KV cache (and a prompt)
    of ``context`` tokens. ``efficiency``: devices.toml [efficiency] (memory share, bands, pooled fits).
    ``head_extra_bytes``: bytes the format adds for its embedding and output layer (stored, read per token)."""
    bits = fmt.bits_per_weight
    w = weight_bytes(params_total, bits) + head_extra_bytes[0]
    kv = kv_cache_bytes(n_layers, kv_dim, context)
    runtime = device.usable_bytes * float(efficiency["runtime_share"])
    margin = device.usable_bytes - runtime - w - kv
    c = runtime_constants(rt, efficiency)
    read = (
        decode_bytes_per_token(params_read, bits, n_layers, kv_dim, context) + head_extra_bytes[1]
    )
    bw = reached_bandwidth(device.bandwidth_bytes_per_s, c["share"], c["ceiling"])
    tps = decode_tokens_per_s(bw, 1.0, read, c["per_token_s"])
    peak = device.unit_peak_flop_per_s(rt.prefill_unit)
    pre = None
    if peak and c["prefill_share"]:
        once = (weight_bytes(params_read, bits) / bw, rt.ceiling_bound)  # s; read before computing
        pre = prefill_tokens_per_s(peak, float(c["prefill_share"]), params_read, context, *once)
    lo, hi = c["band"]
    notes = []
    if "ASSUMED" in device.usable_source:
        notes.append(f"usable memory ASSUMED: {device.usable_source}")
    if "power ASSUMED" in device.source:
        notes.append(
            f"energy: {device.name}'s {device.power_w:g} W draw is ASSUMED (no published measurement)"
        )
    if not c["own_fit"]:
        notes.append(
            f"{rt.name} has no published rows: the pooled fit of {rt.decode_unit} runtimes, with the "
            "leave-one-runtime-out band"
        )
    if not peak:
        notes.append(f"prefill not predicted: no {rt.prefill_unit} peak known for {device.name}")
    elif pre is None:
        notes.append(f"prefill not predicted: no published prefill row on an {rt.prefill_unit}")
    return Deployment(
        device=device.name,
        kind=device.kind,
        runtime=rt.name,
        prefill_unit=rt.prefill_unit,
        decode_unit=rt.decode_unit,
        precision=fmt.name,
        precision_class=fmt.precision,
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
        **energy_fields(device, tps, (tps * lo, tps * hi), pre),
        bandwidth_efficiency=bw / device.bandwidth_bytes_per_s,
        per_token_s=c["per_token_s"],
        notes=tuple(notes),
    )


#: Wikitext-2 perplexity of LLaMA-3-8B per llama.cpp format, no importance matrix unless said (ggml-org/llama.cpp
#: examples/perplexity/README.md, "LLaMA 3 quantization scoreboard", CUDA on an RTX 4090; PR #6936): f16
#: 6.233160, q8_0 6.234284, q6_K 6.253382, q4_K_M 6.407115, q4_0 6.700147, q3_K_M 6.888498, q2_K 9.751568,
#: iq2_XS 10.761424 (imatrix WT 10m: the format is made with one). One model, one corpus: the order of
#: magnitude of a format's loss, not a law in N and D.
LLAMA3_8B_PPL = {
    "fp16": 6.233160,
    "q8_0": 6.234284,
    "q6_k": 6.253382,
    "q4_k_m": 6.407115,
    "q4_0": 6.700147,
    "q3_k_m": 6.888498,
    "q2_k": 9.751568,
    "iq2_xs": 10.761424,
}
#: a generic format measured as the llama.cpp one with its block layout (int8 = q8_0: 8 bits + fp16 scale per 32)
MEASURED_AS = {"int8": "q8_0"}
PPL_SOURCE = "llama.cpp examples/perplexity (PR #6936): LLaMA-3-8B {} against f16 on Wikitext-2, ln(PPL ratio)"


def quantisation_loss(fmt: WeightFormat) -> tuple[float | None, str]:
    """Post-training quantisation's loss penalty, nats/token: ln(PPL_format / PPL_f16) where llama.cpp's
    table measures the format (LLAMA3_8B_PPL), 0 for 16-bit weights, else None (not applied) and why."""
    if fmt.precision == "fp16":
        return 0.0, "the trained weights (bf16/fp16): no quantisation"
    name = MEASURED_AS.get(fmt.name, fmt.name)
    if name in LLAMA3_8B_PPL:
        return math.log(LLAMA3_8B_PPL[name] / LLAMA3_8B_PPL["fp16"]), PPL_SOURCE.format(name)
    return None, f"no published measurement for {fmt.name} post-training quantisation: not applied"


def deploy_model(
    model: Any,
    pc: Any,
    device: DeviceSpec,
    fmt: WeightFormat,
    context: int,
    efficiency: dict[str, Any],
    rt: RuntimeSpec,
) -> Deployment:
    """``deploy`` for a ModelSpec with its ParamCounts: all weights stored; decode reads the active ones (a MoE
    reads its routed experts only) less an untied input embedding (a lookup of one row)."""
    head = float(model.vocab_size * model.d_model)
    unread = 0 if model.tied_embeddings else head
    return deploy(
        float(pc.total),
        float(pc.active) - unread,
        model.n_layers,
        model.kv_cache_width / 2,  # the cache's K and V width (MLA: its latent, over 2)
        device,
        fmt,
        context,
        efficiency,
        rt,
        head_bytes(fmt, head, model.tied_embeddings),
    )


def head_bytes(fmt: WeightFormat, head: float, tied: bool) -> tuple[float, float]:
    """Bytes a format adds (stored, read per token) by keeping the vocab × d_model tables at its head bits:
    the embedding and the output layer (two tables where untied or where the format unties them)."""
    if fmt.head_bits_per_weight is None:
        return 0.0, 0.0
    diff = (fmt.head_bits_per_weight - fmt.bits_per_weight) / 8.0
    tables = 1 if tied and not fmt.untied_head else 2
    stored = head * (fmt.head_bits_per_weight / 8.0 if tied and tables == 2 else 0.0)
    # the tables already counted at the format's bits move to the head bits; an untied copy is added
    return head * diff * (1 if tied else 2) + stored, head * diff


def resolve_target(
    device: str, runtime: str | None = None, precision: str | None = None
) -> tuple[DeviceSpec, RuntimeSpec, WeightFormat]:
    """(device, runtime, format) by name: the device's own runtime and the runtime's default format where
    none is named; one line listing the known (or compatible) names where one is unknown."""
    dev = get_device(device)
    rt = runtime_for(dev, runtime)
    return dev, rt, format_for(rt, precision)


def with_deploy(
    est: Any,
    device: str,
    precision: str | None = None,
    context: int | None = None,
    runtime: str | None = None,
) -> Any:
    """The estimate with where the trained model must run: ``device`` (presets/devices.toml, or a hardware
    preset) under ``runtime`` (presets/runtimes.toml; default the device's) at weight format ``precision``
    (default the runtime's) with a KV cache and a prompt of ``context`` tokens (default: the plan's sequence
    length) — memory, fits with its margin, decode and prefill tokens/s, energy per token, and the
    quantisation's loss penalty where one is measured."""
    dev, rt, fmt = resolve_target(device, runtime, precision)
    ctx = max(s.seq_len for s in est.plan.stages) if context is None else int(context)
    if ctx < 1:
        raise InputError("context", context, "a positive number of tokens")
    dep = deploy_model(est.model, est.params, dev, fmt, ctx, deploy_efficiency(), rt)
    doc = dep.to_dict()
    pen, why = quantisation_loss(fmt)
    doc["quantisation_loss_nats"] = pen
    doc["quantisation_loss_source"] = why
    if est.loss is not None:
        doc["loss_deployed"] = None if pen is None else est.loss.mean + pen
    warnings = (
        ()
        if dep.fits
        else (
            f"{est.model.name} at {fmt.name} does not fit {dep.device}: it needs "
            f"{fmt_bytes(dep.total_bytes)} of the {fmt_bytes(dep.usable_bytes)} an app may use there",
        )
    )
    return replace(est, deploy=doc, warnings=est.warnings + warnings)
