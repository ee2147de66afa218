"""A deployment target: a phone, laptop, desktop or datacentre device the trained model must run on."""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec

#: runtime classes with their own fitted bandwidth efficiency (presets/devices.toml [efficiency])
RUNTIMES = ("metal", "gpu", "mobile-gpu", "cpu")


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
    power_w: float = Field(gt=0, description="draw while decoding, W")
    runtime: str = Field(
        pattern="^(metal|gpu|mobile-gpu|cpu)$", description="runtime class: " + ", ".join(RUNTIMES)
    )
    source: str = ""
    aliases: tuple[str, ...] = ()
