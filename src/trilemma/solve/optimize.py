"""Stage 2 of the solver: tokens in closed form, pins as masks, the optimum, runners-up that
differ in kind, the Pareto frontier, and an explanation when nothing is feasible.

For every configuration (model, GPU type, precision, count, best layout) from stage 1, time,
GPU-hours, dollars and energy are linear in tokens D, and the loss is the law's L(N, D):
- a deadline T or a budget caps D (D ≤ T / seconds-per-token, D ≤ B / dollars-per-token, …);
- a target loss L* asks for the D that reaches it (the law inverted numerically, vectorised);
so each configuration's corners follow without another search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trilemma.errors import InfeasibleError, InputError
from trilemma.estimate.cost import energy_j, wall_power_w
from trilemma.solve.search import ConfigTable, params_of
from trilemma.units import DAY, HOUR, KWH, MINUTE, YEAR, fmt_count, fmt_duration, fmt_usd

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

    def as_dict(self) -> dict[str, Any]:
        return {
            "deadline_s": self.deadline_s,
            "budget_usd": self.budget_usd,
            "budget_gpu_hours": self.budget_gpu_hours,
            "budget_kwh": self.budget_kwh,
            "target_loss": self.target_loss,
            "minimize": self.minimize,
        }


def default_objective(p: Pins) -> str:
    """The free corner: loss when time and money are pinned, and so on."""
    time_pinned = p.deadline_s is not None
    money_pinned = any(x is not None for x in (p.budget_usd, p.budget_gpu_hours, p.budget_kwh))
    loss_pinned = p.target_loss is not None
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
    slow-node share for its node count (goodput.slow_node_share; not for a fine-tune:
    trilemma.estimate.evaluate.slow_node_spread_for). ``estimate`` recomputes it for the chosen plan's own
    duration."""
    from trilemma.estimate.evaluate import slow_node_spread_for
    from trilemma.estimate.finetune import checkpoint_bytes
    from trilemma.estimate.goodput import cluster_reliability, slow_node_share, steady_goodput
    from trilemma.estimate.params import param_counts
    from trilemma.presets import constants
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
    per_node = np.array([h.devices_per_node for h in table.gpus])[table.gpu_idx]
    cf = cluster_fields or {}
    reliability = cluster_reliability(
        cf.get("failures_per_gpu_hour"), cf.get("restart_s"), cf.get("storage_write_bytes_per_s")
    )
    return np.asarray(steady_goodput(table.n_gpus, ckpt, **reliability)) * np.asarray(
        slow_node_share(table.n_gpus, per_node, slow_node_spread_for(plans[0], constants()))
    )


def rates(
    table: ConfigTable,
    goodput: np.ndarray | float,
    prices: dict[str, float],
    energy: dict[str, float],
) -> Corners:
    g = table.gpu_idx
    price = np.array([prices.get(h.name, h.price_usd_per_hour) for h in table.gpus])[g]
    host = np.array(
        [
            0.0 if h.family == "cpu" else energy.get("host_power_w_per_device", 0.0)
            for h in table.gpus
        ]
    )[g]
    watts = wall_power_w(
        np.array([h.board_power_w for h in table.gpus])[g],
        energy["power_fraction"],
        energy["host_power_fraction"],
        energy["pue"],
        host,
    )
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
    cap = cap_tokens(c, p)
    if fixed_tokens is not None:
        D = np.full(cap.shape, float(fixed_tokens))
    elif p.minimize == "loss":
        D = np.minimum(cap, D_MAX)
    else:
        if p.target_loss is None:
            raise InputError(
                "minimize",
                p.minimize,
                "a target loss (--target-loss) or fixed --tokens to go with it: "
                "without one the cheapest or fastest plan trains nothing",
            )
        D = tokens_for_loss(loss_fn, c.n_total, c.n_non_embedding, p.target_loss, c.precision)
        # at least one global batch: a target the law meets with fewer tokens (any loss above the first
        # batch's) is met by that one batch too, since loss falls with D
        D = np.maximum(D, c.batch_tokens)
    D = np.where(np.isfinite(D), D, np.nan)
    loss = loss_fn(c.n_total, c.n_non_embedding, np.nan_to_num(D, nan=D_MIN), c.precision)
    feasible = np.isfinite(D) & (D <= cap * (1 + 1e-9)) & (D >= np.maximum(D_MIN, c.batch_tokens))
    if p.target_loss is not None:
        feasible &= loss <= p.target_loss * (1 + 1e-9)
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


# ------------------------------------------------------------------ frontier


def pareto_mask(points: np.ndarray) -> np.ndarray:
    """Rows of ``points`` (n × 3, every column minimised) that no other row dominates; of equal rows
    the first is kept. Sorted lexicographically (stable), a dominator always comes before the row it
    dominates, so one pass decides each row against the rows before it: a row (a, t, u) is dominated
    when an earlier kept row has t' ≤ t and u' ≤ u (its a' ≤ a by the sort). The kept rows' (t, u)
    form a staircase — times ascending, costs descending — searched by bisection: O(n log n)."""
    from bisect import bisect_right

    n = len(points)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    if points.shape[1] != 3:
        raise ValueError(f"pareto_mask takes 3 columns, got {points.shape[1]}")
    order = np.lexsort(points.T[::-1])
    ts: list[float] = []
    us: list[float] = []
    for k, (t, u) in zip(order.tolist(), points[order, 1:].tolist()):
        i = bisect_right(ts, t) - 1
        if i >= 0 and us[i] <= u:
            continue  # dominated (or an earlier equal row)
        keep[k] = True
        j = i + 1
        stop = j
        while (
            stop < len(us) and us[stop] >= u
        ):  # later times at no lower cost: now dominated in (t, u)
            stop += 1
        ts[j:stop] = [t]
        us[j:stop] = [u]
    return keep


@dataclass(frozen=True)
class FrontierFilters:
    """Which plans the frontier keeps: those a person could start. The defaults, and why:

    - ``min_steps`` = 1,000 optimizer steps: a learning-rate warm-up alone takes hundreds to thousands of
      steps (Llama 2: 2,000 warm-up steps, Touvron et al. 2023 §2.2; GPT-3: warm-up over its first 375M
      tokens, Brown et al. 2020 App. B.1, ~120 steps at 175B's 3.2M-token batch and ~750 at the 0.5M of its
      small models), so a shorter run is mostly warm-up and the law's loss (fitted on schedules that
      decay after warm-up) does not describe it;
    - ``min_time_s`` = 10 minutes: below it the fixed costs of a job (launch, loading the data, the first
      checkpoint write, which the solver's own checkpoint check counts) are a large share of the run;
    - ``max_time_s`` = 1 year: the longest published pre-training runs last months (Llama 3 405B: 54 days,
      Dubey et al. 2024 §3.3.4), and a plan of years would be overtaken by the next GPU generation.

    A plan failing several is charged to the first, in this order. A fine-tune keeps no step floor
    (``FINETUNE``): it starts from trained weights, and short runs of a few hundred steps are the norm
    (QLoRA's Guanaco 7B–65B: 1,875 steps with a 3% warm-up, Dettmers et al. 2023 App. B.2)."""

    min_steps: float = 1000.0
    min_time_s: float = 10 * MINUTE
    max_time_s: float = YEAR

    #: the filters' names (the CSV's ``removed_by``, the JSON's ``removed``), in the order they are charged
    FINETUNE: ClassVar[FrontierFilters]
    NAMES = ("steps", "short", "long")

    def removed_by(self, steps: np.ndarray, time_s: np.ndarray) -> np.ndarray:
        """Per plan: 0 kept, else 1 + the index in ``NAMES`` of the first filter that removes it."""
        return np.select(
            [steps < self.min_steps, time_s < self.min_time_s, time_s > self.max_time_s],
            [1, 2, 3],
            0,
        ).astype(np.int8)

    def describe(self) -> dict[str, str]:
        """Each filter as a phrase, by name."""
        return {
            "steps": f"fewer than {self.min_steps:,.0f} optimizer step{'' if self.min_steps == 1 else 's'}",
            "short": f"under {self.min_time_s / MINUTE:g} minutes",
            "long": f"over {self.max_time_s / DAY:,.0f} days",
        }

    def as_dict(self) -> dict[str, float]:
        return {
            "min_steps": self.min_steps,
            "min_time_s": self.min_time_s,
            "max_time_s": self.max_time_s,
        }


FrontierFilters.FINETUNE = FrontierFilters(min_steps=1.0)


@dataclass(frozen=True)
class Frontier:
    config: np.ndarray  # row of the config table
    tokens: np.ndarray
    time_s: np.ndarray
    usd: np.ndarray
    loss: np.ndarray
    feasible: np.ndarray  # meets the pins
    steps: np.ndarray  # optimizer steps (tokens / the configuration's global batch)
    #: per point, the filter that removes it (0 none, else 1 + its index in FrontierFilters.NAMES): all 0
    #: unless ``keep_all``
    removed_by: np.ndarray
    filters: FrontierFilters
    #: --frontier-all: the points the filters removed stay, marked (a superset of the filtered frontier; a kept
    #: point may then be dominated by a removed one, e.g. a plan of 11 minutes by a cheaper one of 9)
    keep_all: bool
    unfiltered_points: int  # size of the frontier over every plan, filters ignored
    removed: dict[str, int]  # points of that unfiltered frontier each filter removes (by NAMES)

    def summary(self) -> str:
        """One line: how many plans, and what each filter removed."""
        what = self.filters.describe()
        parts = [f"{n:,} {what[k]}" for k, n in self.removed.items()]
        kept = int((self.removed_by == 0).sum())
        if self.keep_all:
            return (
                f"{self.time_s.size:,} plans (--frontier-all): the {kept:,} Pareto-optimal plans that could be run and "
                f"the {self.time_s.size - kept:,} the filters remove from the frontier of every plan: {', '.join(parts)}"
            )
        return (
            f"{kept:,} Pareto-optimal plans that could be run; of the {self.unfiltered_points:,} on the "
            f"frontier of every plan, the filters removed {', '.join(parts)} (--frontier-all keeps them)"
        )


def _pareto_points(t: np.ndarray, usd: np.ndarray, loss: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The indices among ``idx`` of the Pareto set over (time, cost, loss)."""
    # exact pre-reduction: points with equal loss (same model and D) compete in (time, cost) only
    t, usd, key = t[idx], usd[idx], np.round(loss[idx], 12)
    keep = np.zeros(idx.size, dtype=bool)
    order = np.lexsort((usd, t, key))
    best_cost = np.inf
    prev = None
    for i in (
        order.tolist()
    ):  # one pass: within a loss value, sorted by time, keep strictly cheaper ones
        if key[i] != prev:
            prev, best_cost = key[i], np.inf
        if usd[i] < best_cost:
            keep[i] = True
            best_cost = usd[i]
    sub = np.nonzero(keep)[0]
    pts = np.stack([t[sub], usd[sub], loss[idx][sub]], axis=1)
    return idx[sub[pareto_mask(pts)]]


def frontier(
    table: ConfigTable,
    c: Corners,
    p: Pins,
    loss_fn,
    fixed_tokens: float | None,
    per_config: int = 16,
    filters: FrontierFilters | None = None,
    keep_all: bool = False,
    include: tuple[tuple[int, float], ...] = (),
) -> Frontier:
    """The Pareto set over (time, cost, loss) of every configuration at tokens-per-parameter from
    1 to 1000 (log grid), or at the fixed token count, and at the (configuration row, tokens) points of
    ``include`` (the optimum, which the grid would miss), among the plans that pass ``filters`` (default
    FrontierFilters()); ``keep_all``: with the points the filters remove from the frontier of every plan, each
    marked with its filter (``removed`` counts them)."""
    filters = filters or FrontierFilters()
    R = len(table)
    if fixed_tokens is not None:
        D = np.full((R, 1), float(fixed_tokens))
    else:
        tpp = np.geomspace(1.0, 1000.0, per_config)
        D = np.clip(c.n_total[:, None] * tpp[None, :], D_MIN, D_MAX)
    cfg = np.broadcast_to(np.arange(R)[:, None], D.shape).ravel()
    D = D.ravel()
    if include:
        cfg = np.concatenate([cfg, np.array([i for i, _ in include], dtype=cfg.dtype)])
        D = np.concatenate([D, np.array([d for _, d in include], dtype=float)])
    t = D * c.s_per_token[cfg]
    usd = D * c.usd_per_token[cfg] + (c.fixed_usd[cfg] if np.ndim(c.fixed_usd) else c.fixed_usd)
    loss = loss_fn(c.n_total[cfg], c.n_non_embedding[cfg], D, c.precision[cfg])
    steps = D / c.batch_tokens[cfg]
    why = filters.removed_by(steps, t)
    every = _pareto_points(t, usd, loss, np.arange(D.size))
    removed = {name: int((why[every] == k + 1).sum()) for k, name in enumerate(filters.NAMES)}
    idx = _pareto_points(t, usd, loss, np.nonzero(why == 0)[0])
    if keep_all:  # and the points the filters removed from the frontier of every plan, each marked with its filter
        idx = np.union1d(idx, every[why[every] > 0])
    idx = np.sort(idx)
    cap = cap_tokens(c, p)[cfg[idx]]
    feas = D[idx] <= cap * (1 + 1e-9)
    if p.target_loss is not None:
        feas &= loss[idx] <= p.target_loss
    return Frontier(
        config=cfg[idx],
        tokens=D[idx],
        time_s=t[idx],
        usd=usd[idx],
        loss=loss[idx],
        feasible=feas,
        steps=steps[idx],
        removed_by=why[idx],
        filters=filters,
        keep_all=keep_all,
        unfiltered_points=int(every.size),
        removed=removed,
    )


# ------------------------------------------------------------------ infeasibility


def explain_infeasible(table: ConfigTable, c: Corners, p: Pins, loss_fn, law_E: float) -> str:
    """Why nothing meets the pins, and how far each pinned corner must move."""
    if len(table) == 0:
        return (
            "no configuration fits in memory: allow more GPUs, larger-memory GPUs or smaller models"
        )
    parts = []
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
        t = np.where(reach, D * c.s_per_token, np.inf)
        usd = np.where(reach, D * c.usd_per_token + c.fixed_usd, np.inf)
        goal = f"loss {p.target_loss}"
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
        cap = cap_tokens(c, p)
        best_loss = loss_fn(c.n_total, c.n_non_embedding, np.clip(cap, D_MIN, D_MAX), c.precision)
        j = int(np.argmin(best_loss))
        parts.append(f"the pinned time and money reach loss {best_loss[j]:.3f} at best")
    else:
        parts.append("the pins leave no plan: raise the budget or the deadline")
    return "; ".join(parts)


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


__all__ = [
    "Candidate",
    "Choice",
    "Corners",
    "Frontier",
    "Pins",
    "best_index",
    "candidate",
    "choose_tokens",
    "default_objective",
    "explain_infeasible",
    "frontier",
    "FrontierFilters",
    "LEVERS",
    "at_tokens",
    "over_pins",
    "pareto_mask",
    "rates",
    "runners_up",
    "tokens_for_loss",
    "DAY",
    "InfeasibleError",
]
