"""The runners-up of a solve: plans that differ from the optimum in one lever (GPU type, model size,
GPU count, precision, tokens), each picked from the configuration table."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trilemma.solve.optimize import (
    D_MAX,
    D_MIN,
    Choice,
    Corners,
    Pins,
    best_index,
    cap_tokens,
    score_ok,
)
from trilemma.solve.search import ConfigTable

#: the levers a runner-up changes, one each: (label, the ConfigTable column it changes, or "tokens")
LEVERS = (
    ("GPU type", "gpu_idx"),
    ("model size", "model_idx"),
    ("GPU count", "n_gpus"),
    ("precision", "prec_idx"),
)
#: the token multiples shown for the tokens lever (what half or twice the data buys or costs)
TOKEN_STEPS = (("tokens ×½", 0.5), ("tokens ×2", 2.0))


def at_tokens(c: Corners, p: Pins, loss_fn, tokens: float) -> Choice:
    """Every configuration trained on the same ``tokens``: its corners, and whether they meet the pins."""
    D = np.full(c.s_per_token.shape, float(tokens))
    loss = loss_fn(c.n_total, c.n_non_embedding, D, c.precision)
    feasible = (D <= cap_tokens(c, p) * (1 + 1e-9)) & (D >= c.batch_tokens)
    if p.target_loss is not None:
        feasible &= loss <= p.target_loss * (1 + 1e-9)
    feasible &= score_ok(c, p, D)
    return Choice(
        tokens=D,
        time_s=D * c.s_per_token,
        usd=D * c.usd_per_token + c.fixed_usd,
        gpu_hours=D * c.gpu_hours_per_token,
        kwh=D * c.kwh_per_token,
        loss=loss,
        feasible=feasible,
    )


def over_pins(ch: Choice, p: Pins) -> np.ndarray:
    """Per configuration: the largest ratio of a corner to its pin (≤ 1 meets every pin)."""
    worst = np.zeros(ch.time_s.shape)
    for limit, v in (
        (p.deadline_s, ch.time_s),
        (p.budget_usd, ch.usd),
        (p.budget_gpu_hours, ch.gpu_hours),
        (p.budget_kwh, ch.kwh),
        (p.target_loss, ch.loss),
    ):
        if limit is not None:
            worst = np.maximum(worst, v / limit)
    return worst


def runners_up(
    table: ConfigTable, c: Corners, p: Pins, loss_fn, tokens: float, best: int
) -> list[tuple[str, int, float]]:
    """Plans that differ from the optimum (configuration ``best`` on ``tokens``) in exactly one lever, named
    by the row, so the row shows what that lever buys or costs: (label, configuration, tokens).

    GPU type, model size, GPU count and precision keep everything else, tokens included; of the
    configurations that differ only there, the best on the objective among those that meet the pins, else
    the one that breaks them least (``over_pins``). A chip that lacks the optimum's precision runs another
    (bf16 → fp16 on a V100: the search's fallback, trilemma.solve.search; fp8 → bf16 on an A100): the chip
    forced that change, so it is the GPU-type row, not a precision row; precision rows change it on the
    optimum's own chip. Tokens: the optimum's plan on half
    and on twice its tokens."""
    ch = at_tokens(c, p, loss_fn, tokens)
    col = {k: getattr(table, k) for _, k in LEVERS}
    prec = table.precisions[table.prec_idx[best]]
    forced = np.array([prec not in h.peak_flop_per_s for h in table.gpus])[
        table.gpu_idx
    ]  # chip lacks it
    out: list[tuple[str, int, float]] = []
    for label, k in LEVERS:
        same = np.ones(len(table), dtype=bool)
        for _, other in LEVERS:
            if other != k and not (k == "gpu_idx" and other == "prec_idx"):
                same &= col[other] == col[other][best]
        mask = (
            same & (col[k] != col[k][best]) & (tokens >= c.batch_tokens)
        )  # a plan trains one batch at least
        if k == "gpu_idx":
            mask &= (table.prec_idx == table.prec_idx[best]) | forced
        if not mask.any():
            continue
        i = best_index(ch, p.minimize, mask)
        if i is None:  # none meets the pins: the one that misses them by least
            i = int(np.argmin(np.where(mask, over_pins(ch, p), np.inf)))
        out.append((label, i, float(tokens)))
    for label, f in TOKEN_STEPS:
        if D_MIN <= tokens * f <= D_MAX and tokens * f >= c.batch_tokens[best]:
            out.append((label, best, float(tokens * f)))
    return out


@dataclass(frozen=True)
class Candidate:
    """One plan picked from the table: its row, tokens and corners."""

    row: int
    why: str
    tokens: float
    time_s: float
    usd: float
    gpu_hours: float
    kwh: float
    loss: float
    extra: dict = field(default_factory=dict)


def candidate(ch: Choice, i: int, why: str) -> Candidate:
    return Candidate(
        row=i,
        why=why,
        tokens=float(ch.tokens[i]),
        time_s=float(ch.time_s[i]),
        usd=float(ch.usd[i]),
        gpu_hours=float(ch.gpu_hours[i]),
        kwh=float(ch.kwh[i]),
        loss=float(ch.loss[i]),
    )
