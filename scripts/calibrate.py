"""Reproduce the calibration: fit trilemma's efficiency constants on the published figures shipped
in src/trilemma/data/, cross-validate by source, and write src/trilemma/presets/calibrated.toml.

    python scripts/calibrate.py

Deterministic: the same data and code give the same file (up to the date line).
"""

from __future__ import annotations

import sys
import time

from trilemma.validate.calibration_file import calibrate_and_write


def main() -> int:
    t0 = time.perf_counter()
    out = calibrate_and_write(progress=lambda g: print(f"  leave out {g}", file=sys.stderr))
    print(f"wrote {out['path']} in {time.perf_counter() - t0:.0f} s")
    for section, values in out["constants"].items():
        for k, v in values.items():
            print(f"  {section}.{k} = {v:.6g}")
    lo, hi = out["bands"]
    print(f"  80% band on time: ×{pow(2.718281828, -hi):.2f} … ×{pow(2.718281828, -lo):.2f}")
    xf = out["cross_family"]
    print(
        f"  cross-family (each chip family held out, n={xf['n']}): log(predicted/reported) 10th–90th percentile "
        f"{xf['log_q10']:+.3f} … {xf['log_q90']:+.3f}; medians "
        + ", ".join(f"{f} {v['log_median']:+.3f} (n={v['n']})" for f, v in xf["families"].items())
    )
    for kind, s in out["summary"].items():
        for which, st in s.items():
            if st.get("n"):
                print(
                    f"  {kind:<10} {which:<22} n={st['n']:<4} median {st['median_error']:.1%}  worst "
                    f"{st['worst_error']:.0%}  ≤10%: {st['within_10pct']:.0%}  ≤25%: {st['within_25pct']:.0%}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
