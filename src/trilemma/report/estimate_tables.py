"""The tables of one estimate in the terminal: plan, memory, speed and cost (the deployment's:
trilemma.report.deploy_table)."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from trilemma.console import shown
from trilemma.estimate.stragglers import gpu_spread
from trilemma.specs import Task
from trilemma.units import (
    fmt_bytes,
    fmt_co2_kg,
    fmt_count,
    fmt_duration,
    fmt_energy_kwh,
    fmt_flop,
    fmt_flop_rate,
    fmt_gpu_hours,
    fmt_power,
    fmt_rate,
    fmt_usd,
)


def memory_margin(mem: Any) -> str:
    """Capacity left at the predicted peak, and the headroom the verdict keeps for the model's error."""
    free = mem.free_bytes
    left = (
        f"{fmt_bytes(free)} ({free / mem.capacity_bytes:.0%})"
        if free >= 0
        else f"none: {fmt_bytes(-free)} over ({-free / mem.capacity_bytes:.0%})"
    )
    if mem.headroom <= 0:
        return left
    return (
        left
        + f"; a plan must leave {mem.headroom:.0%} ({fmt_bytes(mem.capacity_bytes * mem.headroom)}) free to fit "
        "(the memory model's 80% band; --memory-headroom)"
    )


def goodput_line(t: Any) -> str:
    """The goodput row: the share, and what the failure model and the straggler share each take."""
    if t.goodput_given:
        return f"{t.goodput:.0%} (given with --goodput)"
    r = t.reliability
    lost = sum(r["lost_s"].values())
    return (
        f"{t.goodput:.0%} = failures and checkpoints {r['goodput']:.0%} × slowest GPU each step {t.other_share:.0%}  "
        f"({r['expected_interruptions']:,.1f} interruptions expected, MTBF {fmt_duration(r['mtbf_s'])}; "
        f"checkpoint every {fmt_duration(r['checkpoint_interval_s'])}, written in "
        f"{fmt_duration(r['checkpoint_write_s'])}; {fmt_duration(lost)} lost; slowest GPU: 1/(1 + σ·E(max of "
        f"the GPUs' paces)), σ {gpu_spread().sigma:.2%} from Sinha et al. 2022, outliers drained; "
        "evaluation and stalls not counted)"
    )


def finetune_line(est: Any) -> str:
    """What a fine-tune trains and stores, in one line."""
    f = est.finetune
    what = f"{f['method']}: {f['trainable_params']:,} trainable ({f['trainable_fraction']:.2%})"
    if f["lora_rank"] is not None:
        what += (
            f", rank {f['lora_rank']}, alpha {f['lora_alpha']:g} on {', '.join(f['lora_targets'])}"
        )
    if f["trainable_layers"] is not None:
        what += f", last {f['trainable_layers']} layers"
    return (
        what
        + f"; base {f['base_precision']} ({f['base_linear_bits_per_weight']:.3f} bits per linear weight); "
        f"optimizer {f['optimizer']}; offload {f['offload']}"
    )


def _partial_step(est: Any) -> str:
    """Where the tokens are not a whole number of global batches (one stage): the last step's tokens, which the
    time counts as a partial batch (time is linear in tokens: a data loader that keeps its last, short batch,
    as PyTorch's DataLoader does by default, drop_last=False). Said below 1,000 steps, where one step is more
    than a thousandth of the time."""
    if len(est.stages) != 1 or est.stages[0].steps >= 1000:
        return ""
    s = est.stages[0]
    frac = s.steps - math.floor(s.steps + 1e-9)
    return f" (the last of {fmt_count(frac * s.global_batch_tokens)} tokens)" if frac > 1e-9 else ""


def _host_class(est: Any) -> str:
    """Whose host share the power counts when --host-power is not given: the chip's system class, or a
    DGX H100's for a chip whose preset has no system figure."""
    cl = est.cluster
    if cl.host_power_w_per_node is not None or cl.is_cpu:
        return ""
    if cl.hardware.host_power_w_per_device is None:
        return f": a DGX H100's, no system figure for {cl.hardware.name}"
    return ""


def stack_line(plan: Any) -> str:
    """The software stack a plan is timed on: its name (or that none was given), attention kernel,
    host, and the plan fields flags set against it (trilemma.specs.stack_plan)."""
    from trilemma.specs.stack_plan import stack_document

    doc = stack_document(plan)
    f, over = doc["features"], doc["overrides"]
    name = shown(doc["name"]) if doc["given"] else "none given (--stack NAME): default features"
    flags = ", ".join(f"{k} {v}" for k, v in over.items())
    return f"{name} — {f['attention']} attention, {f['host']} host" + (
        f"; flags set {flags}" if flags else ""
    )


def trainer_line(tr: Any) -> str:
    """The fine-tuning trainer's memory features in one line (trilemma.specs.trainer.TrainerSpec)."""
    off = (
        f"activation offload ({tr.offload_in_flight} layer(s) in flight)"
        if tr.activation_offload
        else "no activation offload"
    )
    loss = f"{tr.loss.value} loss" + (
        f" ({tr.loss_chunks} chunks)" if tr.loss.value == "chunked" else ""
    )
    rest = ["optimizer in backward"] if tr.optimizer_in_backward else []
    rest.append("fp32 master" if tr.master_weights else "bf16 throughout")
    return f"{shown(tr.name)} — {off}, {loss}, " + ", ".join(rest)


def plan_table(est: Any) -> Table:
    """The head of an estimate: model, shape, training, fine-tune, hardware and layout."""
    m, cl, lay, p = est.model, est.cluster, est.layout, est.params
    hw = cl.hardware
    peak = hw.peak(est.plan.precision)
    head = Table(
        title=f"trilemma estimate — {shown(m.name)} on {cl.n_gpus}× {shown(hw.name)}",
        show_header=False,
        box=None,
    )
    head.add_column(style="bold")
    head.add_column()
    moe = f" ({fmt_count(p.active)} active)" if m.is_moe else ""
    head.add_row(
        "model", f"{shown(m.name)}: {p.total:,} parameters{moe} — {shown(est.model_resolution)}"
    )
    attn = (
        f"{m.n_heads} heads of {m.d_head} + {m.qk_rope_head_dim} rotary (MLA: kv latent "
        f"{m.kv_lora_rank}, q latent {m.q_lora_rank})"
        if m.is_mla
        else f"{m.n_heads} heads ({m.kv_heads} kv)"
    )
    experts = (
        f", {f'{m.n_shared_experts} shared + ' if m.n_shared_experts else ''}{m.n_experts} "
        f"routed experts of {m.expert_ffn} "
        f"({m.top_k} per token)"
        if m.is_moe
        else ""
    )
    head.add_row(
        "shape",
        f"{m.n_layers} layers, d={m.d_model}, {attn}, ffn {m.ffn_dim} {m.ffn_type}{experts}, "
        f"vocab {m.vocab_size}",
    )
    st = est.stages
    batch = ", ".join(
        f"{fmt_count(s.tokens)} tokens at seq {s.seq_len} × {s.global_batch_sequences} seqs "
        f"({fmt_count(s.global_batch_tokens)} tokens/step)"
        for s in st
    )
    head.add_row("training", f"{batch}, {est.plan.precision}")
    head.add_row("stack", stack_line(est.plan))
    if est.finetune is not None:
        head.add_row("fine-tune", finetune_line(est))
    if est.plan.trainer is not None:
        head.add_row("trainer", trainer_line(est.plan.trainer))
    head.add_row(
        "hardware",
        f"{cl.n_gpus}× {shown(hw.name)}, {fmt_flop_rate(peak)} {est.plan.precision} dense peak, "
        f"{cl.node_size}/node, intra {fmt_rate(cl.intra_bw)}, inter {fmt_rate(cl.inter_bw)} per device",
    )
    fits = (
        "that fits" if est.memory.fits else "that fits at the memory band's favourable end (tight)"
    )
    head.add_row(
        "layout",
        lay.label()
        + (" · async TP" if est.async_tp_applied else "")
        + " — "
        + (
            f"fastest of {est.candidates_evaluated} candidates {fits}"
            if est.layout_chosen == "auto"
            else f"fastest of {est.candidates_evaluated} candidates with the axes given {fits}"
            if est.candidates_evaluated > 1
            else "given"
        ),
    )
    return head


def memory_table(est: Any) -> Table:
    """Memory per GPU by part, the total against the device's, its band and the free margin."""
    mem = est.memory
    mt = Table(title="memory per GPU", show_lines=False)
    mt.add_column("part")
    mt.add_column("size", justify="right")
    act = "activations" + (" (torch.compile)" if est.plan.compile else "")
    rows = [
        ("weights", mem.weights),
        ("gradients", mem.gradients),
        ("optimizer", mem.optimizer),
        (act, mem.activations),
    ]
    if mem.float8_casts > 0:
        rows.append(("  of which float8 casts", mem.float8_casts))
    rows += [
        ("logits", mem.logits),
        ("CUDA context", mem.cuda_context),
        ("NCCL buffers", mem.nccl),
        ("framework residual (fitted)", mem.framework_residual),
    ]
    rows += [(n, v) for n, v in (("reference model (RL)", mem.reference),
                                 ("generation engine (RL)", mem.generation),
                                 ("reward model (PPO)", mem.reward),
                                 ("critic: weights, gradients, optimizer (PPO)", mem.critic)) if v > 0]  # fmt: skip
    for name, v in rows:
        mt.add_row(name, fmt_bytes(v))
    if mem.host_bytes > 0:
        mt.add_row(
            "host (offloaded)",
            f"{fmt_bytes(mem.host_bytes)} of {fmt_bytes(mem.host_capacity_bytes)} host memory per GPU",
        )
    verdict = (
        "[green]fits[/green]"
        if mem.fits
        else "[yellow]tight[/yellow]"
        if mem.tight
        else "[red]OOM[/red]"
    )
    mt.add_row(
        "[bold]total[/bold]",
        f"[bold]{fmt_bytes(mem.per_gpu_bytes)}[/bold] of {fmt_bytes(mem.capacity_bytes)} {verdict}",
    )
    if mem.per_gpu_bytes_high > mem.per_gpu_bytes_low:
        mt.add_row(
            "80% band", f"{fmt_bytes(mem.per_gpu_bytes_low)} – {fmt_bytes(mem.per_gpu_bytes_high)}"
        )
    mt.add_row("free", memory_margin(mem))
    return mt


#: the step's operation classes as the speed table names them (TimeArrays.ops_mb)
OP_CLASS_NAMES = {
    "gemm": "GEMMs",
    "attention": "attention",
    "elementwise": "memory-bound",
    "kernel_launch": "launches",
    "lm_head": "LM head",
    "host": "waiting for the host",
}


def speed_table(est: Any) -> Table:
    """Step time by part, compute by op, throughput, MFU, FLOPs, wall time, goodput, GPU-hours."""
    cl, t = est.cluster, est.time
    peak = cl.hardware.peak(est.plan.precision)
    tt = Table(title="speed", show_header=False)
    tt.add_column(style="bold")
    tt.add_column()
    tt.add_row(
        "step time",
        f"{fmt_duration(t.step_s)}  (compute {fmt_duration(t.compute_s)}, TP/EP comm "
        f"{fmt_duration(t.tp_comm_s)}, PP {fmt_duration(t.pp_comm_s)}, bubble "
        f"{fmt_duration(t.bubble_s)}, DP {fmt_duration(t.dp_comm_s)}"
        + (f", optimizer {fmt_duration(t.optimizer_s)}" if t.optimizer_s > 0 else "")
        + ")"
        + (
            f"; 80% band {fmt_duration(t.step_s_low)} – {fmt_duration(t.step_s_high)}"
            if t.step_s_high > t.step_s_low
            else ""
        ),
    )
    if t.ops_s and t.compute_s > 0:
        names = OP_CLASS_NAMES
        tt.add_row(
            "compute by op",
            ", ".join(f"{names.get(k, k)} {v / t.compute_s:.0%}" for k, v in t.ops_s.items()),
        )
    tt.add_row(
        "throughput",
        f"{fmt_count(t.tokens_per_s)} tokens/s, {fmt_count(t.tokens_per_s / cl.n_gpus)} per GPU",
    )
    tt.add_row("MFU / HFU", f"{t.mfu:.1%} / {t.hfu:.1%}  ({fmt_flop_rate(t.mfu * peak)} per GPU)")
    conv = (
        "PaLM convention"
        if est.finetune is None
        else "executed: no weight gradients for frozen weights"
    )
    conv += ", no LM head (classification)" if est.plan.task == Task.CLASSIFICATION else ""
    tt.add_row(
        "compute",
        f"{fmt_flop(est.total_model_flop)} model ({fmt_count(est.model_flop_per_token)} FLOP/token, {conv})",
    )
    band = t.total_s_high > t.total_s_low
    tt.add_row(
        "wall time",
        f"[bold]{fmt_duration(t.total_s)}[/bold]"
        + (
            f" (80% band {fmt_duration(t.total_s_low)} – {fmt_duration(t.total_s_high)})"
            if band
            else ""
        )
        + f"; {math.ceil(t.steps - 1e-9):,} steps"
        + _partial_step(est),
    )  # a partial last step is a step
    tt.add_row(
        "goodput",
        goodput_line(t)
        if est.finetune is None
        else goodput_line(t).replace(
            "other overheads fitted on whole runs",
            "a fine-tune: the share fitted on months-long pre-training runs is not applied",
        ),
    )
    tt.add_row(
        "GPU-hours",
        fmt_gpu_hours(t.gpu_hours)
        + (
            f" ({fmt_gpu_hours(t.gpu_hours_low)} – {fmt_gpu_hours(t.gpu_hours_high)})"
            if band
            else ""
        ),
    )
    if t.band_reasons:
        tt.add_row("bands widened", "; ".join(t.band_reasons))
    return tt


def cost_table(est: Any) -> Table:
    """Dollars, energy, power and CO2 of the run, with their bands."""
    t, co = est.time, est.cost
    band = t.total_s_high > t.total_s_low
    ct = Table(title="cost", show_header=False)
    ct.add_column(style="bold")
    ct.add_column()
    ct.add_row(
        "dollars",
        f"[bold]{fmt_usd(co.usd)}[/bold]"
        + (f" ({fmt_usd(co.usd_low)} – {fmt_usd(co.usd_high)})" if band else "")
        + f" at {fmt_usd(co.price_usd_per_gpu_hour)}/GPU-hour",
    )
    if getattr(est, "owned", None) is not None:
        ct.add_row("owned", owned_line(est.owned, band))
    eband = band and co.energy_kwh_high > co.energy_kwh_low
    ct.add_row(
        "energy",
        fmt_energy_kwh(co.energy_kwh)
        + (
            f" ({fmt_energy_kwh(co.energy_kwh_low)} – {fmt_energy_kwh(co.energy_kwh_high)})"
            if eband
            else ""
        )
        + f" (PUE {co.pue}) ≈ {co.household_years:,.1f} US household-years",
    )
    ct.add_row(
        "power",
        f"[bold]{fmt_power(co.power_w)}[/bold] while it runs (host and network "
        f"{co.host_power_w_per_device:,.0f} W per device{_host_class(est)}, PUE {co.pue}) ≈ "
        f"{co.homes_powered:,.0f} average US homes powered for the run's duration",
    )

    def co2(kg: float) -> str:  # in the point's unit
        return fmt_co2_kg(kg, co.co2_kg)

    ct.add_row(
        "CO2",
        f"{co2(co.co2_kg)} CO2e"
        + (f" ({co2(co.co2_kg_low)} – {co2(co.co2_kg_high)})" if eband else "")
        + f" at {co.grid_kg_co2_per_kwh} kg/kWh",
    )
    return ct


def owned_line(o: dict[str, Any], band: bool = True) -> str:
    """The run on owned hardware beside the rented price: dollars (band), capital and energy parts."""
    i = o["inputs"]
    return (
        f"[bold]{fmt_usd(o['usd'])}[/bold]"
        + (f" ({fmt_usd(o['usd_low'])} – {fmt_usd(o['usd_high'])})" if band else "")
        + f" on owned hardware = capital {fmt_usd(o['capital_usd'])} ({fmt_usd(i['capital_usd_per_gpu'])}"
        f" per GPU over {i['years']:g} years at {i['utilisation']:.0%} utilisation: "
        f"{fmt_usd(o['capital_usd_per_gpu_hour'])}/GPU-hour) + energy {fmt_usd(o['energy_usd'])} at "
        f"{fmt_usd(i['usd_per_kwh'])}/kWh; rented {fmt_usd(o['rented_usd'])}"
    )
