"""The loss band beyond the runs, checked where it is needed: each loss suite fitted as ``trilemma fit``
fits, asked about its runs ten times the fitted compute.

Per suite (in validate --kind quality's spawned workers): the staged fit with its bootstrap on the runs
at most a tenth of the largest compute, its own σ₁ and, from the held-out runs' log residuals at their
e-folds beyond, the suite's σ₁ (``trilemma.quality.extrapolation_band.suite_sd``). Then, in the parent:
the floor over the other sources' suites (leave-one-source-out, so no suite's held-out runs widen its own
band), the law's band with σ₁ the larger of its own and that floor, and whether each held-out run lies
inside it; and the floor over every source, which the shipped ``EXTRAPOLATION_FLOOR`` must equal.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.quality.extrapolation_band import e_folds_beyond, floor_from_suites, suite_sd
from trilemma.quality.fit import fit_runs
from trilemma.quality.forms import chinchilla_loss
from trilemma.quality.laws import law_from_dict, law_to_dict
from trilemma.quality.predict import predict_loss
from trilemma.quality.runs import MIN_RUNS, Runs

#: bootstrap refits and L-BFGS starts of each suite's fit (``trilemma fit`` takes 200 and 64: the band
#: beyond the runs is set by σ₁, and these halve validate's time)
BOOT = 100
STARTS = 16


def band_inputs(
    n: np.ndarray, d: np.ndarray, loss: np.ndarray, small: np.ndarray, large: np.ndarray
) -> dict[str, Any] | None:
    """One suite's fit on its ``small`` runs (N parameters, D tokens, loss) and its held-out ``large``
    runs' log residuals ``r`` at ``x`` e-folds beyond, the suite's σ₁ ``sd``, and the law (as a dict,
    its own σ₁ kept: no floor); None where ``trilemma fit`` refuses the fitted runs (too few)."""
    if small.sum() < MIN_RUNS:
        return None
    law = fit_runs(
        Runs(n[small], d[small], loss[small], "suite"),
        n_boot=BOOT,
        starts=STARTS,
        holdout=0,
        extrapolation_floor=0.0,
    ).law
    rng = law.fit_range or {}
    r = np.log(loss[large] / chinchilla_loss(law.constants, n[large], d[large]))
    x = e_folds_beyond(n[large], d[large], rng["N_max"], rng["D_max"], rng["C_max"])
    res = law.uncertainty.residual if law.uncertainty is not None else None
    sd0 = float(res["log_sd"]) if res else 0.0
    return {
        "r": r.tolist(),
        "x": x.tolist(),
        "sd": suite_sd(r, x, sd0),
        "law": law_to_dict(law),
    }


def _with_floor(doc: dict[str, Any], floor: float) -> Any:
    """The law of ``doc`` with σ₁ the larger of its own and ``floor``."""
    doc = {k: v for k, v in doc.items() if v is not None}
    unc = dict(doc["uncertainty"])
    res = dict(unc["residual"])
    res["log_sd_per_e_fold"] = max(res["log_sd_per_e_fold"], floor)
    unc["residual"] = res
    return law_from_dict(doc | {"uncertainty": unc}, "a suite's fit")


def coverage(done: list[dict[str, Any]]) -> dict[str, Any]:
    """Each suite's band (``s["band"]`` filled in: the floor without its source, each held-out run's
    band and whether it is inside) and the summary: runs and sources inside, the floor over all."""
    with_band = [s for s in done if s.get("band")]
    sds = {s["suite"]: {"source": s["source"], "sd": s["band"]["sd"]} for s in with_band}
    inside: list[bool] = []
    by_source: dict[str, list[bool]] = {}
    for s in with_band:
        b = s["band"]
        floor = floor_from_suites(sds, leave_out=s["source"])
        law = _with_floor(b.pop("law"), floor)
        b["floor_without_source"] = floor
        b["bands"] = []
        for n, d, y in zip(s["held_out_n"], s["held_out_d"], s["held_out_loss"]):
            p = predict_loss(law, n, n, d)
            b["bands"].append([p.low, p.high])
            inside.append(p.low <= y <= p.high)
            by_source.setdefault(s["source"], []).append(inside[-1])
        b["inside"] = inside[-len(s["held_out_loss"]) :]
        b["half_width"] = float(np.median([(hi - lo) / (hi + lo) for lo, hi in b["bands"]]))
    return {
        "runs": len(inside),
        "inside": int(sum(inside)),
        "sources": len(by_source),
        "sources_inside": sum(all(v) for v in by_source.values()),
        "floor_over_sources": floor_from_suites(sds),
    }
