"""Print the README's solve figures as the landed code and calibration give them, in the README's layout:

    python scripts/readme_figures.py

- the frontier-filter table ("Reading the frontier"): for each scenario of examples/scenarios, the
  frontier of every plan, the points each filter removes, the plans that could be run, and the points
  within the pins before (no filters: FrontierFilters with every bound open) and after;
- each scenario's optimum line and runner-up table ("Runners-up change one lever each").

Every recalibration (python scripts/calibrate.py) can move these; paste what this prints over the
README's blocks, and regenerate the "after" plots with
``trilemma solve examples/scenarios/NAME.toml --plot docs/frontier-NAME-after.png``.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from typer.testing import CliRunner

from trilemma.cli import app
from trilemma.report.axis_labels import fmt_usd_axis
from trilemma.report.solve import _signed
from trilemma.units import fmt_count, fmt_duration, fmt_usd

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("fast-and-cheap", "fast-and-good", "good-and-cheap")


#: the module, not trilemma.solve.frontier (the function the package exports under that name)
frontier_module = importlib.import_module("trilemma.solve.frontier")


def solve_json(name: str) -> dict:
    """`trilemma solve examples/scenarios/NAME.toml --json`, parsed."""
    r = CliRunner().invoke(
        app, ["solve", str(ROOT / "examples" / "scenarios" / f"{name}.toml"), "--json"]
    )
    if r.exit_code not in (0, 1):
        raise SystemExit(f"solve {name} failed ({r.exit_code}): {r.output[-2000:]}")
    return json.loads(r.stdout)


def unfiltered_feasible(name: str) -> int:
    """Points within the pins on the frontier of every plan (the filters' bounds opened)."""
    real = frontier_module.FrontierFilters
    frontier_module.FrontierFilters = lambda *a, **k: real(
        min_steps=0, min_time_s=0, max_time_s=1e30
    )  # type: ignore
    try:
        return int(solve_json(name)["frontier"]["feasible"])
    finally:
        frontier_module.FrontierFilters = real


def _plan(model: str, hw: dict, tokens: float) -> str:
    """'30.3B, 1024× mi300x, 370.3B tokens': the model's size from its solver name, GPUs, tokens."""
    size = model.split("auto-", 1)[1].split(" ", 1)[0] if model.startswith("auto-") else model
    return f"{size}, {hw['n_gpus']}× {hw['name']}, {fmt_count(tokens)} tokens"


def scenario_block(name: str, d: dict) -> list[str]:
    """The optimum line and the runner-up table of one scenario, as in the README."""
    o = d["optimum"]
    lines = [
        f"`{name}`: optimum {_plan(o['model']['name'], o['hardware'], o['batch']['tokens'])}: "
        f"{fmt_duration(o['time']['total_s'])}, {fmt_usd(o['cost']['usd'])}, loss {o['loss']['mean']:.3f}",
        "",
        "| lever | plan | Δ time | Δ cost | Δ loss | meets the pins |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in d["runners_up"]:
        dl = r["delta"]
        loss = "—" if dl["loss"] is None else _signed(round(dl["loss"], 3), "{:.3f}".format)
        meets = "yes" if not r["breaks"] else "no: " + ", ".join(r["breaks"])
        lines.append(
            f"| {r['differs_in']} | {_plan(r['model']['name'], r['hardware'], r['batch']['tokens'])} "
            f"| {_signed(dl['time_s'], fmt_duration)} | {_signed(dl['usd'], fmt_usd_axis)} | {loss} | {meets} |"
        )
    return lines


def main() -> None:
    print(
        "| scenario | frontier of every plan (before) | fewer than 1,000 steps | under 10 minutes | over a year "
        "| plans that could be run (after) | within the pins (before → after) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    results = {}
    for name in SCENARIOS:
        d = results[name] = solve_json(name)
        f, rm = d["frontier"], d["frontier"]["removed"]
        print(
            f"| {name} | {f['unfiltered_points']:,} | {rm['steps']:,} | {rm['short']:,} | {rm['long']:,} "
            f"| {f['points']:,} | {unfiltered_feasible(name):,} → {f['feasible']:,} |"
        )
    for name, d in results.items():
        print()
        print("\n".join(scenario_block(name, d)))


if __name__ == "__main__":
    main()
