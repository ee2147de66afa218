"""Stage 2 of the solver: tokens in closed form, pins as masks, the optimum, and an explanation
when nothing is feasible (runners-up: trilemma.solve.levers; the frontier: trilemma.solve.frontier).

For every configuration (model, GPU type, precision, count, best layout) from stage 1, time,
GPU-hours, dollars and energy are linear in tokens D, and the loss is the law's L(N, D):
- a deadline T or a budget caps D (D ≤ T / seconds-per-token, D ≤ B / dollars-per-token, …);
- a target loss L* asks for the D that reaches it (the law inverted numerically, vectorised);
so each configuration's corners follow without another search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trilemma.errors import InfeasibleError, InputError
from trilemma.estimate.cost import energy_j, facility_power_w
from trilemma.solve import score as sc
from trilemma.solve.power import device_watts
from trilemma.solve.search import ConfigTable, params_of
from trilemma.units import DAY, HOUR, KWH, fmt_count, fmt_duration, fmt_usd

CORNERS = ("time", "cost", "loss", "energy")
D_MIN, D_MAX = 1e6, 1e16  # tokens: the range the inverse search and caps work in


@dataclass(frozen=True)
class Pins:
    """Pinned corners (None = free) and the objective."""

    deadline_s: float | None = None
    budget_usd: float | None = None
    budget_gpu_hours: float | None = None
    budget_kwh: float | None = None
    target_loss: float | None = None
    minimize: str = "loss"
    # a benchmark and the score (fraction) the lower end of its 80% band must reach
    # (trilemma.quality.benchmarks.parse_target), or None
    target_score: tuple[str, float] | None = None
    max_power_w: float | None = None  # the site's facility power while training, W (--max-power)

    def as_dict(self) -> dict[str, Any]:
        return {
            "deadline_s": self.deadline_s,
            "budget_usd": self.budget_usd,
            "budget_gpu_hours": self.budget_gpu_hours,
            "budget_kwh": self.budget_kwh,
            "target_loss": self.target_loss,
            "minimize": self.minimize,
            "target_score": None
            if self.target_score is None
            else {"benchmark": self.target_score[0], "score": self.target_score[1]},
            "max_power_w": self.max_power_w,
        }


def default_objective(p: Pins) -> str:
    """The free corner: loss when time and money are pinned, and so on."""
    time_pinned = p.deadline_s is not None
    # a site's power is the resource corner too: with a deadline, the loss is what is left to minimise
    money_pinned = any(
        x is not None for x in (p.budget_usd, p.budget_gpu_hours, p.budget_kwh, p.max_power_w)
    )
    loss_pinned = p.target_loss is not None or p.target_score is not None
    free = [
        c
        for c, pinned in (("loss", loss_pinned), ("time", time_pinned), ("cost", money_pinned))
        if not pinned
    ]
    return free[0] if len(free) == 1 else ("cost" if not free else "")


@dataclass(frozen=True)
class Corners:
    """Per-configuration rates and, for a chosen D, the corners (arrays over configurations)."""

    s_per_token: np.ndarray  # wall-clock seconds per token (goodput applied)
    usd_per_token: np.ndarray
    gpu_hours_per_token: np.ndarray
    kwh_per_token: np.ndarray
    n_total: np.ndarray
    n_non_embedding: np.ndarray
    precision: np.ndarray  # per configuration: lower precision costs quality through the law
    batch_tokens: np.ndarray  # the configuration's global batch, tokens: a plan trains at least one
    power_w: np.ndarray | float = 0.0  # facility power while it runs, W (device_watts × devices)
    # serving the trained model (--inference-tokens), dollars per configuration, whatever the training tokens:
    # lifetime cost = training + this (serving_usd)
    fixed_usd: np.ndarray | float = 0.0


def table_goodput(
    table: ConfigTable,
    seq_len: int,
    plan_fields: dict | None = None,
    cluster_fields: dict | None = None,
) -> np.ndarray:
    """Goodput per configuration: the failure model's steady share for its GPU count and checkpoint size
    (trilemma.estimate.goodput.steady_goodput: runs longer than one checkpoint interval; at the failure rate,
    restart time and storage bandwidth of ``cluster_fields`` where given, ClusterSpec's keys), times the
    straggler share for its GPU count (trilemma.estimate.stragglers.straggler_share; not for a fine-tune:
    trilemma.estimate.evaluate.gpu_speed_spread_for). ``estimate`` recomputes it for the chosen plan's own
    duration."""
    from trilemma.estimate.evaluate import gpu_speed_spread_for
    from trilemma.estimate.finetune import checkpoint_bytes
    from trilemma.estimate.goodput import cluster_reliability, steady_goodput
    from trilemma.estimate.params import param_counts
    from trilemma.estimate.stragglers import straggler_share
    from trilemma.resolve import make_plan

    if not len(table):
        return np.zeros(0)
    batch = float(table.batch_tokens[0])
    # one global batch of tokens: the plan only carries the precision's storage (its checkpoint bytes)
    plans = [
        make_plan(table.models[0], batch, seq_len, batch, p, **(plan_fields or {}))
        for p in table.precisions
    ]
    tot, _ = params_of(table)
    if (
        plans[0].finetune is not None
    ):  # one model: a fine-tune saves what trains (finetune.checkpoint_bytes)
        m = table.models[0]
        ckpt = np.array([float(checkpoint_bytes(m, param_counts(m), pl)) for pl in plans])[
            table.prec_idx
        ]
    else:
        ckpt = tot * np.array([pl.checkpoint_bytes_per_param for pl in plans])[table.prec_idx]
    cf = cluster_fields or {}
    reliability = cluster_reliability(
        cf.get("failures_per_gpu_hour"), cf.get("restart_s"), cf.get("storage_write_bytes_per_s")
    )
    return np.asarray(steady_goodput(table.n_gpus, ckpt, **reliability)) * np.asarray(
        straggler_share(table.n_gpus, gpu_speed_spread_for(plans[0]))
    )


def rates(
    table: ConfigTable,
    goodput: np.ndarray | float,
    prices: dict[str, float],
    energy: dict[str, float],
    cluster_fields: dict[str, Any] | None = None,
) -> Corners:
    g = table.gpu_idx
    price = np.array([prices.get(h.name, h.price_usd_per_hour) for h in table.gpus])[g]
    watts = device_watts(table.gpus, energy, cluster_fields)[g]
    spt = 1.0 / (table.tokens_per_s * goodput)
    n = table.n_gpus.astype(float)
    tot, non = params_of(table)
    prec = np.array([str(p) for p in table.precisions])[table.prec_idx]
    return Corners(
        s_per_token=spt,
        usd_per_token=spt * n * price / HOUR,
        gpu_hours_per_token=spt * n / HOUR,
        kwh_per_token=energy_j(n, spt, watts) / KWH,
        n_total=tot,
        n_non_embedding=non,
        precision=prec,
        batch_tokens=table.batch_tokens.astype(float),
        power_w=facility_power_w(n, watts),
    )


def serving_usd(c: Corners, inference_tokens: float) -> np.ndarray:
    """Serving ``inference_tokens`` with each configuration's model, dollars, as Sardana et al. 2023 count it
    ("Beyond Chinchilla-Optimal", arXiv 2401.00448, Eq. 2: total FLOPs = 6·N·D_tr + 2·N·D_inf): 2·N FLOPs per
    served token, priced at the cheapest dollars per training FLOP (6·N per token) among the configurations
    searched — one rate for every model, so serving depends on the model alone, not on how it was trained.
    A larger model costs more to serve: with many inference tokens the optimum moves to a smaller model
    trained on more tokens."""
    usd_per_flop = float(np.min(c.usd_per_token / (6.0 * c.n_total)))
    return 2.0 * c.n_total * float(inference_tokens) * usd_per_flop


def tokens_for_loss(
    loss_fn, n_tot: np.ndarray, n_non: np.ndarray, target: float, prec: np.ndarray
) -> np.ndarray:
    """Smallest D in [D_MIN, D_MAX] with loss(N, D) ≤ target per configuration; inf if unreachable
    (trilemma.quality.forms.tokens_for_loss: bisection in ln D, 48 halvings)."""
    from trilemma.quality.forms import tokens_for_loss as invert

    return invert(
        lambda d: loss_fn(n_tot, n_non, d, prec),
        target,
        n_tot.shape,
        d_min=D_MIN,
        d_max=D_MAX,
        iters=48,
    )


def score_tokens(c: Corners, p: Pins) -> np.ndarray:
    """Per configuration, the fewest tokens that meet the target score (trilemma.solve.score)."""
    return sc.fewest_tokens(p.target_score, c.n_total, D_MIN, D_MAX)


def score_ok(c: Corners, p: Pins, tokens: np.ndarray, cfg: np.ndarray | None = None) -> np.ndarray:
    """Whether ``tokens`` meet the target score for each configuration (or configurations ``cfg``)."""
    n = c.n_total if cfg is None else c.n_total[cfg]
    return sc.meets(p.target_score, n, tokens, D_MIN, D_MAX)


def cap_tokens(c: Corners, p: Pins) -> np.ndarray:
    """The most tokens each configuration can train within the time and money pins."""
    cap = np.full(c.s_per_token.shape, np.inf)
    for limit, per in (
        (p.deadline_s, c.s_per_token),
        (p.budget_usd, c.usd_per_token),
        (p.budget_gpu_hours, c.gpu_hours_per_token),
        (p.budget_kwh, c.kwh_per_token),
    ):
        if limit is not None:
            left = (
                limit - c.fixed_usd if per is c.usd_per_token else limit
            )  # the serving cost comes off the budget
            cap = np.minimum(cap, np.maximum(left, 0.0) / per)
    return cap


@dataclass(frozen=True)
class Choice:
    """Chosen tokens and the corners they give, per configuration."""

    tokens: np.ndarray
    time_s: np.ndarray
    usd: np.ndarray
    gpu_hours: np.ndarray
    kwh: np.ndarray
    loss: np.ndarray
    feasible: np.ndarray

    def metric(self, name: str) -> np.ndarray:
        return {"time": self.time_s, "cost": self.usd, "loss": self.loss, "energy": self.kwh}[name]


def choose_tokens(c: Corners, p: Pins, loss_fn, fixed_tokens: float | None) -> Choice:
    cap, need = cap_tokens(c, p), score_tokens(c, p)
    if fixed_tokens is not None:
        D = np.full(cap.shape, float(fixed_tokens))
    elif p.minimize == "loss":  # within the target score's window, when one is pinned
        D = np.minimum(np.minimum(cap, sc.most(p.target_score, c.n_total)), D_MAX)
    else:
        if p.target_loss is None and p.target_score is None:
            raise InputError(
                "minimize",
                p.minimize,
                "a target loss (--target-loss), a target score (--target-score) or fixed --tokens "
                "to go with it: without one the cheapest or fastest plan trains nothing",
            )
        D = (
            tokens_for_loss(loss_fn, c.n_total, c.n_non_embedding, p.target_loss, c.precision)
            if p.target_loss is not None
            else np.zeros(cap.shape)
        )
        D = np.maximum(D, need)
        # at least one global batch: a target the law meets with fewer tokens (any loss above the first
        # batch's) is met by that one batch too, since loss falls with D
        D = np.maximum(D, c.batch_tokens)
    D = np.where(np.isfinite(D), D, np.nan)
    loss = loss_fn(c.n_total, c.n_non_embedding, np.nan_to_num(D, nan=D_MIN), c.precision)
    feasible = np.isfinite(D) & (D <= cap * (1 + 1e-9)) & (D >= np.maximum(D_MIN, c.batch_tokens))
    if p.target_loss is not None:
        feasible &= loss <= p.target_loss * (1 + 1e-9)
    feasible &= score_ok(c, p, np.nan_to_num(D, nan=0.0))
    return Choice(
        tokens=D,
        time_s=D * c.s_per_token,
        usd=D * c.usd_per_token + c.fixed_usd,
        gpu_hours=D * c.gpu_hours_per_token,
        kwh=D * c.kwh_per_token,
        loss=loss,
        feasible=feasible,
    )


def best_index(ch: Choice, objective: str, mask: np.ndarray | None = None) -> int | None:
    """The feasible configuration best on ``objective``; ties (within 1e-6) broken on the other corners
    in turn, so that the optimum is never dominated by a plan as good on the objective and better on
    cost, time or loss (minimising loss on a budget, many plans spend the whole budget)."""
    ok = ch.feasible if mask is None else ch.feasible & mask
    if not ok.any():
        return None
    order = [objective] + [c for c in ("cost", "time", "loss") if c != objective]
    near = ok
    for corner in order:
        v = np.where(near, ch.metric(corner), np.inf)
        top = v.min()
        near = near & (v <= top * (1 + 1e-6) + 1e-12)
    return int(np.argmin(np.where(near, ch.metric(objective), np.inf)))


# ------------------------------------------------------------------ infeasibility


def _move_money_or_time(c: Corners, p: Pins, D: np.ndarray, goal: str) -> list[str]:
    """What reaching ``goal`` (with D tokens per configuration, inf where out of reach) costs at the
    pinned deadline, and how long it takes on the pinned budget."""
    reach = np.isfinite(D)
    parts: list[str] = []
    t = np.where(reach, D * c.s_per_token, np.inf)
    usd = np.where(reach, D * c.usd_per_token + c.fixed_usd, np.inf)
    if p.deadline_s is not None:  # hold the deadline, move the money
        within = t <= p.deadline_s
        if within.any():
            parts.append(
                f"{goal} needs {fmt_usd(usd[within].min())} at {fmt_duration(p.deadline_s)}"
            )
        else:
            k = int(np.argmin(t))
            parts.append(
                f"{goal} cannot be reached in {fmt_duration(p.deadline_s)} at any cost "
                f"(fastest: {fmt_duration(t[k])} for {fmt_usd(usd[k])})"
            )
    if p.budget_usd is not None:  # hold the money, move the deadline
        within = usd <= p.budget_usd
        if within.any():
            parts.append(f"or {fmt_duration(t[within].min())} at {fmt_usd(p.budget_usd)}")
        else:
            k = int(np.argmin(usd))
            parts.append(
                f"{goal} cannot be reached for {fmt_usd(p.budget_usd)} at any speed "
                f"(cheapest: {fmt_usd(usd[k])} over {fmt_duration(t[k])})"
            )
    return parts


def explain_infeasible(
    table: ConfigTable, c: Corners, p: Pins, loss_fn, law_E: float, fixed: float | None = None
) -> str:
    """Why nothing meets the pins, and how far each pinned corner must move (``fixed``: the tokens
    --tokens fixes, if any)."""
    if len(table) == 0:
        return (
            "no configuration fits in memory: allow more GPUs, larger-memory GPUs or smaller models"
        )
    parts = []
    if p.target_score is not None and p.target_loss is None:
        D = score_tokens(c, p)
        cap = np.full(D.shape, fixed) if fixed else np.clip(cap_tokens(c, p), D_MIN, D_MAX)
        moves = [] if fixed else _move_money_or_time(c, p, D, sc.goal(p.target_score))
        return sc.explain(p.target_score, c.n_total, D, cap, D_MAX, fixed, moves)
    if p.target_loss is not None:
        if p.target_loss <= law_E:
            return (
                f"target loss {p.target_loss} is at or below the law's irreducible loss E = {law_E:.3f}: "
                "no model or amount of data reaches it"
            )
        D = tokens_for_loss(loss_fn, c.n_total, c.n_non_embedding, p.target_loss, c.precision)
        reach = np.isfinite(D)
        if not reach.any():
            best = float(
                np.min(
                    loss_fn(
                        c.n_total, c.n_non_embedding, np.full(c.n_total.shape, D_MAX), c.precision
                    )
                )
            )
            return (
                f"target loss {p.target_loss} is out of reach of the models searched (best {best:.3f} with "
                f"{fmt_count(D_MAX)} tokens): allow larger models (--params)"
            )
        parts += _move_money_or_time(c, p, D, f"loss {p.target_loss}")
        cap = cap_tokens(c, p)
        best_loss = loss_fn(c.n_total, c.n_non_embedding, np.clip(cap, D_MIN, D_MAX), c.precision)
        j = int(np.argmin(best_loss))
        parts.append(f"the pinned time and money reach loss {best_loss[j]:.3f} at best")
    else:
        parts.append("the pins leave no plan: raise the budget or the deadline")
    return "; ".join(parts)


__all__ = [
    "Choice",
    "Corners",
    "Pins",
    "best_index",
    "choose_tokens",
    "default_objective",
    "explain_infeasible",
    "rates",
    "tokens_for_loss",
    "DAY",
    "InfeasibleError",
]
