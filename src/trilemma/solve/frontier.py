"""The Pareto frontier of a solve over (time, cost, loss), with the filters that keep it readable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from trilemma.solve.optimize import D_MAX, D_MIN, Corners, Pins, cap_tokens, score_ok
from trilemma.solve.search import ConfigTable
from trilemma.units import DAY, MINUTE, YEAR


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
    keep[_cheaper_than_faster(key, t, usd)] = True
    sub = np.nonzero(keep)[0]
    pts = np.stack([t[sub], usd[sub], loss[idx][sub]], axis=1)
    return idx[sub[pareto_mask(pts)]]


def _cheaper_than_faster(key: np.ndarray, t: np.ndarray, usd: np.ndarray) -> np.ndarray:
    """The points strictly cheaper than every point of their ``key`` before them in (time, cost)
    order: one pass over the points sorted by (key, time, cost), a running minimum of the cost that
    starts again at each new key (NaN starts one each, as it equals nothing; a NaN or infinite cost
    is never cheaper). Costs are compared by rank, each key's minimum carried in an int64 that puts
    later keys lower, so one cumulative minimum does every key's."""
    order = np.lexsort((usd, t, key))
    k, u = key[order], np.where(np.isnan(usd[order]), np.inf, usd[order])
    starts = np.ones(k.size, dtype=bool)
    starts[1:] = k[1:] != k[:-1]
    values, rank = np.unique(np.append(u, np.inf), return_inverse=True)
    rank, top = rank[:-1], values.size  # inf, the cost before any point, ranks top - 1
    group = np.cumsum(starts) - 1
    running = np.minimum.accumulate((group[-1] - group) * top + rank) if k.size else rank
    before = np.full(k.size, top - 1)
    later = np.nonzero(~starts)[0]
    before[later] = running[later - 1] % top
    return order[rank < before]


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
    feas &= score_ok(c, p, D[idx], cfg[idx])
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
