"""Cost, energy and carbon of a run.

- Dollars = device-hours × price per device-hour (preset price with its date and source, or the user's).
- Energy = devices × board power × average power fraction × (1 + host share) × PUE × wall time.
  Published training-energy figures are computed the same way with power fraction 1 (GPU-hours ×
  TDP × PUE: Touvron et al. 2023, arXiv 2302.13971 §6.1; Luccioni et al. 2022, arXiv 2211.02001).
- CO2 = energy × grid carbon intensity (kg CO2e per kWh; regions.toml).
- Household-years = energy / average household electricity use per year (constants.toml).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trilemma.units import HOUR, KWH

ArrayLike = float | np.ndarray


@dataclass(frozen=True)
class CostArrays:
    gpu_hours: ArrayLike
    usd: ArrayLike
    energy_j: ArrayLike
    co2_kg: ArrayLike


def gpu_hours(n_gpus: ArrayLike, wall_s: ArrayLike) -> ArrayLike:
    """Device-hours: devices × wall-clock hours."""
    return n_gpus * wall_s / HOUR


def wall_power_w(board_power_w: ArrayLike, power_fraction: float = 1.0, host_power_fraction: float = 0.0,
                 pue: float = 1.0) -> ArrayLike:
    """Average power drawn per device, W: board power × average power fraction × (1 + host share) × PUE.

    Touvron et al. 2023 (arXiv 2302.13971 §6.1) and Luccioni et al. 2022 (arXiv 2211.02001) use
    power fraction 1 (TDP) and a PUE; the defaults give the board power alone.
    """
    return board_power_w * power_fraction * (1 + host_power_fraction) * pue


def energy_j(n_devices: ArrayLike, wall_s: ArrayLike, watts: ArrayLike) -> ArrayLike:
    """Energy of a run, J: devices × wall-clock seconds × average power per device (``wall_power_w``)."""
    return n_devices * wall_s * watts


def run_cost(n_gpus: ArrayLike, wall_s: ArrayLike, price_usd_per_hour: float, board_power_w: float,
             power_fraction: float, host_power_fraction: float, pue: float,
             grid_kg_per_kwh: float) -> CostArrays:
    """Device-hours, dollars (device-hours × USD per device-hour), energy (J) and CO2 (kg) of a run."""
    hours = gpu_hours(n_gpus, wall_s)
    joules = energy_j(n_gpus, wall_s, wall_power_w(board_power_w, power_fraction, host_power_fraction, pue))
    return CostArrays(gpu_hours=hours, usd=hours * price_usd_per_hour, energy_j=joules,
                      co2_kg=joules / KWH * grid_kg_per_kwh)


def household_years(joules: ArrayLike, household_kwh_per_year: float) -> ArrayLike:
    """Energy as years of an average household's electricity use."""
    return joules / KWH / household_kwh_per_year
