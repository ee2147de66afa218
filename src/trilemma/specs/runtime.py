"""A runtime on a device: which compute unit runs prefill and decode, the share of peak memory bandwidth
it reaches decoding, its fixed cost per generated token, its prefill share of the unit's peak, and the
weight formats it runs (presets/runtimes.toml; trilemma.estimate.deploy)."""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec

#: the compute units of a device a runtime runs on (DeviceSpec.unit_peak_flop_per_s)
UNITS = ("cpu", "gpu", "npu")


class WeightFormat(Spec):
    """A weight format: stored bits per weight with its scales, and the precision class it belongs to."""

    name: str
    bits_per_weight: float = Field(
        gt=0, le=32, description="stored bits per weight, scales included"
    )
    precision: str = Field(
        pattern="^(int2|int3|int4|int8|fp16)$", description="int2, int3, int4, int8 or fp16"
    )
    head_bits_per_weight: float | None = Field(
        default=None,
        gt=0,
        le=32,
        description="bits of the embedding and output layer where kept higher",
    )
    untied_head: bool = Field(
        default=False, description="the output layer stored apart from the embedding even when tied"
    )
    source: str = ""
    aliases: tuple[str, ...] = ()


class RuntimeSpec(Spec):
    """One inference runtime (and backend) as physical features, each fitted or sourced."""

    name: str
    prefill_unit: str = Field(pattern="^(cpu|gpu|npu)$", description="cpu, gpu or npu")
    decode_unit: str = Field(pattern="^(cpu|gpu|npu)$", description="cpu, gpu or npu")
    formats: tuple[str, ...] = Field(min_length=1, description="weight formats it runs")
    default_format: str
    bandwidth_share: float | None = Field(
        default=None, gt=0, le=1, description="share of peak DRAM bandwidth reached in decode"
    )
    per_token_s: float | None = Field(
        default=None, ge=0, description="fixed cost per generated token, s"
    )
    ceiling_bound: bool = Field(
        default=False,
        description="its unit reads memory through its own fabric: decode is bound by a ceiling of its "
        "own, not by a share of the device's bandwidth",
    )
    bandwidth_ceiling_bytes_per_s: float | None = Field(
        default=None,
        gt=0,
        description="the bandwidth its unit reaches at most (ceiling_bound), bytes/s",
    )
    prefill_share: float | None = Field(
        default=None, gt=0, le=1, description="share of the prefill unit's peak reached"
    )
    chip_vendors: tuple[str, ...] = Field(
        default=(), description="the chip makers it runs on (a device's chip names one); empty: any"
    )
    fit_rows: int = Field(default=0, ge=0, description="published decode rows of its own fit")
    source: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def prefill_pool(self) -> str:
        """The [efficiency.pooled] table whose prefill share it takes without rows of its own: its unit's,
        or for a ceiling-bound runtime (weights streamed first) the ceiling-bound runtimes' on that unit."""
        return f"{self.prefill_unit}_ceiling" if self.ceiling_bound else self.prefill_unit
