"""The probe's typed result and its versioned JSONL records (no torch here).

``ProbeResult.to_dict()`` is the ``--json`` document and one line of ``--out records.jsonl``;
``ProbeResult.from_dict`` reads either back (``read_records``). SI units, fractions 0-1. The
comparison comes first among the figures, so the first key containing "ratio" in the document
is ``comparison.step_time.ratio`` (predicted / measured step time).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from trilemma.fileio import RECORDS_MAX_BYTES, append_line, parse_json, read_text
from trilemma.probe.profile import MachineMeasurement
from trilemma.specs import Layout, ModelSpec

__all__ = [
    "Comparison",
    "Measured",
    "Predicted",
    "ProbeEnvironment",
    "ProbeMachine",
    "ProbeResult",
    "ProbeRun",
    "Scaling",
    "StepStats",
    "append_record",
    "read_records",
]


@dataclass(frozen=True)
class StepStats:
    """Steady-state step times (warm-up steps excluded), seconds."""

    n: int
    median_s: float
    mean_s: float
    p10_s: float
    p90_s: float
    min_s: float
    max_s: float
    spread: float  # (p90 - p10) / median

    @classmethod
    def of(cls, times: list[float]) -> StepStats | None:
        if not times:
            return None
        s = sorted(times)

        def q(f: float) -> float:  # linear interpolation between order statistics
            x = f * (len(s) - 1)
            lo = int(x)
            hi = min(lo + 1, len(s) - 1)
            return s[lo] + (s[hi] - s[lo]) * (x - lo)

        med = q(0.5)
        return cls(
            n=len(s),
            median_s=med,
            mean_s=sum(s) / len(s),
            p10_s=q(0.1),
            p90_s=q(0.9),
            min_s=s[0],
            max_s=s[-1],
            spread=(q(0.9) - q(0.1)) / med if med > 0 else 0.0,
        )


@dataclass(frozen=True)
class Measured:
    step_time: StepStats | None
    tokens_per_s: float | None  # whole job (all processes)
    model_flop_per_token: float  # PaLM convention (trilemma.estimate.flops.model_flop_per_token)
    hardware_flop_per_token: float  # + recomputation
    model_flop_per_s: float | None  # per process
    mfu: float | None  # against the measured matmul peak at this precision and thread count
    hfu: float | None
    peak_flop_per_s: float  # the measured peak used for mfu
    mfu_datasheet: float | None  # against the datasheet peak of a known GPU
    datasheet: str | None
    memory_bytes: float | None  # per process: peak RSS (CPU) / device memory in use (GPU)
    memory_training_bytes: (
        float | None
    )  # above the runtime baseline (CPU) / CUDA allocator peak (GPU)
    memory_baseline_bytes: float | None
    memory_kind: str
    loss_first: float | None
    loss_last: float | None
    train_loss: float | None  # mean of the last five steps
    eval_loss: float | None  # held-out split
    params: int  # sum(p.numel()) of the real model


@dataclass(frozen=True)
class Predicted:
    """What ``trilemma.api.evaluate_layout`` says for the same model, layout and machine profile."""

    hardware: str
    step_time_s: float
    tokens_per_s: float
    memory_bytes: float  # per device, framework overhead included
    memory_training_bytes: float  # without the planner's framework overhead constant
    framework_overhead_bytes: float
    mfu: float
    compute_s: float
    dp_comm_s: float
    optimizer_s: float
    memory_breakdown: dict[str, float] = field(default_factory=dict)
    # of compute_s, what the host's issue of the operators takes beyond the device (estimate's "host"
    # class: on a CPU all of it, host and device adding); 0 in records written before it was kept
    host_s: float = 0.0


@dataclass(frozen=True)
class Comparison:
    predicted: float
    measured: float
    ratio: float  # predicted / measured


@dataclass(frozen=True)
class Scaling:
    """--nproc N against one process with the same threads per process (and against the machine)."""

    nproc: int
    threads_per_process: int
    tokens_per_s: float
    one_process_tokens_per_s: float
    efficiency: float  # tokens/s(N) / (N × tokens/s(1)), same threads per process
    predicted_efficiency: float
    whole_machine_tokens_per_s: (
        float | None
    )  # one process with every core (the run without --nproc)
    speedup_vs_whole_machine: float | None
    predicted_speedup_vs_whole_machine: float | None


@dataclass(frozen=True)
class ProbeRun:
    """What was run: the settings after defaults, and how far it got."""

    device: str  # "cpu" or "cuda"
    precision: str  # "fp32", "bf16" or "fp16"
    seq: int  # tokens per sequence
    micro_batch: int  # sequences per micro-batch, per process
    grad_accum: int
    nproc: int
    fsdp: bool
    recompute: str  # "none" or "full"
    compile: bool
    steps: int  # optimizer steps asked for, warm-up included
    warmup: int  # steps left out of the statistics
    steps_done: int
    interrupted: bool
    tokens_per_step: int  # all processes
    lr: float
    seed: int
    optimizer: str
    wall_s: float  # training, this process's wall clock
    parallelism: str  # "single process", "DDP over gloo", ...
    # a fine-tune (--finetune): method, adapters, and trainable parameters as PEFT counted them beside the planner
    finetune: dict | None = None


@dataclass(frozen=True)
class ProbeEnvironment:
    """The software and machine the run met."""

    torch: str
    python: str
    platform: str
    device: str
    device_name: str
    cores: int
    threads_per_process: int
    nproc: int
    cuda: str | None
    other_processes_cpu_share: (
        float | None
    )  # share 0-1 of the machine's CPU time used by other processes
    load_1min: float | None = None  # 1-minute load average when the probe started
    busy: bool = False  # other work was inside the figures: at the start, in the machine profile, or while training
    busy_why: str = ""  # what made it busy ("" when idle)


@dataclass(frozen=True)
class ProbeMachine:
    """The machine measurement behind the `local` profile (and one process's share of it under --nproc)."""

    profile: str  # path of the saved `local` hardware profile
    config_dir: str
    measurement: MachineMeasurement
    per_process: MachineMeasurement | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "config_dir": self.config_dir,
            "measurement": self.measurement.to_dict(),
            "per_process": None if self.per_process is None else self.per_process.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeMachine:
        per = d.get("per_process")
        return cls(
            profile=d["profile"],
            config_dir=d["config_dir"],
            measurement=MachineMeasurement.from_dict(d["measurement"]),
            per_process=None if per is None else MachineMeasurement.from_dict(per),
        )


@dataclass(frozen=True)
class ProbeResult:
    """One probe: predicted beside measured. ``to_dict()`` is the ``--json`` document and one JSONL record."""

    SCHEMA: ClassVar[str] = "trilemma.probe/1"

    model: ModelSpec
    model_resolution: str
    params_planner: int
    layout: Layout
    run: ProbeRun
    comparison: dict[str, Comparison]
    measured: Measured
    predicted: Predicted | None
    scaling: Scaling | None
    machine: ProbeMachine
    environment: ProbeEnvironment
    data: dict[str, Any]  # the corpus's own description (trilemma.probe.data)
    step_s: tuple[float, ...]
    losses: tuple[float, ...]
    warnings: tuple[str, ...] = ()
    schema: str = SCHEMA  # what a record read back says (a later version of the same family)

    def to_dict(self) -> dict[str, Any]:
        m = self.model
        return {
            "schema": self.schema,
            "model": {
                "name": m.name,
                "resolved_from": self.model_resolution,
                "params_planner": self.params_planner,
                "params_measured": self.measured.params,
                "spec": m.model_dump(mode="json"),
            },
            "run": asdict(self.run),
            "layout": self.layout.model_dump(mode="json"),
            "comparison": {k: asdict(v) for k, v in self.comparison.items()},
            "measured": asdict(self.measured),
            "predicted": None if self.predicted is None else asdict(self.predicted),
            "scaling": None if self.scaling is None else asdict(self.scaling),
            "machine": self.machine.to_dict(),
            "environment": asdict(self.environment),
            "data": dict(self.data),
            "steps": {"step_s": list(self.step_s), "loss": list(self.losses)},
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeResult:
        if not str(d.get("schema", "")).startswith(cls.SCHEMA.split("/")[0] + "/"):
            raise ValueError(f"not a probe record: schema {d.get('schema')!r}")
        meas = dict(d["measured"])
        meas["step_time"] = None if meas["step_time"] is None else StepStats(**meas["step_time"])
        return cls(
            model=ModelSpec.model_validate(d["model"]["spec"]),
            model_resolution=d["model"]["resolved_from"],
            params_planner=d["model"]["params_planner"],
            layout=Layout.model_validate(d["layout"]),
            run=ProbeRun(**d["run"]),
            comparison={k: Comparison(**v) for k, v in d["comparison"].items()},
            measured=Measured(**meas),
            predicted=None if d["predicted"] is None else Predicted(**d["predicted"]),
            scaling=None if d["scaling"] is None else Scaling(**d["scaling"]),
            machine=ProbeMachine.from_dict(d["machine"]),
            environment=ProbeEnvironment(**d["environment"]),
            data=d["data"],
            step_s=tuple(d["steps"]["step_s"]),
            losses=tuple(d["steps"]["loss"]),
            warnings=tuple(d["warnings"]),
            schema=d["schema"],
        )


def append_record(path: str | Path, result: ProbeResult) -> Path:
    """Append one JSON line (the full document) to a records file."""
    p = Path(path).expanduser()
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    append_line(p, (json.dumps(result.to_dict(), default=str) + "\n").encode("utf-8"), "out")
    return p


def read_records(path: str | Path) -> list[ProbeResult]:
    """Every probe record of a JSONL file, in order."""
    p = Path(path).expanduser()
    text = read_text(p, "records", what="JSONL file", max_bytes=RECORDS_MAX_BYTES)
    return [
        ProbeResult.from_dict(parse_json(line, "records", f"{p}:{i}", "JSON line"))
        for i, line in enumerate(text.split("\n"), 1)
        if line.strip()
    ]
