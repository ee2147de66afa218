"""The ``[uncertainty]`` table of a law file validated: a covariance (its own or borrowed from a
shipped law), bootstrap samples, or a range, with a fitted law's residual error."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from trilemma.errors import InputError
from trilemma.quality.law import (
    DEFAULT_LEVEL,
    LOG_PARAMS,
    Law,
    Uncertainty,
    covariance_problem,
)


def bad_law(where: str, why: str) -> InputError:
    """The InputError of a bad law document: ``where`` names the file or table, ``why`` what was expected."""
    return InputError("law", where, why)


def _float_array(value: Any) -> np.ndarray | None:
    """A TOML array of numbers (nested lists of one length) as floats; None when it is not one (ragged
    rows, strings, tables)."""
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None


def uncertainty_from_dict(
    u: Any,
    constants: Mapping[str, float],
    loss_unit: str,
    where: str,
    lookup: Mapping[str, Law] | None,
) -> Uncertainty | None:
    """The ``[uncertainty]`` table validated (``borrow`` names a law of ``lookup``); None when absent."""
    if u is None:
        return None
    if not isinstance(u, dict):
        raise bad_law(where, "`uncertainty` to be a table")
    kind = str(u.get("kind", ""))
    level = u.get("level", DEFAULT_LEVEL if kind != "range" else None)
    if level is not None and not (isinstance(level, (int, float)) and 0 < level < 1):
        raise bad_law(where, "`uncertainty.level` in (0, 1)")
    source = str(u.get("source", ""))
    if kind == "covariance" and "borrow" in u:
        return _borrowed(u, constants, loss_unit, where, lookup, float(level), source)
    params = tuple(str(p) for p in u.get("params", ()))
    names = set(constants) | set(LOG_PARAMS)
    if not params or any(
        p not in names or (p in LOG_PARAMS and LOG_PARAMS[p] not in constants) for p in params
    ):
        raise bad_law(
            where, "`uncertainty.params` naming the law's constants (or ln_A, ln_B, ln_E)"
        )
    same = sorted({p for p in params if params.count(p) > 1} | _aliased(params))
    if same:
        raise bad_law(
            where, f"`uncertainty.params` each constant once (repeated: {', '.join(same)})"
        )
    if kind == "covariance":
        return _covariance(u, params, constants, loss_unit, where, float(level), source)
    if kind in ("samples", "range"):
        return _samples(u, params, kind, where, level, source)
    raise bad_law(where, '`uncertainty.kind` = "covariance", "samples" or "range"')


def _aliased(params: tuple[str, ...]) -> set[str]:
    """Parameters named twice under two names (``ln_A`` beside ``A``: one constant drawn twice)."""
    return {p for p in params if p in LOG_PARAMS and LOG_PARAMS[p] in params}


def _residual(r: Any, where: str) -> Mapping[str, float] | None:
    """``[uncertainty.residual]`` (a fitted law's out-of-sample error) validated; None when absent."""
    if r is None:
        return None
    keys = ("log_sd", "log_sd_per_e_fold", "df")
    ok = (
        isinstance(r, dict)
        and set(r) == set(keys)
        and all(
            isinstance(r[k], (int, float)) and not isinstance(r[k], bool) and math.isfinite(r[k])
            for k in keys
        )
    )
    if not ok or not (0 <= r["log_sd"] <= 1 and 0 <= r["log_sd_per_e_fold"] <= 1 and r["df"] >= 1):
        raise bad_law(
            where, "`uncertainty.residual` with log_sd and log_sd_per_e_fold in [0, 1] and df >= 1"
        )
    return MappingProxyType({k: float(r[k]) for k in keys})


def _borrowed(
    u: Mapping[str, Any],
    constants: Mapping[str, float],
    loss_unit: str,
    where: str,
    lookup: Mapping[str, Law] | None,
    level: float,
    source: str,
) -> Uncertainty:
    """A covariance borrowed from a shipped law of ``lookup`` (``uncertainty.borrow``)."""
    other = (lookup or {}).get(str(u["borrow"]))
    if other is None or other.uncertainty is None or other.uncertainty.kind != "covariance":
        raise bad_law(
            where,
            f"`uncertainty.borrow` to name a shipped law with a covariance, not {u['borrow']!r}",
        )
    ou = other.uncertainty
    problem = covariance_problem(ou.params, ou.covariance, constants, loss_unit)
    if problem:
        raise bad_law(where, f"{problem}, borrowed from {other.name}")
    return Uncertainty(
        "covariance",
        ou.params,
        level,
        source or ou.source,
        covariance=ou.covariance,
        borrowed_from=other.name,
    )


def _covariance(
    u: Mapping[str, Any],
    params: tuple[str, ...],
    constants: Mapping[str, float],
    loss_unit: str,
    where: str,
    level: float,
    source: str,
) -> Uncertainty:
    """A covariance over ``params``: symmetric, finite, positive semi-definite, and consistent
    with the constants."""
    k = len(params)
    cov = _float_array(u.get("covariance", []))
    if (
        cov is None
        or cov.shape != (k, k)
        or not np.isfinite(cov).all()
        or not np.allclose(cov, cov.T, rtol=1e-6, atol=1e-12)
    ):
        raise bad_law(
            where,
            f"`uncertainty.covariance` to be a symmetric {k}×{k} matrix of finite numbers",
        )
    if np.linalg.eigvalsh(cov).min() < -1e-12 * max(1.0, float(np.abs(cov).max())):
        raise bad_law(where, "`uncertainty.covariance` to be positive semi-definite")
    problem = covariance_problem(params, cov, constants, loss_unit)
    if problem:
        raise bad_law(where, problem)
    return Uncertainty(
        "covariance",
        params,
        level,
        source,
        covariance=cov,
        residual=_residual(u.get("residual"), where),
    )


def _samples(
    u: Mapping[str, Any],
    params: tuple[str, ...],
    kind: str,
    where: str,
    level: Any,
    source: str,
) -> Uncertainty:
    """Sample rows (or a range's corner rows) of the linear constants, with a fit's residual."""
    k = len(params)
    s = _float_array(u.get("samples", []))
    if s is None or s.ndim != 2 or s.shape[1] != k or len(s) < 1 or not np.isfinite(s).all():
        raise bad_law(
            where, f"`uncertainty.samples` to be rows of {k} numbers ({', '.join(params)})"
        )
    if any(p in LOG_PARAMS for p in params):
        raise bad_law(where, "`uncertainty.samples` in linear constants (E, A, B, alpha, beta)")
    return Uncertainty(
        kind,
        params,
        None if kind == "range" else float(level),
        source,
        samples=s,
        residual=_residual(u.get("residual"), where),
    )
