"""The parsers of the request fields: text as a user types it (``4k``, ``$2.5``, ``450GB/s``, ``10%``)
→ the typed value a request holds, each refusal one ``InputError`` naming the flag.

The units themselves are read by :mod:`trilemma.units`; the bounds of a value are stated by the spec
that holds it (:mod:`trilemma.specs.bounds`), except where a value is used before a spec is built.
"""

from __future__ import annotations

import math
import re
from typing import Any

from trilemma.errors import InputError
from trilemma.specs.axes import MAX_DEGREE
from trilemma.specs.bounds import BOUNDS, FAILURE_RATE_ALLOWED, MAX_SEQ
from trilemma.units import (
    BATCH_ALLOWED,
    IEC,
    GlobalBatch,
    fmt_power,
    parse_bandwidth,
    parse_batch,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_power,
    parse_usd,
)

#: the most host power per node, W (a DGX H100 draws ~10 kW in all; 1 MW is a typo)
MAX_HOST_POWER_W = 1e6
HEADROOM_ALLOWED = "a fraction in [0, 1) or a percentage, e.g. 0.1 or 10%"


def whole(text: Any, field: str, most: int | None = MAX_DEGREE) -> int | None:
    """A positive whole number (GPUs, degrees, tokens per batch); at most ``most`` (None: the spec
    that takes it states the bound)."""
    if text is None:
        return None
    v = parse_count(text, field)
    if v != int(v) or (most is not None and v > most):
        raise InputError(field, text, f"a positive whole number (at most {most or MAX_DEGREE:,})")
    return int(v)


def batch(text: Any, field: str = "global-batch") -> GlobalBatch | None:
    """A global batch in tokens (``4M``, ``4Mi``) or sequences (``1024seq``): trilemma.units.parse_batch,
    at most MAX_DEGREE of its unit."""
    if text is None:
        return None
    b = parse_batch(text, field)
    if b.amount > MAX_DEGREE:
        raise InputError(field, text, f"at most {MAX_DEGREE:,} {b.unit}: " + BATCH_ALLOWED)
    return b


def choice(text: str, field: str, choices: tuple[str, ...]) -> str:
    """One of ``choices``, as typed in any case and with spaces around it; InputError naming
    ``field`` and listing them otherwise."""
    value = text.strip().lower()
    if value not in choices:
        raise InputError(field, value, f"{', '.join(choices[:-1])} or {choices[-1]}")
    return value


def seq(text: Any, field: str = "seq") -> int | None:
    """A sequence length in tokens; 4k / 8K / 32k are 4,096 / 8,192 / 32,768, as context lengths are
    named (binary), not 4,000."""
    if text is not None and re.fullmatch(r"\d+[kK]", str(text).strip()):
        return int(str(text).strip()[:-1]) * int(IEC["Ki"])
    if field != "seq":
        return whole(text, field, most=MAX_SEQ)
    return BOUNDS["seq_len"].check(whole(text, field, most=None))  # Stage.seq_len's bound


def number(text: Any, field: str) -> float:
    """A finite number; a one-line error naming ``field`` otherwise."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise InputError(field, text, "a number") from None
    if not math.isfinite(v):
        raise InputError(field, text, "a finite number")
    return v


def inference_tokens(value: Any) -> float | None:
    """A token count such as 10T, or 0 (none: training cost only, overriding a scenario's)."""
    if value is None:
        return None
    if str(value).strip() in ("0", "0.0"):
        return 0.0
    return parse_count(value, "inference-tokens")


def stack(text: str) -> str:
    """A software stack preset's canonical name (trilemma.presets.stack: an unknown name is one
    InputError naming the known stacks)."""
    from trilemma.presets import stack as preset

    return preset(text).name


def trainer(text: str) -> str:
    """A fine-tuning trainer preset's canonical name (trilemma.presets.trainer: an unknown name is one
    InputError naming the known trainers)."""
    from trilemma.presets import trainer as preset

    return preset(text).name


def softmax_passes(v: int) -> int:
    """Within TrainingPlan.softmax_passes's bounds, else a one-line error naming the flag."""
    from trilemma.specs import TrainingPlan

    bounds = {
        k: getattr(c, k)
        for c in TrainingPlan.model_fields["softmax_passes"].metadata
        for k in ("ge", "le")
        if hasattr(c, k)
    }
    if not bounds["ge"] <= v <= bounds["le"]:
        raise InputError(
            "softmax-passes",
            v,
            f"a whole number from {bounds['ge']} (a fused softmax) to {bounds['le']}",
        )
    return v


def task(v: Any) -> Any:
    """causal-lm or classification (trilemma.specs.Task), else a one-line error."""
    from trilemma.specs import Task

    key = str(v).strip().lower()
    if key not in {t.value for t in Task}:
        raise InputError("task", v, " or ".join(t.value for t in Task))
    return Task(key)


def precision(v: Any) -> Any:
    """One precision (trilemma.specs.Precision), any case."""
    from trilemma.specs import Precision

    try:
        return Precision(str(v).lower())
    except ValueError:
        raise InputError("precision", v, "bf16, fp16, fp32, tf32 or fp8") from None


def headroom(value: Any) -> float | None:
    """A share of device memory in [0, 1): 0.1 or 10%."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        h = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise InputError("memory-headroom", value, HEADROOM_ALLOWED) from None
    if not 0 <= h < 1:
        raise InputError("memory-headroom", value, HEADROOM_ALLOWED)
    return h


def price(text: Any) -> float:
    """Dollars per GPU-hour (its bounds: ClusterSpec.price_usd_per_hour)."""
    return parse_usd(text, "price")


def link(text: Any, field: str) -> float:
    """Bytes/s per device of a link (bounds: ClusterSpec's link fields)."""
    return parse_bandwidth(text, field)


def failure_rate(text: Any) -> float:
    """Unexpected interruptions per GPU-hour (bounds: ClusterSpec.failures_per_gpu_hour)."""
    try:
        return float(str(text).strip())
    except ValueError:
        raise InputError("failure-rate", text, FAILURE_RATE_ALLOWED) from None


def restart(text: Any) -> float:
    """Seconds from a failure to training again (bounds: ClusterSpec.restart_s)."""
    return parse_duration(text, "restart")


def storage_bw(text: Any) -> float:
    """The job's checkpoint write bandwidth, bytes/s (bounds: ClusterSpec)."""
    return parse_bandwidth(text, "storage-bw")


def host_memory(text: Any) -> float:
    """Host memory per node, bytes."""
    return parse_bytes(text, "host-memory")


def host_power(text: Any) -> float:
    """Watts per node, from 0 to MAX_HOST_POWER_W."""
    value = parse_power(text, "host-power")
    if value > MAX_HOST_POWER_W:
        raise InputError("host-power", text, f"at most {fmt_power(MAX_HOST_POWER_W)} per node")
    return value


def max_power(text: Any) -> float:
    """The site's facility power, W: above 0, e.g. 20MW (trilemma.units.parse_power)."""
    value = parse_power(text, "max-power")
    if not value > 0:
        raise InputError("max-power", text, "a power above 0 W, e.g. 20MW")
    return value


def lora_alpha(text: Any) -> float:
    """LoRA's alpha, a number."""
    try:
        return float(text)
    except ValueError:
        raise InputError("lora-alpha", text, "a positive number, e.g. 16 or 32") from None


def prices(price_: object, gpu: object) -> dict[str, float] | None:
    """``a100-80gb=1.5`` items (a list, or a dict of name → price), or one bare price for every GPU
    type searched: USD per GPU-hour by hardware name."""
    from trilemma.presets import hardware_presets
    from trilemma.resolve import resolve_hardware

    if not price_:
        return None
    items = [price_] if isinstance(price_, (str, int, float)) else list(price_)  # type: ignore[call-overload]
    if isinstance(price_, dict):
        items = [f"{k}={v}" for k, v in price_.items()]
    out: dict[str, float] = {}
    names = (
        [s for g in (gpu.split(",") if isinstance(gpu, str) else gpu) if (s := str(g).strip())]  # type: ignore[union-attr]
        if gpu
        else []
    )
    searched = {resolve_hardware(n).name for n in names} if names else None
    for item in items:
        text = str(item)
        if "=" in text:
            name, _, value = text.partition("=")
            hw = resolve_hardware(name.strip()).name
            if hw in out:
                raise InputError("price", text, f"one price for {hw} (it was given twice)")
            if searched is not None and hw not in searched:
                raise InputError(
                    "price",
                    text,
                    f"a price for a GPU type searched ({', '.join(sorted(searched))})",
                )
            out[hw] = price(value)
        else:
            value = price(text)
            for n in searched if searched is not None else hardware_presets():
                out[resolve_hardware(n).name] = value
    return out
