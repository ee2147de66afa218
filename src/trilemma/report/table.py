"""Human output: rich tables with sensible units (days, GiB, TFLOP/s, $)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from trilemma.console import console, shown
from trilemma.estimate.params import param_counts
from trilemma.report.deploy_table import deploy_table
from trilemma.report.estimate_tables import (
    cost_table,
    memory_table,
    plan_table,
    speed_table,
)
from trilemma.units import (
    MILLISECOND,
    fmt_bytes,
    fmt_count,
    fmt_flop_rate,
    fmt_rate,
)


def print_estimate(est: Any) -> None:
    """Tables for one Estimate: plan, layout, memory, time, cost; then warnings."""
    c = console()
    for table in (plan_table(est), memory_table(est), speed_table(est), cost_table(est)):
        c.print(table)
    if est.loss is not None:
        from trilemma.quality.benchmarks import format_line
        from trilemma.quality.predict import caveats, format_loss_line

        c.print(f"[bold]quality[/bold]  {format_loss_line(est.loss.to_dict())}")
        for note in caveats(est.loss):  # extrapolation, precision, repetition, MoE: under the line
            c.print(f"  · {shown(note)}")
        c.print(f"[bold]benchmarks[/bold]  {shown(format_line(est.benchmarks or {}))}")
    if est.plan.distill is not None:
        from trilemma.estimate.distill import teacher_line

        c.print(teacher_line(est, "the note 'distillation' has its share and the quality model"))
    if est.deploy is not None:
        c.print(deploy_table(est.deploy))
    for w in est.warnings:
        c.print(f"[yellow]note:[/yellow] {shown(w)}")


def presets_document(kind: str) -> dict[str, Any]:
    from trilemma.estimate.result import SCHEMA
    from trilemma.presets import all_hardware_presets, model_presets

    doc: dict[str, Any] = {"schema": SCHEMA.replace("estimate", "presets"), "warnings": []}
    if kind in ("models", "all"):
        doc["models"] = [
            {
                **m.model_dump(mode="json"),
                "params_total": param_counts(m).total,
                "params_active": param_counts(m).active,
            }
            for m in model_presets().values()
        ]
    if kind in ("hardware", "all"):
        doc["hardware"] = [h.model_dump(mode="json") for h in all_hardware_presets().values()]
    if kind in ("devices", "all"):
        from trilemma.presets import device_presets

        doc["devices"] = [d.model_dump(mode="json") for d in device_presets().values()]
    if kind in ("runtimes", "all"):
        from trilemma.presets import runtime_presets, weight_formats

        doc["runtimes"] = [r.model_dump(mode="json") for r in runtime_presets().values()]
        doc["weight_formats"] = [f.model_dump(mode="json") for f in weight_formats().values()]
    if kind in ("stacks", "all"):
        from trilemma.presets import stacks

        doc["stacks"] = [
            {"name": st.name, "aliases": list(st.aliases), "description": st.description}
            | {"features": st.features, "source": st.source}
            for st in stacks().values()
        ]
    if kind in ("prices", "all"):
        from dataclasses import asdict

        from trilemma.presets.prices import offers

        doc["prices"] = [asdict(o) | {"age_days": o.age_days()} for o in offers()]
    if kind in ("trainers", "all"):
        from trilemma.presets import trainers

        doc["trainers"] = [
            {"name": t.name, "aliases": list(t.aliases), "description": t.description}
            | {"features": t.features, "source": t.source}
            for t in trainers().values()
        ]
    return doc


def print_presets(kind: str) -> None:
    """The presets of ``kind`` (models, hardware, devices or all) as tables."""
    c = console()
    if kind in ("models", "all"):
        c.print(_model_presets())
    if kind in ("hardware", "all"):
        c.print(_hardware_presets())
    if kind in ("devices", "all"):
        c.print(_device_presets())
    if kind in ("runtimes", "all"):
        c.print(_runtime_presets())
    if kind in ("stacks", "all"):
        c.print(_stack_presets())
    if kind in ("prices", "all"):
        c.print(_price_presets())
    if kind in ("trainers", "all"):
        c.print(_trainer_presets())


def _price_presets() -> Table:
    """Prices per GPU-hour by chip, provider and market, each with its date and age."""
    from trilemma.presets.prices import STALE_DAYS, offers

    t = Table(title="prices per GPU-hour (presets/prices.toml; --provider, --market)")
    for col in ("gpu", "provider", "market", "$/GPU-hour", "read", "age", "product"):
        t.add_column(col, justify="right" if col in ("$/GPU-hour", "age") else "left")
    for o in sorted(offers(), key=lambda o: (o.gpu, o.market, o.usd_per_gpu_hour)):
        age = o.age_days()
        old = " (old)" if age > STALE_DAYS else ""
        t.add_row(
            o.gpu, o.provider, o.market, f"{o.usd_per_gpu_hour:.2f}", o.date,
            f"{age / 30.44:.0f} months{old}", shown(o.product),
        )  # fmt: skip
    return t


def _model_presets() -> Table:
    """The model presets: parameters, shape, and the sequence, batch and tokens they trained on."""
    from trilemma.presets import model_presets

    t = Table(title="model presets")
    for col in (
        "name",
        "params",
        "active",
        "layers",
        "d_model",
        "heads/kv",
        "ffn",
        "vocab",
        "seq",
        "batch",
        "tokens",
    ):
        t.add_column(col, justify="left" if col == "name" else "right")
    for m in model_presets().values():
        pc = param_counts(m)
        t.add_row(
            m.name,
            f"{pc.total:,}",
            fmt_count(pc.active) if m.is_moe else "",
            str(m.n_layers),
            str(m.d_model),
            f"{m.n_heads}/{m.kv_heads}",
            f"{m.ffn_dim} {m.ffn_type}",
            str(m.vocab_size),
            str(m.seq_len or ""),
            fmt_count(m.global_batch_tokens) if m.global_batch_tokens else "",
            fmt_count(m.tokens) if m.tokens else "",
        )
    return t


def _hardware_presets() -> Table:
    """The hardware presets: dense peaks, memory, bandwidths, power and price."""
    from trilemma.presets import all_hardware_presets

    t = Table(title="hardware presets (dense peaks)")
    for col in (
        "name",
        "bf16",
        "fp8",
        "memory",
        "HBM bw",
        "intra/dev",
        "inter/dev",
        "per node",
        "W",
        "$/h",
    ):
        t.add_column(col, justify="left" if col == "name" else "right")
    for h in all_hardware_presets().values():
        pk = h.peak_flop_per_s
        t.add_row(
            h.name,
            fmt_flop_rate(pk["bf16"]) if "bf16" in pk else "—",
            fmt_flop_rate(pk["fp8"]) if "fp8" in pk else "—",
            fmt_bytes(h.hbm_bytes),
            fmt_rate(h.hbm_bw_bytes_per_s),
            fmt_rate(h.intra_node_bw_bytes_per_s),
            fmt_rate(h.inter_node_bw_bytes_per_s),
            str(h.devices_per_node),
            f"{h.board_power_w:.0f}",
            f"{h.price_usd_per_hour:.2f}",
        )
    return t


def _device_presets() -> Table:
    """The deployment targets of --deploy."""
    from trilemma.presets import device_presets

    t = Table(title="deployment targets (--deploy)")
    for col in (
        "name",
        "kind",
        "chip",
        "memory",
        "an app may use",
        "bandwidth",
        "fp16",
        "W",
        "runtime",
    ):
        t.add_column(col, justify="left" if col in ("name", "kind", "chip", "runtime") else "right")
    for d in device_presets().values():
        t.add_row(
            d.name,
            d.kind,
            d.chip,
            fmt_bytes(d.ram_bytes),
            fmt_bytes(d.usable_bytes),
            fmt_rate(d.bandwidth_bytes_per_s),
            fmt_flop_rate(d.peak_flop_per_s.get("fp16", 0.0)),
            f"{d.power_w:.0f}",
            d.runtime,
        )
    return t


def _runtime_presets() -> Table:
    """The runtimes of --runtime: units, fitted constants (or the pooled fit), formats."""
    from trilemma.presets import runtime_presets

    t = Table(title="runtimes on a device (--runtime; sources: trilemma presets runtimes --json)")
    for col in (
        "name",
        "prefill",
        "decode",
        "bandwidth",
        "per token",
        "prefill share",
        "rows",
        "formats",
    ):
        t.add_column(col)
    for r in runtime_presets().values():
        ceiling = r.bandwidth_ceiling_bytes_per_s
        bw = (
            f"≤ {fmt_rate(ceiling)}"
            if ceiling
            else "pooled"
            if r.bandwidth_share is None
            else f"{r.bandwidth_share:.0%} of peak"
        )
        t.add_row(
            r.name,
            r.prefill_unit,
            r.decode_unit,
            bw,
            "pooled" if r.per_token_s is None else f"{r.per_token_s / MILLISECOND:.2g} ms",
            "pooled" if r.prefill_share is None else f"{r.prefill_share:.1%}",
            str(r.fit_rows),
            ", ".join(r.formats),
        )
    return t


def _stack_presets() -> Table:
    """The software stacks of --stack: attention kernel, what they fuse and overlap, their host."""
    from trilemma.presets import stacks

    t = Table(title="software stacks (--stack; sources: trilemma presets stacks --json)")
    for col in ("name", "attention", "fused", "overlapped", "sharded optimizer", "host"):
        t.add_column(col)
    for st in stacks().values():
        f = st.features
        fused = [k for k in ("norm", "act", "rotary", "loss") if f[f"fused_{k}"]]
        overlap = [k for k in ("dp", "tp", "pp", "ep") if f[f"{k}_overlap"]]
        if f["ep_node_limit"]:  # node-limited expert dispatch
            overlap.append(f"a token to ≤ {f['ep_node_limit']} nodes")
        overlap += [
            k
            for k, on in (("DualPipe", f["pp_dualpipe"]), ("fp8 dispatch", f["ep_fp8_dispatch"]))
            if on
        ]
        t.add_row(
            shown(st.name),
            str(f["attention"]),
            ", ".join(fused) or "—",
            ", ".join(overlap) or "—",
            "yes" if f["distributed_optimizer"] else "no",
            str(f["host"]),
        )
    return t


def _trainer_presets() -> Table:
    """The fine-tuning trainers of --trainer: what each keeps on the device."""
    from trilemma.presets import trainers

    t = Table(title="fine-tuning trainers (--trainer; sources: trilemma presets trainers --json)")
    for col in (
        "name",
        "activation offload",
        "loss",
        "optimizer in backward",
        "fp32 master",
        "GRPO reference",
        "rollout share",
        "engine in process",
        "log-probs",
    ):
        t.add_column(col)
    said = {True: "yes", False: "no", None: "the method's"}
    for tr in trainers().values():
        off = f"yes, {tr.offload_in_flight} in flight" if tr.activation_offload else "no"
        loss = tr.loss.value + (f", {tr.loss_chunks} chunks" if tr.loss.value == "chunked" else "")
        t.add_row(
            shown(tr.name),
            off,
            loss,
            "yes" if tr.optimizer_in_backward else "no",
            "yes" if tr.master_weights else "no",
            said[tr.kl_reference],
            "the method's" if tr.rollout_share is None else f"{tr.rollout_share:.0%}",
            said[tr.rollout_in_process],
            said[tr.rollout_logprobs],
        )
    return t
