"""The site's power while a configuration trains, W: the --max-power pin's quantity (``solve``), by
the formula of estimate's "power while it runs" (trilemma.estimate.cost)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.estimate.cost import facility_power_w, wall_power_w
from trilemma.solve.search import ConfigTable
from trilemma.specs import HardwareSpec


def device_watts(
    gpus: tuple[HardwareSpec, ...], energy: dict[str, Any], cluster_fields: dict[str, Any] | None
) -> np.ndarray:
    """Facility power per device while training, W, per GPU type: trilemma.estimate.cost.wall_power_w
    with the host share of its system class (trilemma.estimate.evaluate.host_w_for) and the PUE, both
    ``cluster_fields``' (--host-power, --pue, --gpus-per-node) where given, as estimate computes them."""
    from trilemma.estimate.evaluate import host_w_for

    cf = cluster_fields or {}
    pue = energy["pue"] if cf.get("pue") is None else cf["pue"]
    per_node = cf.get("host_power_w_per_node")
    return np.array(
        [
            wall_power_w(
                h.board_power_w,
                energy["power_fraction"],
                energy["host_power_fraction"],
                pue,
                host_w_for(h, per_node, cf.get("gpus_per_node") or h.devices_per_node, energy),
            )
            for h in gpus
        ]
    )


def row_power_w(
    table: ConfigTable, energy: dict[str, Any], cluster_fields: dict[str, Any] | None
) -> np.ndarray:
    """Facility power of each configuration while it runs, W: devices × device_watts (the formula of
    estimate's "power while it runs", trilemma.estimate.cost.facility_power_w)."""
    return facility_power_w(
        table.n_gpus.astype(float), device_watts(table.gpus, energy, cluster_fields)[table.gpu_idx]
    )


__all__ = ["device_watts", "row_power_w"]
