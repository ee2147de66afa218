"""Energy on the device: joules per generated token and per chat answer, with a band, and answers per battery
charge for a device with a battery of known capacity.

    energy per token   = device power / decode tokens/s
    energy per answer  = device power × (prompt / prefill tokens/s + reply / decode tokens/s)
    answers per charge = battery Wh × 3600 J/Wh / energy per answer

The answer is LMSYS-Chat-1M's mean conversation turn (ANSWER_PROMPT_TOKENS, ANSWER_RESPONSE_TOKENS). The
band is the decode rate's 80% band (the held-out fit's, trilemma.estimate.deploy): the answer's decode time,
and so its joules, run from the band's fast end to its slow end at the device's draw. The draw itself has no
band: devices.toml says for each device whether it is measured or ASSUMED (the note says so). A full charge
is the battery's rated energy; the screen, radios and the rest of the phone draw from it too, so the count is
an upper bound on what one charge gives to answers alone.
"""

from __future__ import annotations

from typing import Any

from trilemma.specs.device import DeviceSpec
from trilemma.units import WH

#: a chat answer: 69.5 prompt tokens and 214.5 response tokens on average over one million real conversations
#: (Zheng et al. 2023, "LMSYS-Chat-1M", arXiv 2309.11998, Table 1)
ANSWER_PROMPT_TOKENS = 69.5
ANSWER_RESPONSE_TOKENS = 214.5


def answer_energy_j(power_w: float, decode_tps: float, prefill_tps: float | None) -> float:
    """Joules for one chat answer at the device's draw: its prompt prefilled (when a prefill rate is known)
    and its response decoded (ANSWER_PROMPT_TOKENS, ANSWER_RESPONSE_TOKENS)."""
    prompt_s = ANSWER_PROMPT_TOKENS / prefill_tps if prefill_tps else 0.0
    return power_w * (prompt_s + ANSWER_RESPONSE_TOKENS / decode_tps)


def answers_per_charge(battery_wh: float, joules_per_answer: float) -> float:
    """Chat answers one full charge of a ``battery_wh`` battery pays for at ``joules_per_answer`` J each."""
    return battery_wh * WH / joules_per_answer


def energy_fields(
    device: DeviceSpec, decode_tps: float, band_tps: tuple[float, float], prefill_tps: float | None
) -> dict[str, Any]:
    """The Deployment's energy fields (module docstring): J per token, J per answer at the decode rate and at
    its band's ends (``band_tps``: slow, fast), and — for a device with a battery — its capacity and the
    answers one charge pays for, with the band (None without a battery)."""
    slow, fast = band_tps
    point = answer_energy_j(device.power_w, decode_tps, prefill_tps)
    low = answer_energy_j(device.power_w, fast, prefill_tps)
    high = answer_energy_j(device.power_w, slow, prefill_tps)
    wh = device.battery_wh
    return {
        "energy_per_token_j": device.power_w / decode_tps,
        "energy_per_answer_j": point,
        "energy_per_answer_j_low": low,
        "energy_per_answer_j_high": high,
        "battery_wh": wh,
        "battery_source": device.battery_source,
        "answers_per_charge": None if wh is None else answers_per_charge(wh, point),
        "answers_per_charge_low": None if wh is None else answers_per_charge(wh, high),
        "answers_per_charge_high": None if wh is None else answers_per_charge(wh, low),
    }


__all__ = [
    "ANSWER_PROMPT_TOKENS",
    "ANSWER_RESPONSE_TOKENS",
    "answer_energy_j",
    "answers_per_charge",
    "energy_fields",
]
