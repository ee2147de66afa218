"""Write the on-device fit (trilemma.validate.ondevice) into presets/runtimes.toml and devices.toml
[efficiency]: each runtime's bandwidth share, fixed cost per token, prefill share and row count, the pooled
fit per compute unit and the held-out bands. tests/test_deploy.py refits and compares.

Run from the repository root after data/ondevice.csv changes: python scripts/fit_ondevice.py (seconds).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from trilemma.presets import runtime_presets  # noqa: E402
from trilemma.validate import ondevice  # noqa: E402

RUNTIMES = ROOT / "src" / "trilemma" / "presets" / "runtimes.toml"
DEVICES = ROOT / "src" / "trilemma" / "presets" / "devices.toml"
EFFICIENCY_HEAD = """[efficiency]
# Share of the usable memory kept for the runtime's buffers (compute graph, activations, allocator): ASSUMED
# 10%, the round share with which every published "fits / does not fit" row is classified right (without it the
# 8 GB M2 would hold MLC's Llama-3-8B, which it swaps on: mlc-llm#2174).
runtime_share = 0.1
# 80% band on decode tokens/s: the quantiles of the log residuals of data/ondevice.csv's rows held out one at a
# time (a runtime with its own rows) and by whole runtime (a runtime without rows takes the pooled fit of its
# unit): trilemma.validate.ondevice.summary, written by scripts/fit_ondevice.py; a test compares.
"""
POOLED_HEAD = """
# The pooled fit of every runtime on one compute unit (trilemma.validate.ondevice.pooled): what a runtime
# without published rows takes. A unit without prefill rows has no prefill share: its prefill is not predicted.
"""


def runtime_lines(v: dict[str, float]) -> list[str]:
    """The fitted keys of one runtime's table."""
    lines = []
    if "bandwidth_ceiling_bytes_per_s" in v:
        lines.append(f"bandwidth_ceiling_bytes_per_s = {v['bandwidth_ceiling_bytes_per_s']:.4g}")
    elif "bandwidth_share" in v:
        lines += [
            f"bandwidth_share = {v['bandwidth_share']:.4f}",
            f"per_token_s = {v['per_token_s']:.5f}",
        ]
    if "prefill_share" in v:
        lines.append(f"prefill_share = {v['prefill_share']:.4f}")
    return [*lines, f"fit_rows = {int(v.get('rows', 0))}"]


def main() -> None:
    data = ondevice.rows()
    fitted, pool, s = ondevice.fit(data), ondevice.pooled(data), ondevice.summary()
    text = re.sub(
        r"\n(bandwidth_share|per_token_s|prefill_share|fit_rows|bandwidth_ceiling_bytes_per_s) = [^\n]*",
        "",
        RUNTIMES.read_text(),
    )
    for name in runtime_presets():
        i = text.index(f"[{name}]\n")
        j = text.index("\nsource =", i)
        text = text[:j] + "\n" + "\n".join(runtime_lines(fitted.get(name, {}))) + text[j:]
    RUNTIMES.write_text(text)
    loo, loro = (s[k]["decode"]["band"] for k in ("leave_one_out", "leave_one_runtime_out"))
    eff = EFFICIENCY_HEAD + (
        f"band_low = {loo[0]:.3f}\nband_high = {loo[1]:.3f}\n"
        f"band_low_loro = {loro[0]:.3f}\nband_high_loro = {loro[1]:.3f}\n" + POOLED_HEAD
    )
    for unit, v in pool.items():
        if unit == "ceiling":
            eff += "[efficiency.pooled.ceiling]  # bytes/s: the ceiling-bound runtimes' ceiling by unit\n"
            eff += "".join(f"{u} = {c:.4g}\n" for u, c in v.items()) + "\n"
        elif v:
            eff += f"[efficiency.pooled.{unit}]\n"
            eff += "".join(
                f"{k} = {v[k]:.{5 if k == 'per_token_s' else 4}f}\n"
                for k in ("bandwidth_share", "per_token_s", "prefill_share")
                if k in v
            )
            eff += "\n"
    devices = DEVICES.read_text()
    DEVICES.write_text(devices[: devices.index("[efficiency]")] + eff.rstrip() + "\n")


if __name__ == "__main__":
    main()
