"""A frontier a person can read (issue 20): plans that could be run, runners-up that differ in one lever,
axes in days and dollars."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from trilemma.cli import main
from trilemma.solve import solve
from trilemma.solve.optimize import FrontierFilters

SMALL = dict(gpu="a100-80gb,h100-sxm", params="100M..3B", max_gpus=256)
MINUTE, YEAR = 60.0, 365.25 * 86400.0  # hand-written: the filters' stated defaults, 10 minutes and a year


@pytest.fixture(scope="module")
def pair():
    """The same solve with the default filters and with --frontier-all."""
    return solve(deadline="30d", budget="$2M", **SMALL), solve(deadline="30d", budget="$2M", frontier_all=True, **SMALL)


def test_every_kept_point_passes_the_filters(pair):
    f, tab = pair[0].frontier, pair[0].table
    assert f.time_s.size > 0 and not f.keep_all
    steps = f.tokens / tab.batch_tokens[f.config]  # optimizer steps, recomputed from the plan's own batch
    assert (steps >= 1000 * (1 - 1e-12)).all()
    assert (f.time_s >= 10 * MINUTE).all() and (f.time_s <= YEAR).all()
    assert (f.removed_by == 0).all()
    d = FrontierFilters()
    assert (d.min_steps, d.min_time_s, d.max_time_s) == (1000, 10 * MINUTE, YEAR)


def test_frontier_all_keeps_a_superset_and_marks_what_each_filter_removes(pair):
    f, a = pair[0].frontier, pair[1].frontier
    kept = set(zip(f.config.tolist(), f.tokens.tolist()))
    every = set(zip(a.config.tolist(), a.tokens.tolist()))
    assert kept < every
    marked = {p for p, w in zip(zip(a.config.tolist(), a.tokens.tolist()), a.removed_by.tolist()) if w}
    assert every - kept == marked
    assert sum(a.removed.values()) == len(marked) and a.removed == f.removed
    # each mark is the first filter the point fails, in the stated order (steps, short, long)
    steps = a.tokens / pair[1].table.batch_tokens[a.config]
    for k, w in enumerate(a.removed_by.tolist()):
        first = next((i + 1 for i, bad in enumerate((steps[k] < 1000, a.time_s[k] < 10 * MINUTE,
                                                     a.time_s[k] > YEAR)) if bad), 0)
        assert w == first


def test_csv_and_json_say_what_each_filter_removed(tmp_path, capsys):
    out = tmp_path / "f.csv"
    args = ["solve", "--deadline", "30d", "--budget", "$2M", "--gpu", "a100-80gb", "--params", "100M..3B",
            "--max-gpus", "64", "--json", "--frontier", str(out)]
    assert main([*args, "--frontier-all"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == d["frontier"]["points"]
    counts = {k: sum(r["removed_by"] == k for r in rows) for k in FrontierFilters.NAMES}
    assert counts == d["frontier"]["removed"] and sum(counts.values()) > 0
    assert d["frontier"]["filters"]["applied"] is False
    assert main(args) == 0
    d2 = json.loads(capsys.readouterr().out)
    assert d2["frontier"]["points"] == d["frontier"]["points"] - sum(counts.values())
    assert d2["frontier"]["filters"] == {"min_steps": 1000, "min_time_s": 600, "max_time_s": YEAR, "applied": True}
