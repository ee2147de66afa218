"""Goodput: the share of wall-clock time a training run spends on useful steps.

Failures, checkpoints and restarts, from physics rather than one fitted constant:

- Failures are a Poisson process whose rate grows with the GPU count: n × r per hour, r from a
  published run (``presets/reliability.toml``: Llama 3, Dubey et al. 2024 §3.3.4, 419 unexpected
  interruptions in 54 days on 16,384 GPUs → 1.97e-5 per GPU-hour). Cluster MTBF M = 1 / (n·r).
- A checkpoint of B bytes takes δ = B / (n × per-GPU write bandwidth) to write, synchronously.
- The interval between checkpoints τ is Daly's higher-order optimum (J. T. Daly, "A higher order
  estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3) 2006, eq. for τ_opt):
  τ = √(2δM)·[1 + ⅓√(δ/2M) + ⅑·δ/2M] − δ for δ < 2M, else M. Its first-order term is Young's
  τ = √(2δM) (J. W. Young, "A first order approximation to the optimum checkpoint interval",
  CACM 17(9) 1974).
- The run is busy_s / τ segments of τ work + δ write (one segment, ending with the final save,
  when the run is shorter than τ; counted fractionally otherwise, smooth in busy_s, off by at most
  one write). A segment of L = τ + δ that fails restarts from the last checkpoint after a restart
  of R seconds, which can itself fail. Its expected wall time, exact for exponential failures:
  an attempt succeeds with probability e^{−L/M}, so it takes e^{L/M} attempts of E[min(T, L)] =
  M·(1 − e^{−L/M}) s each; the e^{L/M} − 1 failed ones are each followed by a restart phase of
  M·(e^{R/M} − 1) s (restarts that fail are restarted). Summed:  E = M·e^{R/M}·(e^{L/M} − 1) =
    work + write  L
    rework        M·(e^{L/M} − 1) − L     (≈ half a segment per failure when L ≪ M)
    restarts      M·(e^{L/M} − 1)·(e^{R/M} − 1)
  with wall / M interruptions. Goodput = busy / wall = τ / E. tests/test_goodput.py checks E
  against a discrete-event simulation.

A run's wall time also waits, every step, for its slowest GPU: that share is
trilemma.estimate.stragglers.straggler_share, multiplied in by trilemma.estimate.evaluate.

Validity: exact under its assumptions (memoryless failures at a rate ∝ GPU count, a fixed restart
time, every failure rolls back to the last checkpoint, synchronous writes); no small-loss expansion,
so it stays in (0, 1] when M is shorter than δ or R (computed in log space; at least the smallest
positive double). Planned maintenance and queueing are not modelled. More GPUs mean more failures
but, with bandwidth per GPU, a faster write: goodput falls with the GPU count when the write time
is held (storage-bound) or the run spans many intervals, but a run much shorter than its interval,
dominated by its final save, gains from more GPUs.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from trilemma.units import DAY, HOUR

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ArrayLike = float | np.ndarray
#: shortest checkpoint interval, s: keeps τ > 0 when the checkpoint costs nothing to write
MIN_INTERVAL_S = 1e-6
_TINY = np.finfo(float).tiny


@cache
def reliability_data() -> dict[str, Any]:
    """``presets/reliability.toml`` parsed (published runs, storage systems, stated defaults).

    Read through ``trilemma``'s own resources, not ``trilemma.presets``, so that no spec model is
    imported for it."""
    text = (
        resources.files("trilemma")
        .joinpath("presets")
        .joinpath("reliability.toml")
        .read_text("utf-8")
    )
    return tomllib.loads(text)


def run_failures_per_gpu_hour(run: dict[str, Any]) -> float:
    """Unexpected interruptions per GPU-hour of a published run: count / (GPUs × hours)."""
    return run["unexpected_interruptions"] / (run["gpus"] * run["duration_days"] * DAY / HOUR)


def node_failures_per_gpu_hour(cluster: dict[str, Any]) -> float:
    """A cluster's failures per node-day → per GPU-hour."""
    return cluster["failures_per_node_day"] / (cluster["gpus_per_node"] * DAY / HOUR)


@dataclass(frozen=True)
class Reliability:
    """The model's stated defaults, each derived from ``reliability.toml``."""

    failures_per_gpu_hour: float
    restart_s: float
    write_bytes_per_s_per_gpu: float
    max_write_bytes_per_s: float


@cache
def defaults() -> Reliability:
    """Default failure rate, restart time and checkpoint write bandwidth (cached)."""
    data = reliability_data()
    d = data["defaults"]
    if d["synchronous_checkpoint_writes"] is not True:
        raise ValueError("reliability.toml: only synchronous checkpoint writes are modelled")
    storage = data["storage"][d["write_bandwidth_storage"]]
    return Reliability(
        failures_per_gpu_hour=run_failures_per_gpu_hour(data["runs"][d["failure_rate_run"]]),
        restart_s=float(d["restart_s"]),
        write_bytes_per_s_per_gpu=storage["sustained_bytes_per_s"] / storage["gpus"],
        max_write_bytes_per_s=float(d["max_write_bytes_per_s"]),
    )


def resolve(
    failures_per_gpu_hour: float | None = None,
    restart_s: ArrayLike | None = None,
    write_bytes_per_s_per_gpu: float | None = None,
    max_write_bytes_per_s: float | None = None,
) -> Reliability:
    """The figures a run is modelled at: each one given, else ``reliability.toml``'s default (``defaults()``).
    The one place None means "the default". Units: failures per GPU-hour, s, bytes/s per GPU, bytes/s."""
    d = defaults()
    return Reliability(
        failures_per_gpu_hour=d.failures_per_gpu_hour
        if failures_per_gpu_hour is None
        else failures_per_gpu_hour,
        restart_s=d.restart_s if restart_s is None else restart_s,  # type: ignore[arg-type]  # arrays broadcast
        write_bytes_per_s_per_gpu=(
            d.write_bytes_per_s_per_gpu
            if write_bytes_per_s_per_gpu is None
            else write_bytes_per_s_per_gpu
        ),
        max_write_bytes_per_s=d.max_write_bytes_per_s
        if max_write_bytes_per_s is None
        else max_write_bytes_per_s,
    )


def _scalar_or_array(x: Any) -> ArrayLike:
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


def mtbf_s(n_gpus: ArrayLike, failures_per_gpu_hour: float | None = None) -> ArrayLike:
    """Expected seconds between job interruptions of an n-GPU job: HOUR / (n × failures per GPU-hour).

    Exponential failures, rate proportional to the GPU count (any GPU stops the synchronous job).
    A rate of 0 (no failures) gives inf, which ``goodput`` accepts."""
    rate = resolve(failures_per_gpu_hour=failures_per_gpu_hour).failures_per_gpu_hour
    with np.errstate(divide="ignore"):
        return _scalar_or_array(HOUR / (np.asarray(n_gpus, dtype=float) * rate))


def checkpoint_write_s(
    checkpoint_bytes: ArrayLike,
    n_gpus: ArrayLike,
    write_bytes_per_s_per_gpu: float | None = None,
    max_write_bytes_per_s: float | None = None,
) -> ArrayLike:
    """Seconds to write a checkpoint of ``checkpoint_bytes`` (the whole job's state), synchronously:
    bytes / min(n × per-GPU write bandwidth, aggregate limit)."""
    r = resolve(
        write_bytes_per_s_per_gpu=write_bytes_per_s_per_gpu,
        max_write_bytes_per_s=max_write_bytes_per_s,
    )
    bandwidth = np.minimum(
        np.asarray(n_gpus, dtype=float) * r.write_bytes_per_s_per_gpu, r.max_write_bytes_per_s
    )
    return _scalar_or_array(np.asarray(checkpoint_bytes, dtype=float) / bandwidth)


def young_daly_interval_s(
    write_s: ArrayLike, mtbf_s: ArrayLike, higher_order: bool = True
) -> ArrayLike:
    """Optimal compute time between checkpoints, s, for write time δ and MTBF M (both s).

    ``higher_order`` (default): Daly 2006, √(2δM)·[1 + ⅓√(δ/2M) + ⅑·δ/2M] − δ for δ < 2M, else M.
    Otherwise Young 1974's first-order √(2δM), the minimiser of the first-order waste δ/τ + τ/2M.
    """
    d = np.asarray(write_s, dtype=float)
    m = np.asarray(mtbf_s, dtype=float)
    young = np.sqrt(2 * d * m)
    if not higher_order:
        return _scalar_or_array(young)
    x = d / (2 * m)
    daly = young * (1 + np.sqrt(x) / 3 + x / 9) - d
    return _scalar_or_array(np.where(d < 2 * m, daly, m))


@dataclass(frozen=True)
class Goodput:
    """Expected time budget of a run under failures (floats, or arrays of the broadcast shape)."""

    busy_s: ArrayLike  # useful training time
    mtbf_s: ArrayLike  # expected seconds between interruptions of the job
    checkpoint_write_s: ArrayLike  # one checkpoint write
    checkpoint_interval_s: ArrayLike  # compute between checkpoints (≤ busy_s)
    checkpoints: ArrayLike  # expected number of completed writes (≥ 1: the final save)
    expected_interruptions: ArrayLike  # failures over the wall time, restarts' own included
    checkpoint_s: ArrayLike  # lost to checkpoint writes
    rework_s: ArrayLike  # lost work since the last checkpoint, partial writes included
    restart_s: ArrayLike  # lost to restarts (detection, rescheduling, reload)
    wall_s: ArrayLike  # busy + the three losses
    goodput: ArrayLike  # busy / wall, in (0, 1]

    def to_dict(self) -> dict[str, Any]:
        """Plain figures (floats, or lists for arrays) with units in the key names."""

        def plain(x: ArrayLike) -> float | list[float]:
            return float(x) if np.ndim(x) == 0 else np.asarray(x).tolist()

        d = {k: plain(v) for k, v in asdict(self).items()}
        d["lost_s"] = {
            "checkpoint_writes": d.pop("checkpoint_s"),
            "rework": d.pop("rework_s"),
            "restarts": d.pop("restart_s"),
        }
        return d


def _excess(x: np.ndarray) -> np.ndarray:
    """(e^x − 1)/x − 1 for x ≥ 0 (0 at x = 0; the series below 1e-5 avoids cancellation)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return np.where(x < 1e-5, x / 2 + x * x / 6, np.expm1(x) / x - 1)


def _log_expm1_over_x(x: np.ndarray) -> np.ndarray:
    """log((e^x − 1)/x) for x ≥ 0 without overflow: x + log1p(−e^{−x}) − log x for large x."""
    big = np.maximum(x, 1.0)
    return np.where(
        x > 1, big + np.log1p(-np.exp(-big)) - np.log(big), np.log1p(_excess(np.minimum(x, 1.0)))
    )


def _segment_goodput(
    tau: np.ndarray, write: np.ndarray, m: np.ndarray, restart: np.ndarray
) -> np.ndarray:
    """τ / E for one segment of τ work + δ write (this module's docstring), in log space, in (0, 1]."""
    seg = tau + write
    return np.clip(
        np.exp(np.log(tau) - np.log(seg) - restart / m - _log_expm1_over_x(seg / m)), _TINY, 1.0
    )


def cluster_reliability(
    failures_per_gpu_hour: float | None = None,
    restart_s: float | None = None,
    storage_write_bytes_per_s: float | None = None,
) -> dict[str, float]:
    """A cluster's own reliability figures (``ClusterSpec``'s: failures per device-hour, restart time in s, the
    whole job's checkpoint write bandwidth in bytes/s; None = ``reliability.toml``'s default) as the keyword
    arguments of ``goodput`` and ``steady_goodput``. A job bandwidth replaces the per-device one: the write
    takes bytes / that bandwidth whatever the device count."""
    kw: dict[str, float] = {}
    if failures_per_gpu_hour is not None:
        kw["failures_per_gpu_hour"] = failures_per_gpu_hour
    if restart_s is not None:
        kw["restart_s"] = restart_s
    if storage_write_bytes_per_s is not None:
        kw["write_bytes_per_s_per_gpu"], kw["max_write_bytes_per_s"] = (
            np.inf,
            storage_write_bytes_per_s,
        )
    return kw


def steady_goodput(
    n_gpus: ArrayLike,
    checkpoint_bytes: ArrayLike,
    *,
    failures_per_gpu_hour: float | None = None,
    restart_s: float | None = None,
    write_bytes_per_s_per_gpu: float | None = None,
    max_write_bytes_per_s: float | None = None,
) -> ArrayLike:
    """Goodput of a run at least one checkpoint interval long, with the defaults of ``reliability.toml`` for
    any figure not given (``goodput``'s keywords): it does not depend on the run's length then (every interval
    is alike), so the solver, which makes time linear in tokens, uses it. A run shorter than its interval does
    better (``goodput``)."""
    m, write, restart = _segment_inputs(
        n_gpus,
        checkpoint_bytes,
        failures_per_gpu_hour,
        restart_s,
        write_bytes_per_s_per_gpu,
        max_write_bytes_per_s,
    )
    tau = np.maximum(np.asarray(young_daly_interval_s(write, m), dtype=float), MIN_INTERVAL_S)
    return _scalar_or_array(_segment_goodput(tau, write, m, restart))


def _segment_inputs(
    n_gpus: ArrayLike,
    checkpoint_bytes: ArrayLike,
    failures_per_gpu_hour: float | None,
    restart_s: ArrayLike | None,
    write_bytes_per_s_per_gpu: float | None,
    max_write_bytes_per_s: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The job's MTBF, one checkpoint write and one restart, s (arrays), at the figures given or their defaults."""
    m = np.asarray(mtbf_s(n_gpus, failures_per_gpu_hour), dtype=float)
    write = np.asarray(
        checkpoint_write_s(
            checkpoint_bytes, n_gpus, write_bytes_per_s_per_gpu, max_write_bytes_per_s
        ),
        dtype=float,
    )
    return m, write, np.asarray(resolve(restart_s=restart_s).restart_s, dtype=float)


def goodput(
    busy_s: ArrayLike,
    n_gpus: ArrayLike,
    checkpoint_bytes: ArrayLike,
    *,
    failures_per_gpu_hour: float | None = None,
    restart_s: ArrayLike | None = None,
    write_bytes_per_s_per_gpu: float | None = None,
    max_write_bytes_per_s: float | None = None,
    checkpoint_interval_s: ArrayLike | None = None,
) -> Goodput:
    """Expected wall time and goodput of ``busy_s`` seconds of training on ``n_gpus`` GPUs that save
    ``checkpoint_bytes`` bytes (the job's whole state) every Daly-optimal interval, or every
    ``checkpoint_interval_s`` seconds of compute when given. Broadcasts over arrays; None = the
    defaults of ``reliability.toml`` (``defaults()``). Units: s, GPUs, bytes, failures per GPU-hour,
    bytes/s; ``checkpoint_bytes`` > 0. Formulas: this module's docstring."""
    busy = np.asarray(busy_s, dtype=float)
    m, write, restart = _segment_inputs(
        n_gpus,
        checkpoint_bytes,
        failures_per_gpu_hour,
        restart_s,
        write_bytes_per_s_per_gpu,
        max_write_bytes_per_s,
    )
    tau = (
        young_daly_interval_s(write, m) if checkpoint_interval_s is None else checkpoint_interval_s
    )
    tau = np.maximum(np.minimum(np.asarray(tau, dtype=float), busy), MIN_INTERVAL_S)
    segments = busy / tau
    seg = tau + write
    x, r = seg / m, restart / m  # both 0 when no failures (m = inf)
    good = _segment_goodput(tau, write, m, restart)
    with np.errstate(over="ignore", invalid="ignore"):
        rework = segments * seg * _excess(x)
        restarts = segments * seg * (1 + _excess(x)) * np.expm1(r)
        wall = busy / good
    shape = np.broadcast(busy, m, write, restart, tau).shape

    def out(a: np.ndarray) -> ArrayLike:  # every field in the common shape
        return _scalar_or_array(np.array(np.broadcast_to(a, shape), dtype=float))

    return Goodput(
        busy_s=out(busy),
        mtbf_s=out(m),
        checkpoint_write_s=out(write),
        checkpoint_interval_s=out(tau),
        checkpoints=out(segments),
        expected_interruptions=out(wall / m),
        checkpoint_s=out(segments * write),
        rework_s=out(rework),
        restart_s=out(restarts),
        wall_s=out(wall),
        goodput=out(good),
    )


def node_count(n_gpus: ArrayLike, gpus_per_node: ArrayLike) -> ArrayLike:
    """Nodes a job spans: ⌈GPUs / GPUs per node⌉, at least one (the count the whole-run regime and bands use)."""
    return _scalar_or_array(
        np.maximum(
            np.ceil(np.asarray(n_gpus, dtype=float) / np.asarray(gpus_per_node, dtype=float)), 1.0
        )
    )


def first_order_waste(interval_s: ArrayLike, write_s: ArrayLike, mtbf_s: ArrayLike) -> ArrayLike:
    """Young's first-order wasted fraction of time, δ/τ + τ/(2M): writes plus half an interval of
    rework per failure. Minimised at τ = √(2δM)."""
    tau = np.asarray(interval_s, dtype=float)
    return _scalar_or_array(np.asarray(write_s) / tau + tau / (2 * np.asarray(mtbf_s)))


def failure_rate(market: str, base: float | None, gpus_per_instance: int = 1) -> float | None:
    """A cluster's failures per GPU-hour in ``market``: spot adds the preemption rate per
    instance-hour over the GPUs of one instance (a node of ``gpus_per_instance``) to ``base`` (None:
    reliability.toml's default); other markets keep ``base``."""
    if market != "spot":
        return base
    from trilemma.presets.prices import spot_preemptions_per_instance_hour

    rate = resolve(failures_per_gpu_hour=base).failures_per_gpu_hour
    return rate + spot_preemptions_per_instance_hour() / max(1, int(gpus_per_instance))
