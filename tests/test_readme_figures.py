"""The README's solve figures (frontier-filter table, each scenario's optimum and runners-up) are what the
landed code and calibration give: scripts/readme_figures.py prints them, every line must be in the README.
A recalibration that moves them fails here until the README is regenerated from the script."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location(
        "readme_figures", ROOT / "scripts" / "readme_figures.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_solve_figures_are_the_landed_ones(capsys):
    _script().main()
    printed = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(printed) > 20  # the table and three scenarios' blocks
    missing = [ln for ln in printed if ln not in readme]
    assert not missing, "README out of date; run python scripts/readme_figures.py:\n" + "\n".join(
        missing
    )
