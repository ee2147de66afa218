"""Serving on the users' own devices (solve with --deploy and --inference-tokens): priced at the device's
energy and its owners' electricity price, not at datacentre dollars per FLOP.

    answers      = inference tokens / (prompt + response tokens of one chat answer)
    energy, kWh  = answers × the device's joules per answer / 3.6e6
    dollars      = energy × the owners' price of electricity (--device-kwh, USD per kWh)

A chat answer is LMSYS-Chat-1M's mean prompt and reply (trilemma.estimate.device_energy.ANSWER_PROMPT_TOKENS,
ANSWER_RESPONSE_TOKENS); its joules are the device's draw × the answer's prefill and decode time
(trilemma.estimate.device_energy.answer_energy_j). The devices themselves are not priced: their owners already
have them, so serving adds no capital, only electricity. The default price: constants.toml
``energy.device_usd_per_kwh`` (the US average residential price, EIA).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trilemma.estimate.device_energy import ANSWER_PROMPT_TOKENS, ANSWER_RESPONSE_TOKENS
from trilemma.estimate.owned import _positive
from trilemma.presets import constants
from trilemma.units import KWH

#: tokens served by one chat answer: its prompt and its reply (LMSYS-Chat-1M means)
ANSWER_TOKENS = ANSWER_PROMPT_TOKENS + ANSWER_RESPONSE_TOKENS
#: at most this many dollars per kWh (--device-kwh), as --site-kwh
MAX_USD_PER_KWH = 10.0
CONVENTION = (
    "on the users' devices: the device's draw × the time of each chat answer (LMSYS-Chat-1M's 69.5-token "
    "prompt and 214.5-token reply) × {price}/kWh of electricity; the devices themselves are not priced "
    "(trilemma.solve.ondevice)"
)


def device_price(usd_per_kwh: Any) -> float:
    """The electricity price the devices' owners pay, USD per kWh: ``usd_per_kwh`` checked (above 0, at
    most MAX_USD_PER_KWH; InputError naming --device-kwh), or constants.toml's default where None."""
    if usd_per_kwh is None:
        return float(constants()["energy"]["device_usd_per_kwh"])
    allowed = f"dollars per kWh above 0, at most {MAX_USD_PER_KWH:g}, e.g. 0.16"
    return _positive("device-kwh", usd_per_kwh, allowed, MAX_USD_PER_KWH)


def device_serving_kwh(inference_tokens: float, answer_j: np.ndarray | float) -> np.ndarray | float:
    """Energy of serving ``inference_tokens`` tokens on the device, kWh: that many tokens as chat answers
    (ANSWER_TOKENS each) at ``answer_j`` joules per answer (per model where an array)."""
    return float(inference_tokens) / ANSWER_TOKENS * np.asarray(answer_j, dtype=float) / KWH


def device_serving_usd(
    inference_tokens: float, answer_j: np.ndarray | float, usd_per_kwh: float
) -> np.ndarray | float:
    """Dollars of serving ``inference_tokens`` tokens on the device: its energy (device_serving_kwh) at
    ``usd_per_kwh`` dollars per kWh."""
    return device_serving_kwh(inference_tokens, answer_j) * float(usd_per_kwh)
