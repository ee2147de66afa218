"""Cost, energy and carbon of a run.

- Dollars = device-hours × price per device-hour (preset price with its date and source, or the user's).
- Facility power = devices × (board power × average power fraction × (1 + host share) + host and
  network power per device) × PUE; energy = facility power × wall time. Published training-energy
  figures count the devices alone (GPU-hours × TDP × PUE: Touvron et al. 2023, arXiv 2302.13971 §6.1;
  Luccioni et al. 2022, arXiv 2211.02001): host power 0 reproduces them.
- CO2 = energy × grid carbon intensity (kg CO2e per kWh; regions.toml).
- Household-years = energy / average household electricity use per year (constants.toml).
- Homes powered = facility power / an average household's mean draw (its kWh per year over a year).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trilemma.units import HOUR, KWH, YEAR

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


def wall_power_w(
    board_power_w: ArrayLike,
    power_fraction: float = 1.0,
    host_power_fraction: float = 0.0,
    pue: float = 1.0,
    host_w_per_device: ArrayLike = 0.0,
) -> ArrayLike:
    """Average facility power per device, W:
    (board power × average power fraction × (1 + host share) + host and network W per device) × PUE.

    Touvron et al. 2023 (arXiv 2302.13971 §6.1) and Luccioni et al. 2022 (arXiv 2211.02001) use
    power fraction 1 (TDP), no host and a PUE; the defaults give the board power alone. The host and
    network share of a node (CPUs, memory, NICs, switches' share, fans) is the node's system power less
    its devices' (a DGX H100: 10.2 kW max for 8 × 700 W GPUs, constants.toml energy.host_power_w_per_device).
    """
    return (board_power_w * power_fraction * (1 + host_power_fraction) + host_w_per_device) * pue


def energy_j(n_devices: ArrayLike, wall_s: ArrayLike, watts: ArrayLike) -> ArrayLike:
    """Energy of a run, J: devices × wall-clock seconds × average power per device (``wall_power_w``)."""
    return n_devices * wall_s * watts


def facility_power_w(n_devices: ArrayLike, watts_per_device: ArrayLike) -> ArrayLike:
    """A run's draw on the grid, W: devices × facility power per device (``wall_power_w``)."""
    return n_devices * watts_per_device


def run_cost(
    n_gpus: ArrayLike,
    wall_s: ArrayLike,
    price_usd_per_hour: float,
    board_power_w: float,
    power_fraction: float,
    host_power_fraction: float,
    pue: float,
    grid_kg_per_kwh: float,
    host_w_per_device: float = 0.0,
) -> CostArrays:
    """Device-hours, dollars (device-hours × USD per device-hour), energy (J) and CO2 (kg) of a run."""
    hours = gpu_hours(n_gpus, wall_s)
    joules = energy_j(
        n_gpus,
        wall_s,
        wall_power_w(board_power_w, power_fraction, host_power_fraction, pue, host_w_per_device),
    )
    return CostArrays(
        gpu_hours=hours,
        usd=hours * price_usd_per_hour,
        energy_j=joules,
        co2_kg=joules / KWH * grid_kg_per_kwh,
    )


def household_years(joules: ArrayLike, household_kwh_per_year: float) -> ArrayLike:
    """Energy as years of an average household's electricity use."""
    return joules / KWH / household_kwh_per_year


def household_power_w(household_kwh_per_year: float) -> float:
    """An average household's mean electric draw, W: its kWh per year over one year (365.25 days)."""
    return household_kwh_per_year * KWH / YEAR


def homes_powered(power_w: ArrayLike, household_kwh_per_year: float) -> ArrayLike:
    """How many average homes a draw of ``power_w`` W would supply for as long as it lasts."""
    return power_w / household_power_w(household_kwh_per_year)
