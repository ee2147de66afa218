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


def run_cost(n_gpus: ArrayLike, wall_s: ArrayLike, price_usd_per_hour: float, board_power_w: float,
             power_fraction: float, host_power_fraction: float, pue: float,
             grid_kg_per_kwh: float) -> CostArrays:
    hours = gpu_hours(n_gpus, wall_s)
    energy_j = hours * HOUR * board_power_w * power_fraction * (1 + host_power_fraction) * pue
    return CostArrays(gpu_hours=hours, usd=hours * price_usd_per_hour, energy_j=energy_j,
                      co2_kg=energy_j / KWH * grid_kg_per_kwh)


def household_years(energy_j: ArrayLike, household_kwh_per_year: float) -> ArrayLike:
    return energy_j / KWH / household_kwh_per_year
