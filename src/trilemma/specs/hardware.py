"""HardwareSpec (one accelerator, from its datasheet) and ClusterSpec (how many, how connected)."""

from __future__ import annotations

from pydantic import Field, model_validator

from trilemma.errors import InputError
from trilemma.specs.base import Spec
from trilemma.specs.bounds import (
    FAILURE_RATE_ALLOWED,
    LINK_RANGE,
    MAX_PRICE_PER_GPU_HOUR,
    MAX_RESTART_S,
    PUE_RANGE,
    bounded,
)
from trilemma.specs.enums import Precision

#: efficiency constants a device may carry as its own (keys of constants.toml [efficiency]; a CPU's
#: attention kernel by head dimension, trilemma.probe.attention_rate), and the
#: host seconds a probe profile measures: per eager operator, forward and backward, and the
#: optimizer's per parameter tensor and per parameter element (trilemma.probe.dispatch)
#: the efficiency keys of a probe profile's measured collective (trilemma.probe.collective: gloo's
#: all-reduce between local processes, seconds a call and bus bytes/s; trilemma.estimate.comm times with it)
COLLECTIVE_LATENCY_KEY = "collective_latency_s"
COLLECTIVE_BUS_BW_KEY = "collective_bus_bw_bytes_per_s"
DEVICE_EFFICIENCY_KEYS = (
    "gemm_max",
    "gemm_half_dim",
    "balance_exponent",
    "attention_max",
    "attention_half_dim",
    "host_op_s",
    "host_bwd_op_s",
    "host_opt_tensor_s",
    "host_opt_elem_s",
    COLLECTIVE_LATENCY_KEY,
    COLLECTIVE_BUS_BW_KEY,
)
#: the family of a device whose architecture is not known (a user profile of an unnamed GPU)
UNKNOWN_FAMILY = "unknown"


class HardwareSpec(Spec):
    """One accelerator. Rates are dense (never the 2:4-sparsity figure), per device, SI units."""

    name: str
    vendor: str = ""
    family: str = Field(
        UNKNOWN_FAMILY,
        pattern=r"^[a-z0-9][a-z0-9-]*$",
        description="chip architecture family (nvidia-ampere, amd-cdna3, google-tpu-v5p, "
        "cpu ...): the unit the calibration's coverage is counted in; a profile of an unknown "
        "device is 'unknown'",
    )
    peak_flop_per_s: dict[Precision, float] = Field(description="dense peak FLOP/s per precision")
    hbm_bytes: float = Field(gt=0, description="device memory capacity, bytes")
    hbm_bw_bytes_per_s: float = Field(gt=0, description="device memory bandwidth, bytes/s")
    intra_node_bw_bytes_per_s: float = Field(
        gt=0,
        description="scale-up link (NVLink, ICI, Infinity Fabric) per device, per direction, bytes/s",
    )
    inter_node_bw_bytes_per_s: float = Field(
        gt=0,
        description="scale-out network (InfiniBand, RoCE, DCN) per device, per direction, bytes/s",
    )
    devices_per_node: int = Field(gt=0, description="devices sharing the scale-up domain")
    board_power_w: float = Field(gt=0, description="board power (TDP/TBP), watts")
    host_power_w_per_device: float | None = Field(
        None,
        ge=0.0,
        description="host and network power of the system class this device ships in, per device, W: "
        "the system's maximum less its devices' boards, over its devices; None: constants.toml "
        "energy.host_power_w_per_device (a DGX H100's share)",
    )
    host_power_source: str = ""
    price_usd_per_hour: float = Field(gt=0, description="reference price per device-hour, USD")
    price_date: str = ""
    price_source: str = ""
    price_provider: str = Field(
        "",
        description="the provider whose offer set the price (presets/prices.toml); '' the preset's",
    )
    price_market: str = Field("", description="that offer's market: on-demand, reserved or spot")
    source: str = ""
    notes: str = ""
    aliases: tuple[str, ...] = ()
    efficiency: dict[str, float] = Field(
        default_factory=dict,
        description="this device's own GEMM efficiency constants, measured (a `trilemma probe` profile of a CPU: "
        "gemm_max, gemm_half_dim, balance_exponent; its attention kernel's attention_max, "
        "attention_half_dim by head dimension); they replace the calibrated ones for it; and "
        "its host's seconds per eager operator, forward and backward, and its optimizer's per "
        "parameter tensor and per parameter element (host_op_s, host_bwd_op_s, host_opt_tensor_s, "
        "host_opt_elem_s: a probe profile's measured dispatch cost); and the all-reduce its local "
        "processes run over gloo, seconds a call and bus bytes/s (collective_latency_s, "
        "collective_bus_bw_bytes_per_s: trilemma.probe.collective), which time its collectives",
    )
    mamf_flop_per_s: dict[Precision, float] = Field(
        default_factory=dict,
        description="Maximum Achievable Matmul FLOPS per precision, FLOP/s: the best rate of one matmul found by "
        "mamf-finder.py's search over shapes (measured, not the datasheet). It caps the step model's "
        "GEMM term: no GEMM of any shape runs faster",
    )
    mamf_shape: dict[Precision, tuple[int, int, int]] = Field(
        default_factory=dict,
        description="the M, N, K at which mamf_flop_per_s was measured, per precision",
    )
    mamf_source: str = ""
    measured_half_dim: dict[Precision, float] = Field(
        default_factory=dict,
        description="the GEMM law's half-dimension at a precision, fitted to this device's measured matmul rates at "
        "that precision (trilemma.estimate.roofline.device_constants): it replaces the calibrated one, "
        "unscaled, where the rate × bytes scaling does not carry (H100's fp32 SGEMMs)",
    )
    measured_half_dim_source: str = ""
    balance_bw_bytes_per_s: float | None = Field(
        None,
        gt=0,
        description="the memory bandwidth the balance law (trilemma.estimate.roofline.balance_factor) reads "
        "for this device's matmuls and attention core, bytes/s, where it is not hbm_bw: a "
        "device with another's SMs, clocks and power whose only change is its memory (H200: "
        "H100 SXM's die with HBM3e) keeps that device's matmul rates, as measured, so its "
        "balance; memory-bound kernels still run at hbm_bw. None: hbm_bw",
    )
    balance_bw_source: str = ""
    framework_overhead_bytes: float | None = Field(
        None,
        ge=0.0,
        description="memory a training process holds beyond its tensors on this device, bytes (a "
        "`trilemma probe` CPU profile: measured); it replaces the CUDA context, NCCL "
        "and residual terms. None: those terms (a GPU), 0 on a CPU",
    )
    cuda_context_bytes: float | None = Field(
        None,
        ge=0.0,
        description="the CUDA context on this device (runtime, driver state, loaded kernels), bytes, "
        "measured as device memory in use after the first tensor; None: "
        "memory.cuda_context_bytes (lazy module loading)",
    )
    cuda_context_source: str = ""
    async_launch: bool = Field(
        True,
        description="the host queues kernels and runs ahead of the device (a GPU's stream): a "
        "step is the larger of device and host time; False (a CPU, whose operators run on the "
        "calling thread): the two add (trilemma.estimate.host)",
    )
    compute_units: int | None = Field(
        None,
        gt=0,
        description="streaming multiprocessors (NVIDIA) or compute units (AMD) that run both the "
        "kernels and NCCL/RCCL's collectives (one thread block per channel); None: a "
        "device whose collectives do not take its compute cores (TPU ICI DMA, a CPU)",
    )

    @model_validator(mode="after")
    def _check(self) -> HardwareSpec:
        for p, v in self.peak_flop_per_s.items():
            if not v > 0:
                raise ValueError(f"peak_flop_per_s.{p}={v}: a positive FLOP/s")
        for p, v in self.mamf_flop_per_s.items():
            if not 0 < v <= self.peak_flop_per_s.get(p, 0.0):
                raise ValueError(
                    f"mamf_flop_per_s.{p}={v}: a measured FLOP/s above 0 and at most the {p} peak"
                )
            if p not in self.mamf_shape:
                raise ValueError(
                    f"mamf_flop_per_s.{p}: needs mamf_shape.{p} (the M, N, K it was measured at)"
                )
        for p, v in self.measured_half_dim.items():
            if not (0 <= v < float("inf")) or p not in self.peak_flop_per_s:
                raise ValueError(
                    f"measured_half_dim.{p}={v}: a finite number >= 0 at a precision the device has"
                )
        for k, v in self.efficiency.items():
            if k not in DEVICE_EFFICIENCY_KEYS:
                raise ValueError(f"efficiency.{k}={v}: one of {', '.join(DEVICE_EFFICIENCY_KEYS)}")
            if not (v >= 0 and v < float("inf")) or (k == "gemm_max" and not 0 < v <= 2):
                raise ValueError(
                    f"efficiency.{k}={v}: a finite number >= 0 (gemm_max in (0, 2]: the asymptote "
                    "of a measured curve, relative to its best measured rate)"
                )
        return self

    def peak(self, precision: Precision | str) -> float:
        """Dense peak FLOP/s at ``precision``; a clear error if the chip lacks it."""
        p = Precision(precision)
        if p not in self.peak_flop_per_s:
            have = ", ".join(sorted(str(k) for k in self.peak_flop_per_s))
            why = (
                f" ({self.name} has no bf16: fp16 is its 16-bit path, with loss scaling and, from 100B "
                "parameters, a documented divergence risk)"
                if p == Precision.BF16 and Precision.FP16 in self.peak_flop_per_s
                else ""
            )
            raise InputError(
                "precision", str(p), f"one this device ({self.name}) supports: {have}{why}"
            )
        return self.peak_flop_per_s[p]


class ClusterSpec(Spec):
    """A number of identical devices and the links between them (overrides the preset's)."""

    hardware: HardwareSpec
    n_gpus: int = Field(gt=0)
    gpus_per_node: int | None = Field(None, gt=0)
    intra_node_bw_bytes_per_s: float | None = bounded(
        "intra_node_bw_bytes_per_s",
        "intra-node-bw",
        "a bandwidth from 1 MB/s to 1 PB/s per device",
        None,
        ge=LINK_RANGE[0],
        le=LINK_RANGE[1],
    )
    inter_node_bw_bytes_per_s: float | None = bounded(
        "inter_node_bw_bytes_per_s",
        "inter-node-bw",
        "a bandwidth from 1 MB/s to 1 PB/s per device",
        None,
        ge=LINK_RANGE[0],
        le=LINK_RANGE[1],
    )
    price_usd_per_hour: float | None = bounded(
        "price_usd_per_hour",
        "price",
        f"a price of at most ${MAX_PRICE_PER_GPU_HOUR:,.0f} per GPU-hour, not negative",
        None,
        ge=0,
        le=MAX_PRICE_PER_GPU_HOUR,
        description="per device-hour, overrides the preset",
    )
    pue: float = bounded(
        "pue",
        "pue",
        f"a number from {PUE_RANGE[0]:g} to {PUE_RANGE[1]:g}",
        1.1,
        ge=PUE_RANGE[0],
        le=PUE_RANGE[1],
        description="datacentre power usage effectiveness",
    )
    power_fraction: float = Field(
        1.0, gt=0.0, le=1.5, description="average draw as a fraction of board power"
    )
    host_power_fraction: float = Field(
        0.0, ge=0.0, le=2.0, description="host (CPU, NIC, fans) power as a fraction of device power"
    )
    host_power_w_per_node: float | None = Field(
        None,
        ge=0.0,
        description="host and network power per node "
        "(CPUs, memory, NICs, fans), W; None: energy.host_power_w_per_device "
        "× devices per node (constants.toml; a DGX H100's), 0 on a CPU profile",
    )
    grid_kg_co2_per_kwh: float = Field(0.385, ge=0.0, le=2.0, description="grid carbon intensity")
    host_memory_bytes: float | None = Field(
        None,
        gt=0,
        description="host (CPU) memory per node, bytes, for offloaded "
        "states; None: offload.host_memory_bytes_per_device × devices per node",
    )
    failures_per_gpu_hour: float | None = bounded(
        "failures_per_gpu_hour",
        "failure-rate",
        FAILURE_RATE_ALLOWED,
        None,
        gt=0.0,
        le=1.0,
        description="unexpected job interruptions per "
        "device-hour (any device stops the synchronous job); None: Llama 3's "
        "419 in 54 days on 16,384 GPUs, 1.97e-5 (presets/reliability.toml)",
    )
    restart_s: float | None = bounded(
        "restart_s",
        "restart",
        "a duration above 0 and at most 7 days, e.g. 30min",
        None,
        gt=0.0,
        le=MAX_RESTART_S,
        description="seconds from a failure to training again "
        "(detection, replacing the node, process start, checkpoint reload); None: 600 "
        "(presets/reliability.toml: MegaScale, Kokolis et al. 2024)",
    )
    storage_write_bytes_per_s: float | None = bounded(
        "storage_write_bytes_per_s",
        "storage-bw",
        "a bandwidth from 1 MB/s to 1 PB/s for the whole job",
        None,
        ge=LINK_RANGE[0],
        le=LINK_RANGE[1],
        description="aggregate bandwidth the job's checkpoint "
        "is written at, bytes/s; None: 1.22e8 per device (Llama 3's storage: "
        "2 TB/s sustained over 16,384 GPUs, presets/reliability.toml)",
    )
    memory_headroom: float | None = Field(
        None,
        ge=0.0,
        lt=1.0,
        description="share of device memory a plan must "
        "leave free to count as fitting; None: from the memory model's leave-one-"
        "source-out error (calibrated.toml bands.memory_log_q10)",
    )

    @property
    def is_cpu(self) -> bool:
        """A CPU profile (``trilemma probe`` on a machine without a GPU): no CUDA context, no NCCL."""
        return self.hardware.family == "cpu"

    @property
    def node_size(self) -> int:
        return self.gpus_per_node or self.hardware.devices_per_node

    @property
    def intra_bw(self) -> float:
        return self.intra_node_bw_bytes_per_s or self.hardware.intra_node_bw_bytes_per_s

    @property
    def inter_bw(self) -> float:
        return self.inter_node_bw_bytes_per_s or self.hardware.inter_node_bw_bytes_per_s

    @property
    def price(self) -> float:
        return (
            self.hardware.price_usd_per_hour
            if self.price_usd_per_hour is None
            else self.price_usd_per_hour
        )
