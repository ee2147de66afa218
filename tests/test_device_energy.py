"""Energy on the device: joules per answer with its band, and answers per battery charge, by hand from the cited
battery capacities."""

from __future__ import annotations

import json

import pytest
from clitools import run

BASE = ("estimate", "-m", "llama3.2-3b", "-g", "h100-sxm", "-n", "8", "-t", "10B")
#: the iPhone 15 Pro's cell: 3,274 mAh, 12.70 Wh in China's regulatory database (MySmartPrice, 2023-09)
IPHONE_15_PRO_WH = 12.70
#: the Pixel 8 Pro's cell: 19.25 Wh (iFixit's teardown, 2023-10; The Register, 2023-10-24)
PIXEL_8_PRO_WH = 19.25
#: a chat answer: 69.5 prompt and 214.5 reply tokens (LMSYS-Chat-1M, arXiv 2309.11998, Table 1)
PROMPT, REPLY = 69.5, 214.5


def _deploy(capsys, *args: str) -> dict:
    code, out, err = run(capsys, *BASE, *args, "--json")
    assert code == 0 and err == "", err
    return json.loads(out)["deploy"]


@pytest.mark.parametrize(
    ("device", "wh"), [("iphone-15-pro", IPHONE_15_PRO_WH), ("pixel-8-pro", PIXEL_8_PRO_WH)]
)
def test_answers_per_charge_by_hand(capsys, device, wh):
    """Answers per charge = battery Wh × 3,600 J/Wh / J per answer; the band's ends are the answer's joules at
    the decode band's ends: power × (prompt / prefill + reply / decode), the fast end the fewest joules."""
    d = _deploy(capsys, "--deploy", device, "--context", "256")
    assert d["battery_wh"] == wh
    assert d["answers_per_charge"] == pytest.approx(wh * 3600 / d["energy_per_answer_j"], rel=1e-12)
    power = d["energy_per_token_j"] * d["decode_tokens_per_s"]
    pre = d[
        "prefill_tokens_per_s"
    ]  # None where no peak is known for the prefill's unit: no prompt time
    prompt_s = PROMPT / pre if pre else 0.0
    fast = power * (prompt_s + REPLY / d["decode_tokens_per_s_high"])
    slow = power * (prompt_s + REPLY / d["decode_tokens_per_s_low"])
    assert d["energy_per_answer_j_low"] == pytest.approx(fast, rel=1e-12)
    assert d["energy_per_answer_j_high"] == pytest.approx(slow, rel=1e-12)
    assert d["answers_per_charge_low"] == pytest.approx(wh * 3600 / slow, rel=1e-12)
    assert d["answers_per_charge_high"] == pytest.approx(wh * 3600 / fast, rel=1e-12)
    assert d["answers_per_charge_low"] < d["answers_per_charge"] < d["answers_per_charge_high"]


def test_battery_line_printed_and_absent_without_a_capacity(capsys):
    """The text report prints the answers per charge with the cell's source; a phone whose cell has no
    published Wh figure (the Snapdragon 8 Gen 3 preset) prints none and says so in JSON with null."""
    code, out, _ = run(capsys, *BASE, "--deploy", "iphone-15-pro", "--context", "256")
    assert code == 0 and "answers per charge" in out and "12.70 Wh" in out
    d = _deploy(capsys, "--deploy", "oneplus-12", "--context", "256")
    assert d["battery_wh"] is None and d["answers_per_charge"] is None
    code, out, _ = run(capsys, *BASE, "--deploy", "oneplus-12", "--context", "256")
    assert code == 0 and "answers per charge" not in out


def test_measured_draw_replaces_the_assumed_one(capsys):
    """The M4 Mac mini's draw is measured (31.4 W and 30.1 W at the wall generating with Ollama on its GPU,
    geerlingguy/ai-benchmarks#2, 2024-11-20): J per token is their mean over the decode rate, and no note calls
    the draw ASSUMED; a phone's draw still is."""
    d = _deploy(capsys, "--deploy", "mac-mini-m4-16gb", "--context", "256")
    assert d["energy_per_token_j"] == pytest.approx((31.4 + 30.1) / 2 / d["decode_tokens_per_s"])
    assert not any("ASSUMED" in n and "W draw" in n for n in d["notes"])
    assert d["battery_wh"] is None and d["answers_per_charge"] is None
