"""A deployment target: a phone, laptop, desktop or datacentre device the trained model must run on."""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec


class DeviceSpec(Spec):
    """Memory an app may use, memory bandwidth, compute per precision and power of one device. SI units."""

    name: str
    kind: str = Field(description="phone, laptop, desktop, desktop-gpu or datacentre")
    chip: str = ""
    ram_bytes: float = Field(gt=0, description="installed memory, bytes")
    usable_bytes: float = Field(
        gt=0, description="memory one app may hold, bytes (per-OS limit, usable_source)"
    )
    usable_source: str = ""
    bandwidth_bytes_per_s: float = Field(gt=0, description="peak DRAM bandwidth, bytes/s")
    peak_flop_per_s: dict[str, float] = Field(
        description="dense peak per precision (fp16, int8), FLOP/s"
    )
    npu_flop_per_s: float = Field(
        default=0.0, ge=0, description="the NPU's dense int8 peak, OP/s (0: none known)"
    )
    cpu_flop_per_s: float = Field(
        default=0.0, ge=0, description="the CPU cores' int8 dot-product peak, OP/s (0: none known)"
    )
    power_w: float = Field(gt=0, description="draw while decoding, W")
    battery_wh: float | None = Field(
        default=None,
        gt=0,
        le=200,
        description="rated battery energy, Wh (None: none, or none published)",
    )
    battery_source: str = ""
    runtime: str = Field(description="the runtime used when none is named (presets/runtimes.toml)")
    source: str = ""
    aliases: tuple[str, ...] = ()

    def unit_peak_flop_per_s(self, unit: str) -> float:
        """The peak of one compute unit (cpu, gpu, npu) the prefill runs on, FLOP/s (0: none known): the
        GPU's fp16 rate, the NPU's and the CPU's int8 rates."""
        if unit == "gpu":
            return float(self.peak_flop_per_s.get("fp16", 0.0))
        return float(self.npu_flop_per_s if unit == "npu" else self.cpu_flop_per_s)
