"""`trilemma validate --kind quality`: how the loss law extrapolates, and how the benchmark curves hold
out, on published figures the package ships.

1. Loss: each suite of ``trilemma/data/losses.csv`` (one dataset, tokenizer and source) is fitted on its
   runs at most 1/10 of the largest compute and predicts its runs at least 10× larger
   (``trilemma.quality.extrapolate.split``). Beside trilemma's fit (forms averaged by held-out error,
   ``trilemma.quality.extrapolate``) stands the plain fit: all five constants of L = E + A/N^α + B/D^β
   free, Hoffmann's procedure (``fit_point``). Measured beside them, not used: a prior-shrunk fit, the
   forms on total and non-embedding N (``counts``) and the backtest's horizon matched (``horizon``),
   and the average with every member fitted by least squares on log loss (``squares``), all three drawn
   from ``trilemma.quality.extrapolate.pool``; the backtest along tokens per parameter (``direction``)
   and Kaplan 2020's non-separable form beside the members (``kaplan``, trilemma.quality.fit_kaplan);
   the forms weighted by their held-out error on other sources' suites, leave-one-source-out (``cross``,
   trilemma.quality.cross_suite).
   The Cerebras-GPT models' own losses are kept independent (shared/calibration/README.md) and never read here; suites with nothing 10× larger are listed as
   skipped.
2. Benchmarks: leave-one-family-out errors of the benchmark curves (``trilemma.quality.bench_fit``).
"""

from __future__ import annotations

import copy
import csv
import os
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from trilemma.parallel import spawn_pool
from trilemma.quality.cross_suite import form_predictions, leave_one_suite_out
from trilemma.quality.extrapolate import (
    NON_EMBEDDING,
    SCALE,
    SQUARES,
    STARTS,
    TOTAL,
    direction_errors,
    pool,
    split,
)
from trilemma.quality.fit_kaplan import with_kaplan
from trilemma.quality.fit_pinning import LITERATURE_EXPONENT
from trilemma.quality.fit_prior import WIDTH, prior_fit
from trilemma.quality.fit_procedure import fit_point
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.hindsight import best_member, nonembedding_predictions
from trilemma.quality.runs import MIN_SIZES, n_sizes
from trilemma.validate import source_group
from trilemma.validate.quality_band import band_inputs, coverage

#: rows whose model name starts so are kept independent (Cerebras-GPT's losses): never read
KEPT_INDEPENDENT = ("Cerebras-GPT",)
#: the floors the backtest is held to: trilemma's median |relative error| over the suites (fraction) and
#: how much worse than the plain fit's any suite may be (points of relative error); MMLU's
#: leave-one-family-out median absolute error (points) over at least FAMILIES_MIN families
FLOOR_MEDIAN = 0.015
FLOOR_WORSE_POINTS = 0.2
FLOOR_MMLU_POINTS = 5.0
FAMILIES_MIN = 20


def loss_suites(text: str | None = None) -> dict[str, list[dict[str, str]]]:
    """The rows of losses.csv by suite ("dataset · tokenizer · source group · unit"), kept-independent
    rows left out."""
    if text is None:
        text = resources.files("trilemma.data").joinpath("losses.csv").read_text("utf-8")
    out: dict[str, list[dict[str, str]]] = {}
    for r in csv.DictReader(text.splitlines()):
        if r["model"].startswith(KEPT_INDEPENDENT):
            continue
        key = f"{r['dataset']} · {r['tokenizer']} · {source_group(r['source'])} · {r['loss_unit']}"
        out.setdefault(key, []).append(r)
    return out


def _errors(pred: np.ndarray, loss: np.ndarray) -> dict[str, float]:
    rel = np.abs(pred / loss - 1.0)
    return {"median": float(np.median(rel)), "max": float(np.max(rel))}


def _forms_at(
    n: np.ndarray,
    d: np.ndarray,
    loss: np.ndarray,
    ne: np.ndarray | None,
    small: np.ndarray,
    large: np.ndarray,
    fitted: dict[str, dict[str, float]],
    kaplan: Any,
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Each form fitted on the fitted runs, at the held-out runs (the cross candidate's inputs;
    ``fitted``: the pool's fits on the same runs), and the member nearest the held-out losses among
    those and the forms on non-embedding N (the hindsight column: not a method)."""
    forms_at = form_predictions(
        n[small], d[small], loss[small], n[large], d[large], kaplan.constants, fitted=fitted
    )
    members_at = dict(forms_at)
    if ne is not None:
        members_at |= nonembedding_predictions(
            ne[small], d[small], loss[small], ne[large], d[large], fitted
        )
    best, _ = best_member(members_at, loss[large])
    return forms_at, {
        "hindsight": _errors(np.asarray(members_at[best]), loss[large]),
        "hindsight_member": best,
    }


def backtest_suite(name: str, rows: list[dict[str, str]]) -> dict[str, Any]:
    """One suite fitted on its small runs, predicting its runs ≥ SCALE× larger: both fits' errors
    (fractions), or the reason it is skipped."""
    n, d, loss = (
        np.array([float(r[k]) for r in rows])
        for k in ("params_total", "tokens", "final_loss_reported")
    )
    # the non-embedding count where every run gives it (the counts column's second member per form)
    ne = (
        np.array([float(r["params_nonembedding"]) for r in rows])
        if all(r.get("params_nonembedding") for r in rows)
        else None
    )
    small, large = split(n, d)
    out: dict[str, Any] = {
        "suite": name,
        "runs": len(rows),
        "source": source_group(rows[0]["source"]),
    }
    if not large.any() or n_sizes(n[small]) < MIN_SIZES or small.sum() <= MIN_SIZES:
        out["skipped"] = (
            f"no run {SCALE:g}x the compute of {MIN_SIZES}+ smaller model sizes (compute "
            f"{6 * (n * d).min():.3g} to {6 * (n * d).max():.3g} FLOP)"
        )
        return out
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        free = fit_point(n[small], d[small], loss[small], starts=STARTS)
    plain = free.constants
    shrunk = prior_fit(n[small], d[small], loss[small], free, starts=STARTS).constants
    members = pool(n[small], d[small], loss[small], None if ne is None else ne[small])
    avg = members.average()
    counts = members.average((TOTAL, NON_EMBEDDING))
    horizon = members.average(horizon=True)
    squares = pool(n[small], d[small], loss[small], delta=SQUARES).average()
    direction = members.average(worst_of=direction_errors(n[small], d[small], loss[small]))
    kaplan = with_kaplan(avg, n[small], d[small], loss[small])
    c = 6.0 * n * d  # FLOP (Kaplan 2020 §2.1)
    forms_at, hindsight = _forms_at(n, d, loss, ne, small, large, members.constants, kaplan)
    out.update(
        {
            "fitted_runs": int(small.sum()),
            "held_out_runs": int(large.sum()),
            "fitted_max_flop": float(c[small].max()),
            "held_out_flop": [float(c[large].min()), float(c[large].max())],
            "held_out_models": sorted({r["model"] for r, m in zip(rows, large) if m}),
            "plain": _errors(chinchilla_loss(plain, n[large], d[large]), loss[large]),
            "trilemma": _errors(avg.predict(n[large], d[large]), loss[large]),
            "prior": _errors(chinchilla_loss(shrunk, n[large], d[large]), loss[large]),
            "prior_exponents": [shrunk["alpha"], shrunk["beta"]],
            "counts": _errors(
                counts.predict(n[large], d[large], None if ne is None else ne[large]), loss[large]
            ),
            "counts_members": dict(zip(counts.names, counts.weights)),
            "horizon": _errors(horizon.predict(n[large], d[large]), loss[large]),
            "squares": _errors(squares.predict(n[large], d[large]), loss[large]),
            "direction": _errors(direction.predict(n[large], d[large]), loss[large]),
            "direction_forms": dict(zip(direction.names, direction.weights)),
            "kaplan": _errors(kaplan.predict(n[large], d[large]), loss[large]),
            "kaplan_weight": kaplan.weight,
            "form_predictions": forms_at,
            **hindsight,
            "held_out_loss": loss[large].tolist(),
            "held_out_n": n[large].tolist(),
            "held_out_d": d[large].tolist(),
            "band": band_inputs(n, d, loss, small, large),
            "forms": dict(zip(avg.names, avg.weights)),
            "plain_exponents": [plain["alpha"], plain["beta"]],
        }
    )
    return out


def benchmark_lofo() -> dict[str, Any]:
    """Leave-one-family-out errors per benchmark, refitted now (bench_fit.backtest)."""
    from trilemma.quality.bench_fit import backtest

    return backtest()


def _median_over_sources(done: list[dict[str, Any]], key: str) -> float | None:
    """The median over sources of each source's median suite error (``key``'s median, a fraction)."""
    by: dict[str, list[float]] = {}
    for s in done:
        by.setdefault(s["source"], []).append(s[key]["median"])
    return float(np.median([np.median(v) for v in by.values()])) if by else None


def _backtest_all(suites: dict[str, list[dict[str, str]]]) -> list[dict[str, Any]]:
    """Every suite backtested, in order: the suites are independent fits, so one spawned process per
    core (nothing inherited; the same results as the serial loop, about half the time on 2 cores)."""
    workers = min(len(suites), os.cpu_count() or 1)
    if workers < 2:
        return [backtest_suite(k, v) for k, v in suites.items()]
    with spawn_pool(workers) as pool:
        return list(pool.map(backtest_suite, suites.keys(), suites.values()))


def _method() -> str:
    """The method line of validate --kind quality: the backtest, the fit, each candidate."""
    return (
        f"fit on the runs at most 1/{SCALE:g} of a suite's largest compute, predict those "
        f"{SCALE:g}x larger or more; plain: L = E + A/N^alpha + B/D^beta, all five free "
        "(Hoffmann 2022 App. D.2); trilemma: free, tied and literature-exponent forms averaged "
        "by held-out error (trilemma.quality.extrapolate); prior (measured, not used): the free "
        f"form's posterior mode with alpha, beta ~ N({LITERATURE_EXPONENT}, {WIDTH:.3f}^2) "
        "(trilemma.quality.fit_prior); counts (measured, not used): each form on total and on "
        "non-embedding N where the runs give both, weighted by the same backtest; horizon (measured, "
        f"not used): each form's backtest error on the fitted runs {SCALE:g}x beyond the backtest's "
        "own fitted part (trilemma.quality.extrapolate.Pool); squares (measured, not used): "
        "trilemma's average with every member fitted by least squares on log loss (Huber delta "
        f"{SQUARES:g} instead of 1e-3); direction (measured, not used): each form's e the larger "
        f"of the compute backtest's and one along tokens per parameter (fitted on D/N at most 1/"
        f"{SCALE:g} of the largest, scored {SCALE:g}x beyond: trilemma.quality.extrapolate."
        "direction_errors); kaplan (measured, not used): trilemma's average with Kaplan 2020's "
        "non-separable form E + [(N_c/N)^(alpha/beta) + D_c/D]^beta beside the others, scored "
        "and weighted alike (trilemma.quality.fit_kaplan); cross (measured, not used): the free, "
        "tied, literature and Kaplan forms fitted on the suite's fitted runs, weighted 1/e^2 with e "
        "each form's median held-out error on the suites of other sources (leave-one-source-out, "
        "trilemma.quality.cross_suite); hindsight (not a method): the member nearest the held-out "
        "losses among the free, tied and literature forms on total and non-embedding N and Kaplan's, "
        "each fitted on the fitted runs: what a perfect choice among these fits would reach "
        "(trilemma.quality.hindsight)"
    )


@cache
def section() -> dict[str, Any]:
    """The ``quality`` block of the validate document: loss suites, benchmark hold-outs, the floors
    (computed once per process: it reads only the shipped tables)."""
    suites = _backtest_all(loss_suites())
    done = [s for s in suites if "skipped" not in s]
    cross = leave_one_suite_out(
        {s["suite"]: s["form_predictions"] for s in done},
        {s["suite"]: s["held_out_loss"] for s in done},
        {s["suite"]: s["source"] for s in done},
    )
    for s in done:
        s["cross"] = _errors(
            np.asarray(cross[s["suite"]]["predicted"]), np.asarray(s["held_out_loss"])
        )
        s["cross_weights"] = cross[s["suite"]]["weights"]
    med = float(np.median([s["trilemma"]["median"] for s in done])) if done else None
    plain_med = float(np.median([s["plain"]["median"] for s in done])) if done else None
    by_source = {k: _median_over_sources(done, k) for k in ("trilemma", "plain")}
    worse = max(
        (100 * (s["trilemma"]["median"] - s["plain"]["median"]) for s in done), default=None
    )
    prior_med, counts_med, horizon_med, squares_med, direction_med, kaplan_med, cross_med = (
        float(np.median([s[k]["median"] for s in done])) if done else None
        for k in ("prior", "counts", "horizon", "squares", "direction", "kaplan", "cross")
    )
    hindsight_med = float(np.median([s["hindsight"]["median"] for s in done])) if done else None
    band = coverage(done)
    bench = benchmark_lofo()
    mmlu = bench["mmlu"]
    return {
        "method": _method(),
        "loss_suites": suites,
        "median_abs_rel_error": med,
        "plain_median_abs_rel_error": plain_med,
        # each source's median suite, then the median over sources (one source may give several suites)
        "median_abs_rel_error_over_sources": by_source["trilemma"],
        "plain_median_abs_rel_error_over_sources": by_source["plain"],
        "sources": len({s["source"] for s in done}),
        "prior_median_abs_rel_error": prior_med,
        "counts_median_abs_rel_error": counts_med,
        "horizon_median_abs_rel_error": horizon_med,
        "squares_median_abs_rel_error": squares_med,
        "direction_median_abs_rel_error": direction_med,
        "kaplan_median_abs_rel_error": kaplan_med,
        "cross_median_abs_rel_error": cross_med,
        "hindsight_median_abs_rel_error": hindsight_med,
        "hindsight_median_abs_rel_error_over_sources": _median_over_sources(done, "hindsight")
        if done
        else None,
        "worst_points_over_plain": worse,
        # the 80% loss band of each suite's `trilemma fit` law at its held-out runs (quality_band)
        "band": band,
        "benchmarks_lofo": bench,
        "floors": {
            "median_abs_rel_error": {"floor": FLOOR_MEDIAN, "value": med},
            "points_over_plain": {"floor": FLOOR_WORSE_POINTS, "value": worse},
            "mmlu_lofo_median_points": {
                "floor": FLOOR_MMLU_POINTS,
                "value": mmlu["lofo_median_abs_error_points"],
                "families": mmlu["families"],
                "families_min": FAMILIES_MIN,
            },
        },
    }


def document() -> dict[str, Any]:
    """The validate document of ``--kind quality``: no rows of the other kinds, the ``quality`` block."""
    return {
        "schema": "trilemma.validate/1",
        "data": None,
        "summary": {},
        "rows": [],
        "ondevice": None,
        "finetune_memory": None,
        "fitted_at_bounds": [],
        "skipped": [],
        "calibration": {},
        "quality": copy.deepcopy(section()),  # the cached block stays as computed
        "warnings": [],
    }
