"""This machine as a hardware profile: the measured figures (no torch here) and the ``local``
HardwareSpec built from them, saved in the user's config directory so that
``trilemma estimate --gpu local`` and ``trilemma presets hardware`` see it.

What is measured and what is a stated estimate (each is written into the profile's ``source``
and ``notes``):

- measured: dense matmul peak per precision (best rate over sizes; the whole curve is kept
  under ``measured``), memory bandwidth (copy, read + write), the link between local processes
  (CPU: one TCP stream over loopback, which gloo uses, or, once a probe has run several processes,
  gloo's own all-reduce between two of them, latency and bus bandwidth, which then times the
  collectives: ``probe.collective``; GPU: host-to-device copy), memory capacity (RAM on a CPU, device
  memory on a GPU);
- stated: board power (CPU: 10 W per core; a known GPU: its datasheet), price (a placeholder:
  a machine you own has no list price), one device per node.

No constant of the planner is fitted on training runs here: the profile holds what the machine
does, and the probe's comparison then tests the planner against measured training steps. One
thing is derived from the matmul curve, on a CPU only: the GEMM efficiency shape
(``gemm_efficiency``'s ceiling and half-dimension, fitted to the measured rate by size; see
``gemm_constants``). The calibrated constants come from datacentre GPUs with 100-300 FLOP per
byte of memory bandwidth; a CPU has ~5, where the calibrated balance power law would claim more
than 100% of peak and the GPU-shaped half-dimension (~200) would make a 256-wide matmul slow,
neither of which the measured curve shows.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from trilemma.errors import UnknownPresetError
from trilemma.fileio import write_text_atomic
from trilemma.presets import USER_PROFILE_SCHEMA, get_hardware, hardware_presets, user_config_dir
from trilemma.probe.collective import GlooAllReduce
from trilemma.probe.dispatch import HostDispatch, host_constants
from trilemma.probe.saturating import saturating_fit
from trilemma.specs import HardwareSpec
from trilemma.specs.hardware import (
    COLLECTIVE_BUS_BW_KEY,
    COLLECTIVE_LATENCY_KEY,
    UNKNOWN_FAMILY,
)
from trilemma.units import GIGA

__all__ = [
    "Conditions",
    "MachineMeasurement",
    "MatmulCurve",
    "datasheet_match",
    "local_hardware",
    "profile_path",
    "save_local_profile",
]

CPU_WATTS_PER_CORE = (
    10.0  # stated estimate for a server core under load, uncore and memory included
)
CPU_PRICE_PER_CORE_HOUR = 0.02  # placeholder, USD (cloud vCPUs rent for roughly 0.02-0.05 per hour)
GPU_FALLBACK_WATTS = 300.0
GPU_FALLBACK_PRICE = 1.0


@dataclass(frozen=True)
class MatmulCurve:
    precision: str
    sizes: tuple[int, ...]
    flop_per_s: tuple[float, ...]

    @property
    def peak(self) -> float:
        return max(self.flop_per_s)


@dataclass(frozen=True)
class Conditions:
    """What the machine was doing while it was measured (``trilemma.probe.bench.machine``): a measurement
    made on a busy machine holds the neighbours' work, so it says so and is re-measured once idle."""

    load_1min: (
        float | None
    )  # os.getloadavg()[0] before measuring (runnable tasks, 1-minute average); None off Unix
    cpus: int  # usable cores the load is compared with
    others_cpu_share: (
        float | None
    )  # other processes' share 0-1 of all cores' time, sampled before measuring
    others_cpu_share_during: float | None  # the same, over the measurement itself
    busy: bool
    why: str  # what made it busy ("" when idle)
    cpu_model_hash: str  # sha256 of the CPU (or GPU) model name, first 16 hex digits

    @classmethod
    def from_dict(cls, d: dict | None) -> Conditions | None:
        return None if d is None else cls(**d)


@dataclass(frozen=True)
class MachineMeasurement:
    """One measurement of this machine (``trilemma.probe.bench``); the cache file of them carries ``SCHEMA``."""

    SCHEMA: ClassVar[str] = "trilemma.machine/1"

    device: str  # "cpu" or "cuda"
    device_name: str
    cores: int
    threads: int  # CPU threads the measurement used (a process's share under --nproc)
    torch_version: str
    memory_bytes: float  # RAM (CPU) or device memory (GPU)
    memory_bw_bytes_per_s: float
    link_bw_bytes_per_s: float
    link_kind: str
    matmul: dict[str, MatmulCurve] = field(default_factory=dict)
    # resident memory a training process grows by beyond its tensors (CPU: oneDNN/MKL scratch, OpenMP
    # threads, code paged in), bytes, from a one-layer model's steps; 0: not measured
    runtime_memory_bytes: float = 0.0
    # how runtime_memory_bytes was measured (trilemma.probe.bench.RUNTIME_MEMORY_METHOD); another method's
    # figure is measured again
    runtime_memory_method: str = ""
    measured_at: str = ""
    seconds: float = 0.0  # time spent measuring (this call; 0 from the cache)
    from_cache: bool = False
    conditions: Conditions | None = None  # None: measured before conditions were recorded (stale)
    remeasured_because: str = (
        ""  # why the cached measurement was not used ("" when there was none, or it was)
    )
    host_dispatch: HostDispatch | None = None  # None: not measured (a cache from before it was)
    # gloo's all-reduce between two local processes at these threads (CPU; None: not measured, as on a
    # run of one process)
    collective: GlooAllReduce | None = None

    def peak(self, precision: str) -> float:
        return self.matmul[precision].peak

    def to_dict(self) -> dict:
        d = asdict(self)
        d["matmul"] = {
            k: {"sizes": list(v.sizes), "flop_per_s": list(v.flop_per_s), "peak": v.peak}
            for k, v in self.matmul.items()
        }
        return d

    @classmethod
    def from_dict(cls, d: dict) -> MachineMeasurement:
        mm = {
            k: MatmulCurve(k, tuple(v["sizes"]), tuple(v["flop_per_s"]))
            for k, v in d.get("matmul", {}).items()
        }
        return cls(
            **{
                **{
                    k: v
                    for k, v in d.items()
                    if k not in ("matmul", "conditions", "host_dispatch", "collective")
                },
                "matmul": mm,
                "conditions": Conditions.from_dict(d.get("conditions")),
                "host_dispatch": HostDispatch.from_dict(d.get("host_dispatch")),
                "collective": GlooAllReduce.from_dict(d.get("collective")),
            }
        )


def datasheet_match(device_name: str) -> HardwareSpec | None:
    """The packaged preset of a GPU from its driver name ("NVIDIA H100 80GB HBM3" -> h100-sxm):
    the longest leading run of the name's words that names a preset or an alias."""
    words = (
        device_name.lower()
        .replace("nvidia", " ")
        .replace("amd", " ")
        .replace("instinct", " ")
        .split()
    )
    words = [w for w in "-".join(words).split("-") if w]
    for n in range(len(words), 0, -1):
        try:
            hw = get_hardware("-".join(words[:n]))
        except UnknownPresetError:
            continue
        return hw if hw.name in hardware_presets() else None
    return None


def local_hardware(meas: MachineMeasurement, name: str = "local", share: int = 1) -> HardwareSpec:
    """A HardwareSpec from measurements. ``share`` > 1 describes one of ``share`` processes that
    split this machine (measured at that process's thread count) for the planner's DP prediction."""
    peaks = {p: c.peak for p, c in sorted(meas.matmul.items())}
    curves = "; ".join(
        f"{p}: " + ", ".join(f"{n}³ {r / GIGA:.0f}" for n, r in zip(c.sizes, c.flop_per_s))
        for p, c in sorted(meas.matmul.items())
    )
    measured = (
        f"measured by `trilemma probe` on {meas.measured_at} (torch {meas.torch_version}, "
        f"{meas.threads} thread{'s' if meas.threads > 1 else ''}): dense matmul peak per precision "
        f"(best over sizes), copy bandwidth (read + write), link = {meas.link_kind}"
        + (", host seconds per eager operator" if meas.host_dispatch else "")
    )
    facts = _gpu_facts(meas) if meas.device == "cuda" else _cpu_facts(meas)
    host, host_said = host_constants(meas.host_dispatch)
    part = (f" — one of {share} processes sharing it" if share > 1 else "") + (
        f", {meas.threads} of its cores"
        if meas.device == "cpu" and meas.threads != meas.cores
        else ""
    )
    return HardwareSpec.build(
        prefix="local hardware profile",
        name=name,
        vendor=facts["vendor"],
        family=facts["family"],
        peak_flop_per_s=peaks,
        hbm_bytes=meas.memory_bytes / share,
        hbm_bw_bytes_per_s=meas.memory_bw_bytes_per_s,
        intra_node_bw_bytes_per_s=facts["intra"],
        inter_node_bw_bytes_per_s=facts["inter"],
        devices_per_node=1,
        board_power_w=facts["watts"],
        price_usd_per_hour=facts["price"],
        price_date="",
        price_source=facts["price_source"],
        efficiency={**facts["efficiency"], **host},
        # a CPU runs each operator on the calling thread: its host and device time add
        async_launch=meas.device != "cpu",
        framework_overhead_bytes=(meas.runtime_memory_bytes or None)
        if meas.device == "cpu"
        else None,
        source=measured,
        notes=f"{meas.device_name} ({meas.device}, {meas.cores} cores){part}. GFLOP/s by size: "
        f"{curves}. {facts['stated']}{host_said}.",
    )


def _gpu_facts(meas: MachineMeasurement) -> dict[str, Any]:  # pragma: no cover - GPU only
    """What a GPU's measurement does not give: board power (W), price ($/h), links (bytes/s),
    vendor and family from the matching datasheet preset, else stated estimates; the calibrated
    efficiency constants are kept (fitted on GPUs)."""
    efficiency: dict[str, float] = {}
    sheet = datasheet_match(meas.device_name)
    watts = sheet.board_power_w if sheet else GPU_FALLBACK_WATTS
    price = sheet.price_usd_per_hour if sheet else GPU_FALLBACK_PRICE
    intra = sheet.intra_node_bw_bytes_per_s if sheet else meas.link_bw_bytes_per_s
    inter = sheet.inter_node_bw_bytes_per_s if sheet else meas.link_bw_bytes_per_s
    stated = (
        f"board power, price and links from the {sheet.name} preset (datasheet)"
        if sheet
        else f"board power {GPU_FALLBACK_WATTS:.0f} W and links (host-to-device copy) are stated estimates"
    )
    vendor = "NVIDIA" if "nvidia" in meas.device_name.lower() else "GPU"
    family = sheet.family if sheet else UNKNOWN_FAMILY  # the chip's architecture, as its preset's
    price_source = (
        f"placeholder: the {sheet.name} reference price"
        if sheet
        else "placeholder: a machine you own has no list price; set --price"
    )
    return dict(
        watts=watts,
        price=price,
        intra=intra,
        inter=inter,
        stated=stated,
        vendor=vendor,
        family=family,
        price_source=price_source,
        efficiency=efficiency,
    )


def _cpu_facts(meas: MachineMeasurement) -> dict[str, Any]:
    """A CPU's stated power and price per core, its loopback link (bytes/s), and the GEMM
    efficiency fitted on its measured matmul curve."""
    efficiency: dict[str, float] = {}
    cores = max(1, meas.threads)  # a measurement at t threads describes t cores
    watts = CPU_WATTS_PER_CORE * cores
    price = CPU_PRICE_PER_CORE_HOUR * cores
    intra = inter = meas.link_bw_bytes_per_s
    stated = (
        f"board power is a stated estimate ({CPU_WATTS_PER_CORE:.0f} W per core); intra/inter-node "
        "bandwidth is the measured loopback TCP rate (gloo between processes of one host)"
    )
    if meas.collective is not None:  # what gloo's all-reduce gets, not one bulk TCP stream
        intra = inter = meas.collective.bus_bw_bytes_per_s
        efficiency[COLLECTIVE_LATENCY_KEY] = meas.collective.latency_s
        efficiency[COLLECTIVE_BUS_BW_KEY] = meas.collective.bus_bw_bytes_per_s
        stated = (
            f"board power is a stated estimate ({CPU_WATTS_PER_CORE:.0f} W per core); links: "
            f"{meas.collective.describe()}, which times data-parallel collectives"
        )
    vendor = "CPU"
    family = "cpu"  # no calibration row was measured on a CPU
    own = (
        "fp32"
        if "fp32" in meas.matmul
        else max(meas.matmul, key=lambda p: meas.matmul[p].peak, default=None)
    )
    if own is not None and len(meas.matmul[own].sizes) >= 2:
        efficiency = {**efficiency, **gemm_constants(meas.matmul[own])}
        stated += (
            f"; GEMM efficiency from the measured {own} curve: {efficiency['gemm_max']:.3f} · "
            f"(n / (n + {efficiency['gemm_half_dim']:.0f}))³ of peak"
        )
    hd = meas.host_dispatch
    if own is not None and hd is not None and len(hd.attention_head_dims) >= 2:
        from trilemma.probe.attention_rate import attention_constants

        att = attention_constants(
            hd.attention_head_dims, hd.attention_flop_per_s, meas.matmul[own].peak
        )
        efficiency = {**efficiency, **att}
        stated += (
            f"; attention (PyTorch's CPU flash kernel) from its measured rate by head dimension d: "
            f"{att['attention_max']:.3f} · d / (d + {att['attention_half_dim']:.1f}) of peak"
        )
    price_source = (
        f"placeholder: a machine you own has no list price (${CPU_PRICE_PER_CORE_HOUR}/core-hour "
        "assumed, about a cloud vCPU); set --price"
    )
    return dict(
        watts=watts,
        price=price,
        intra=intra,
        inter=inter,
        stated=stated,
        vendor=vendor,
        family=family,
        price_source=price_source,
        efficiency=efficiency,
    )


def gemm_constants(curve: MatmulCurve) -> dict[str, float]:
    """This device's GEMM efficiency constants from its measured square-matmul curve: the least-squares
    fit, in log rate, of rate(n) / peak = gemm_max · (n / (n + gemm_half_dim))³ — the planner's own
    form (``trilemma.estimate.roofline.gemm_efficiency`` at M = N = K = n) — with balance_exponent 0 (the
    ceiling is this chip's own, so no scaling by its balance). Needs at least 2 sizes."""
    n = np.asarray(curve.sizes, dtype=float)
    eff = np.asarray(curve.flop_per_s, dtype=float) / curve.peak
    # gemm_max may exceed 1: peak is the best measured rate, which a still-rising curve has not reached;
    # the planner caps each GEMM's efficiency at 1 of that peak
    g, h = saturating_fit(n, eff, 3, float(n.min()) / 4, 1e-3)
    return {"gemm_max": g, "gemm_half_dim": h, "balance_exponent": 0.0}


def profile_path(name: str = "local") -> Path:
    return user_config_dir() / "hardware" / f"{name}.json"


def save_local_profile(hw: HardwareSpec, meas: MachineMeasurement) -> Path:
    """Write ``<config dir>/hardware/<name>.json`` (atomically)."""
    p = profile_path(hw.name)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "schema": USER_PROFILE_SCHEMA,
        "hardware": hw.model_dump(mode="json"),
        "measured": meas.to_dict(),
    }
    write_text_atomic(p, json.dumps(doc, indent=1), "hardware profile")
    return p
