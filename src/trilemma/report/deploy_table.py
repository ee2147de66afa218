"""The deployment table of one estimate in the terminal: memory on the device, speed, energy."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from trilemma.units import MILLISECOND, fmt_bytes


def deploy_table(d: dict[str, Any]) -> Table:
    """The ``deploy`` block of an estimate: memory on the device, fits and margin, speed, energy."""
    t = Table(
        title=f"deployed on {d['device']} ({d['kind']}) under {d['runtime']}, {d['precision']} weights, "
        f"{d['context']:,}-token context",
        show_header=False,
    )
    t.add_column(style="bold")
    t.add_column()
    verdict = "[green]fits[/green]" if d["fits"] else "[red]does not fit[/red]"
    t.add_row(
        "memory",
        f"{fmt_bytes(d['weights_bytes'])} weights ({d['bits_per_weight']:g} bits each with scales) + "
        f"{fmt_bytes(d['kv_cache_bytes'])} KV cache + {fmt_bytes(d['runtime_bytes'])} runtime share "
        f"of the {fmt_bytes(d['usable_bytes'])} an app may use: {verdict}, margin "
        f"{fmt_bytes(abs(d['margin_bytes']))}{'' if d['fits'] else ' short'}",
    )
    t.add_row(
        "decode",
        f"[bold]{d['decode_tokens_per_s']:,.1f} tokens/s[/bold] (80% band {d['decode_tokens_per_s_low']:,.1f} – "
        f"{d['decode_tokens_per_s_high']:,.1f}; on the {d['decode_unit']}, {d['runtime']} reaches "
        f"{d['bandwidth_efficiency']:.0%} of peak bandwidth + {d['per_token_s'] / MILLISECOND:.2g} ms per token)",
    )
    pre = d["prefill_tokens_per_s"]
    t.add_row(
        "prefill",
        "not predicted" if pre is None else f"{pre:,.0f} tokens/s on the {d['prefill_unit']}",
    )
    t.add_row(
        "energy",
        f"{d['energy_per_token_j']:.3g} J per token; [bold]{d['energy_per_answer_j']:.3g} J per chat answer"
        f"[/bold] (band {d['energy_per_answer_j_low']:.3g} – {d['energy_per_answer_j_high']:.3g}, the decode "
        "band's; 70-token prompt, 215-token reply: LMSYS-Chat-1M means)",
    )
    if d.get("answers_per_charge") is not None:
        t.add_row(
            "battery",
            f"[bold]{d['answers_per_charge']:,.0f} answers per charge[/bold] (band "
            f"{d['answers_per_charge_low']:,.0f} – {d['answers_per_charge_high']:,.0f}) = "
            f"{d['battery_wh']:g} Wh × 3,600 J/Wh / J per answer, the answers alone (the screen and radios "
            f"draw too); {d['battery_source']}",
        )
    q = d.get("quantisation_loss_nats")
    t.add_row(
        "quantisation",
        (f"loss + {q:.5f} nats: " if q is not None else "") + f"{d['quantisation_loss_source']}",
    )
    for n in d.get("notes", []):
        t.add_row("note", n)
    return t
