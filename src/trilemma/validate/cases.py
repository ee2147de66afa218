"""Map each backtest row to a :class:`Case` (a plan with a reported figure) or a :class:`Skipped`.

The rows are explicit data in the schema of :mod:`trilemma.validate.schema` (documented in
``data/SCHEMA.md``): the mapper reads columns and infers nothing from free text. Where a column is
empty it applies the documented default and says so in the case's ``assumptions``; layout axes left
empty are searched. Used for the shipped ``trilemma/data/{runs,throughput,memory}.csv`` and for a
user's own file (``trilemma validate --data FILE.csv``).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from importlib import resources
from typing import Any

from trilemma.errors import InputError, TrilemmaError
from trilemma.estimate.layouts import candidate_layouts, legal_mask, reason_text
from trilemma.resolve import check_positions, make_plan
from trilemma.specs import (
    DtypeSpec,
    HardwareSpec,
    ModelSpec,
    Optimizer,
    Precision,
    Stage,
)
from trilemma.units import GIB
from trilemma.validate import MEMORY_METRICS, Case, Kind, Skipped
from trilemma.validate.columns import CONVERTED_METRICS, LAYOUT_AXES
from trilemma.validate.row_model import RowMapping, Skip, row_hardware, row_model
from trilemma.validate.schema import (
    RowError,
    parse_row,
    read_csv,
    read_text,
)

__all__ = ["KINDS", "KIND_METRICS", "load_cases", "load_file", "map_rows", "read_rows"]

KINDS: tuple[Kind, ...] = ("runs", "throughput", "memory")
_RATES = frozenset(
    {
        "tokens_per_s_per_gpu",
        "sequences_per_s_per_gpu",
        "model_tflops_per_gpu",
        "hardware_tflops_per_gpu",
        "mfu",
        "hfu",
        "step_s",
        "forward_backward_s",
    }
)
#: a whole run's totals: they need the run's tokens, and only runs rows report them
_RUN_TOTALS = frozenset({"gpu_hours", "days", "busy_gpu_hours"})
#: the metrics each kind of row may report
KIND_METRICS: dict[str, frozenset[str]] = {
    "runs": _RATES | _RUN_TOTALS,
    "throughput": _RATES,
    "memory": MEMORY_METRICS,
}
#: the FLOP-counting convention a metric implies
_CONVENTION = {
    "mfu": "model",
    "model_tflops_per_gpu": "model",
    "hfu": "hardware",
    "hardware_tflops_per_gpu": "hardware",
}
#: the `reported` column's unit → the Case's SI value (percent → fraction, GiB → bytes)
_PERCENT = frozenset({"mfu", "hfu"})
#: a rate row needs only a step: tokens = this many global batches (any multiple would do)
STEPS_FOR_RATE_ROWS = 100
#: without any global batch: this many sequences (make_plan's default) unless the model preset has one
DEFAULT_BATCH_SEQS = 512
# ------------------------------------------------------------------ reading


def read_rows(kind: Kind) -> list[dict[str, str]]:
    """The raw rows of the shipped ``trilemma/data/<kind>.csv`` (published and explicit columns)."""
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not allowed; expected one of {', '.join(KINDS)}")
    text = (resources.files("trilemma") / "data" / f"{kind}.csv").read_text(encoding="utf-8")
    return read_text(text, f"{kind}.csv")


# ------------------------------------------------------------------ the parts of a case


def _reported(m: RowMapping) -> tuple[str, float]:
    metric, value = m.get("metric"), m.get("reported")
    if metric not in KIND_METRICS[m.kind]:
        raise m.error(
            "metric", f"one of {', '.join(sorted(KIND_METRICS[m.kind]))} for {m.kind} rows"
        )
    conv = m.get("flop_convention")
    if conv and metric in _CONVENTION and conv != _CONVENTION[metric]:
        raise m.error("flop_convention", f"{_CONVENTION[metric]} for metric {metric}")
    if metric in CONVERTED_METRICS:  # sequences/s per GPU: the case compares tokens/s per GPU
        seq = m.get("seq_len")
        m.note(f"{metric} {value:g} × seq_len {seq} = {value * seq:g} tokens/s per GPU")
        return CONVERTED_METRICS[metric], value * seq
    if metric in _PERCENT:
        if value >= 100:
            raise m.error("reported", "a percentage below 100 for mfu and hfu")
        return metric, value / 100
    return metric, value * GIB if metric in MEMORY_METRICS else value


def _layout(m: RowMapping, n_gpus: int) -> dict[str, Any]:
    """The axes the row pins, checked against its GPU count; the others are searched."""
    lay = {k: m.get(k) for k in LAYOUT_AXES if m.get(k) is not None}
    degrees = {k: lay[k] for k in ("tp", "pp", "dp", "cp") if k in lay}
    prod = 1
    for v in degrees.values():
        prod *= v
    shown = " × ".join(f"{k} {v}" for k, v in degrees.items())
    if {"tp", "pp", "dp"} <= degrees.keys() and prod != n_gpus:
        raise m.error("n_gpus", f"{prod} = {shown}, the product of the row's parallel degrees")
    if n_gpus % prod:
        raise m.error("n_gpus", f"a multiple of {prod} = {shown}")
    # the axes' own rules (ZeRO-2/3 with PP, vp, pp dividing the layers, ep …) are the registry's:
    # _check_legal skips a row that breaks one, naming it
    return lay


def _stage(m: RowMapping, model: ModelSpec, seq: int, lay: dict[str, Any]) -> Stage:
    exact = m.get("batch_exact", True)
    if m.get("global_batch"):
        gbt = m.get("global_batch") * seq
    elif m.get("global_batch_tokens"):
        gbt = m.get("global_batch_tokens")
    elif lay.get("micro_batch") and lay.get("dp"):
        accum = m.get("grad_accum", 1)
        gbt = lay["micro_batch"] * lay["dp"] * accum * seq
        m.note(
            f"global batch = micro_batch {lay['micro_batch']} × dp {lay['dp']} × grad-accum {accum} = "
            f"{gbt // seq} sequences"
        )
    else:
        gbt = model.global_batch_tokens or DEFAULT_BATCH_SEQS * seq
        whence = "the model preset" if model.global_batch_tokens else "make_plan default"
        m.note(f"global batch not given: {gbt / seq:.0f} sequences ({whence}), as a target")
        exact = False
    tokens = m.get("tokens")
    if tokens is None:
        if m.get("metric") in _RUN_TOTALS:
            raise m.error(
                "tokens", "the run's training tokens (gpu_hours, days and busy_gpu_hours need them)"
            )
        tokens = gbt * STEPS_FOR_RATE_ROWS
        m.note(
            f"tokens = {STEPS_FOR_RATE_ROWS} global batches (a rate needs only a step; any multiple works)"
        )
    return Stage.build(
        prefix="plan.stage",
        tokens=tokens,
        seq_len=seq,
        global_batch_tokens=gbt,
        explicit_batch=exact,
    )


def _check_legal(
    model: ModelSpec, hw: HardwareSpec, n_gpus: int, lay: dict[str, Any], stage: Stage
) -> None:
    """Skip a row whose pinned axes leave no legal layout (memory aside), naming the fewest reasons."""
    pinned = {k: (int(v) if isinstance(v, bool) else v) for k, v in lay.items()}
    cands = candidate_layouts(model, n_gpus, hw.devices_per_node, pinned, stage.seq_len)
    if len(cands) == 0:
        raise Skip(
            f"the row's layout cannot run in trilemma on {n_gpus} GPUs (no candidate layout)"
        )
    _, r = legal_mask(model, cands, stage, n_gpus)
    if (r == 0).any():
        return
    bits = min((int(b) for b in r), key=lambda b: b.bit_count())
    why = "; ".join(reason_text(bits)) or "no candidate layout"
    raise Skip(f"the row's layout cannot run in trilemma on {n_gpus} GPUs ({why})")


def _case(m: RowMapping) -> Case:
    metric, reported = _reported(m)
    hw = row_hardware(m)
    n_gpus, seq = m.get("n_gpus"), m.get("seq_len")
    model = row_model(m, seq)
    try:  # a sequence past a learned position table: estimate refuses it, so the row is skipped
        check_positions(model, seq)
    except InputError as exc:
        raise Skip(str(exc)) from None
    lay = _layout(m, n_gpus)
    stage = _stage(m, model, seq, lay)
    _check_legal(model, hw, n_gpus, lay, stage)
    if m.get("precision") is None:
        m.note("precision not stated: bf16 assumed")
    precision = Precision(m.get("precision", "bf16"))
    try:
        hw.peak(precision)
    except TrilemmaError:
        raise Skip(f"{hw.name} has no {precision} peak") from None
    dt = DtypeSpec.for_precision(precision, grad=m.get("grad_dtype", "fp32"))
    # the row's dtype columns, each overriding one DtypeSpec field where it is given
    given = {f: m.get(f"{f}_dtype") for f in ("optimizer_state", "attention_probs", "norm_input")}
    dt = dt.replace(**{f: v for f, v in given.items() if v})
    plan = make_plan(
        model,
        stages=[stage],
        precision=precision,
        # a feature the row does not state is its stack's (trilemma.resolve.with_stack), else
        # TrainingPlan's default
        flash_attention=m.get("flash"),
        dtypes=dt,
        optimizer=Optimizer(m.get("optimizer", "adamw")),
        fused_loss=m.get("fused_loss"),
        softmax_passes=m.get("softmax_passes"),
        compile=m.get("compile"),
        async_tp=m.get("async_tp"),
        task=m.get("task", "causal-lm"),
        stack=m.get("stack") or None,
    )
    return Case(
        kind=m.kind,
        row=m.row.index,
        label=m.row.label,
        source=m.get("source", ""),
        group=m.get("group") or m.get("source") or m.where,
        model=model,
        hardware=hw,
        n_gpus=n_gpus,
        plan=plan,
        layout=lay,
        metric=metric,
        reported=reported,  # type: ignore[arg-type]
        assumptions=tuple(m.assumptions),
        stack=m.get("stack", ""),
    )


# ------------------------------------------------------------------ tables of rows


def map_rows(kind: Kind, raw: list[dict[str, str]], where: str) -> tuple[list[Case], list[Skipped]]:
    """Every raw row as a Case or a Skipped, in order; a bad cell raises a RowError."""
    cases: list[Case] = []
    skipped: list[Skipped] = []
    for i, cells in enumerate(raw):
        row = parse_row(cells, i, where)
        if row.get("skip_reason"):
            skipped.append(
                Skipped(kind=kind, row=i, label=row.label, reason=row.get("skip_reason"))
            )
            continue
        try:
            cases.append(_case(RowMapping(kind, row, where)))
        except Skip as exc:
            skipped.append(Skipped(kind=kind, row=i, label=row.label, reason=str(exc)))
        except RowError:
            raise
        except TrilemmaError as exc:  # a spec the row's numbers cannot build
            skipped.append(
                Skipped(
                    kind=kind,
                    row=i,
                    label=row.label,
                    reason=f"the row's values are not valid inputs ({exc})",
                )
            )
    return cases, skipped


@cache
def _load(kind: Kind) -> tuple[tuple[Case, ...], tuple[Skipped, ...]]:
    cases, skipped = map_rows(kind, read_rows(kind), f"{kind}.csv")
    return tuple(cases), tuple(skipped)


def load_cases(kind: str | None = None) -> tuple[list[Case], list[Skipped]]:
    """Every row of the shipped calibration CSVs (one kind, or all) as a Case or a Skipped, in row order.

    ``cases + skipped`` covers each row of each kind exactly once.
    """
    kinds = KINDS if kind is None else (kind,)
    cases: list[Case] = []
    skipped: list[Skipped] = []
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"kind: {k!r} is not allowed; expected one of {', '.join(KINDS)}")
        cs, sk = _load(k)  # type: ignore[arg-type]
        cases.extend(
            replace(c, layout=dict(c.layout)) for c in cs
        )  # callers may change their layout dicts
        skipped.extend(sk)
    return cases, skipped


def load_file(path: str, kind: str | None = None) -> tuple[Kind, list[Case], list[Skipped]]:
    """A user's CSV in the backtest schema: (its kind, cases, skipped). Without ``kind``, the metrics decide:
    all memory metrics → memory; any gpu_hours, days or busy_gpu_hours → runs; else throughput."""
    where, raw = read_csv(path)
    if kind is None:
        metrics = {
            (r.get("metric") or "").strip() for r in raw if not (r.get("skip_reason") or "").strip()
        }
        kind = (
            "memory"
            if metrics and metrics <= MEMORY_METRICS
            else "runs"
            if metrics & _RUN_TOTALS
            else "throughput"
        )
    cases, skipped = map_rows(kind, raw, where)  # type: ignore[arg-type]
    return kind, cases, skipped  # type: ignore[return-value]
