"""Physical bounds on a user's hardware profile (``<config>/hardware/*.json``, written by
``trilemma probe`` and open to hand edits), stated once and checked each time a profile is read.

Ceiling: CEILING_MULTIPLE times the packaged preset with the most of that quantity. A measured
machine is at most a few times any datacentre part (the presets span CPUs' closest relatives to
GB200-class GPUs); ten times the best is a typo or an edit (1e30 FLOP/s), not a measurement.
Floor: the least a machine that can run ``trilemma probe`` at all can show (FLOORS, with why);
below it every step takes hours and every plan is meaningless (0.001 B/s of memory bandwidth).
The measured host seconds per eager operator have a fixed range instead (EFFICIENCY_RANGES): no
packaged preset carries one to scale a ceiling from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trilemma.errors import InputError
from trilemma.specs import HardwareSpec
from trilemma.specs.bounds import LINK_RANGE

CEILING_MULTIPLE = 10.0

#: field -> (floor, unit, why the floor): a profile below it is refused
FLOORS: dict[str, tuple[float, str, str]] = {
    "peak_flop_per_s": (1e9, "FLOP/s", "one CPU core does tens of GFLOP/s"),
    "hbm_bytes": (1e8, "bytes", "100 MB holds the probe's smallest model and little else"),
    "hbm_bw_bytes_per_s": (1e9, "bytes/s", "one DDR channel moves ~20 GB/s"),
    "intra_node_bw_bytes_per_s": (LINK_RANGE[0], "bytes/s", "a request's link floor"),
    "inter_node_bw_bytes_per_s": (LINK_RANGE[0], "bytes/s", "a request's link floor"),
    "board_power_w": (1.0, "W", "a phone's SoC draws several watts"),
    "price_usd_per_hour": (1e-6, "USD/hour", "positive"),
}


#: efficiency constant -> (floor, ceiling, unit, why): a profile's measured host dispatch cost
#: (trilemma.probe.dispatch) outside it is refused; absent, the stated constant stands
EFFICIENCY_RANGES: dict[str, tuple[float, float, str, str]] = {
    key: (
        1e-7,
        1e-3,
        "s",
        "an eager operator costs the host about 1-20 µs (Python, the dispatcher, autograd), an "
        "optimizer's step a few to ~50 µs per tensor; under 100 ns or over 1 ms is not a "
        "measurement of either",
    )
    for key in ("host_op_s", "host_bwd_op_s", "host_opt_tensor_s")
} | {
    "host_opt_elem_s": (
        0.0,
        1e-6,
        "s",
        "AdamW's single-tensor loop reads and writes 80 bytes per fp32 element (probe.dispatch), "
        "about 1-8 ns at a CPU's 10-100 GB/s, several times that on a core other work shares; 0 "
        "where the measurement could not tell it from the 1-element step; over 1 µs is under "
        "80 MB/s, not a measurement of it",
    ),
    "collective_latency_s": (
        0.0,
        0.1,
        "s",
        "a collective between local processes costs microseconds to a few milliseconds a call; over "
        "100 ms is not a measurement of one",
    ),
    "collective_bus_bw_bytes_per_s": (
        1e6,
        1e13,
        "bytes/s",
        "gloo's all-reduce between local processes moves ~0.1-10 GB/s; under 1 MB/s is not a "
        "measurement of it",
    ),
}


def _values(hw: HardwareSpec, field: str) -> Iterable[tuple[str, float]]:
    """(name shown in an error, value) of ``field`` on ``hw``; FLOP/s once per precision."""
    if field == "peak_flop_per_s":
        return ((f"{field}.{p}", v) for p, v in hw.peak_flop_per_s.items())
    return ((field, float(getattr(hw, field))),)


def check_profile(hw: HardwareSpec, packaged: Mapping[str, HardwareSpec], where: str) -> None:
    """InputError naming the first field of ``hw`` outside [floor, CEILING_MULTIPLE × the packaged
    maximum]; ``where`` names the profile's file (the error's field is ``hardware profile WHERE.field``)."""
    for field, (floor, unit, why) in FLOORS.items():
        top_name, top = max(
            ((n, v) for n, h in packaged.items() for _, v in _values(h, field)),
            key=lambda nv: nv[1],
        )
        ceiling = CEILING_MULTIPLE * top
        for shown, v in _values(hw, field):
            if not floor <= v <= ceiling:
                raise InputError(
                    f"hardware profile {where}.{shown}",
                    v,
                    f"{floor:g} to {ceiling:.3g} {unit}: at least {floor:g} ({why}), at most "
                    f"{CEILING_MULTIPLE:g} × the largest preset's ({top_name}, {top:.3g}); rerun "
                    "`trilemma probe --remeasure` or fix the file",
                )
    for key, (floor, ceiling, unit, why) in EFFICIENCY_RANGES.items():
        v = hw.efficiency.get(key)
        if v is not None and not floor <= v <= ceiling:
            raise InputError(
                f"hardware profile {where}.efficiency.{key}",
                v,
                f"{floor:g} to {ceiling:g} {unit} ({why}); rerun `trilemma probe --remeasure` or "
                "fix the file",
            )
