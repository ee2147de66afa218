"""A frontier a person can read: plans that could be run, runners-up that differ in one lever,
axes in days and dollars."""

from __future__ import annotations

import csv
import json

import pytest

from trilemma.cli import main
from trilemma.solve import solve
from trilemma.solve.frontier import FrontierFilters

SMALL = dict(gpu="a100-80gb,h100-sxm", params="100M..3B", max_gpus=256)
MINUTE, YEAR = (
    60.0,
    365.25 * 86400.0,
)  # hand-written: the filters' stated defaults, 10 minutes and a year


@pytest.fixture(scope="module")
def pair():
    """The same solve with the default filters and with --frontier-all."""
    return solve(deadline="30d", budget="$2M", **SMALL), solve(
        deadline="30d", budget="$2M", frontier_all=True, **SMALL
    )


def test_every_kept_point_passes_the_filters(pair):
    f, tab = pair[0].frontier, pair[0].table
    assert f.time_s.size > 0 and not f.keep_all
    steps = (
        f.tokens / tab.batch_tokens[f.config]
    )  # optimizer steps, recomputed from the plan's own batch
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
    marked = {
        p for p, w in zip(zip(a.config.tolist(), a.tokens.tolist()), a.removed_by.tolist()) if w
    }
    assert every - kept == marked
    assert sum(a.removed.values()) == len(marked) and a.removed == f.removed
    # each mark is the first filter the point fails, in the stated order (steps, short, long)
    steps = a.tokens / pair[1].table.batch_tokens[a.config]
    for k, w in enumerate(a.removed_by.tolist()):
        first = next(
            (
                i + 1
                for i, bad in enumerate(
                    (steps[k] < 1000, a.time_s[k] < 10 * MINUTE, a.time_s[k] > YEAR)
                )
                if bad
            ),
            0,
        )
        assert w == first


def test_csv_and_json_say_what_each_filter_removed(tmp_path, capsys):
    out = tmp_path / "f.csv"
    args = [
        "solve",
        "--deadline",
        "30d",
        "--budget",
        "$2M",
        "--gpu",
        "a100-80gb",
        "--params",
        "100M..3B",
        "--max-gpus",
        "64",
        "--json",
        "--frontier",
        str(out),
    ]
    assert main([*args, "--frontier-all"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == d["frontier"]["points"]
    # the score column (MMLU without a pin): a fraction, and on one configuration more tokens score higher
    by_cfg: dict[tuple, list[tuple[float, float]]] = {}
    for r in rows:
        assert 0.25 <= float(r["score"]) <= 1.0  # MMLU's chance, 4 choices
        key = (r["model"], r["gpu"], r["n_gpus"], r["precision"])
        by_cfg.setdefault(key, []).append((float(r["tokens"]), float(r["score"])))
    for pts in by_cfg.values():
        s = [v for _, v in sorted(pts)]
        assert all(b >= a for a, b in zip(s, s[1:]))
    counts = {k: sum(r["removed_by"] == k for r in rows) for k in FrontierFilters.NAMES}
    assert counts == d["frontier"]["removed"] and sum(counts.values()) > 0
    assert d["frontier"]["filters"]["applied"] is False
    assert main(args) == 0
    d2 = json.loads(capsys.readouterr().out)
    assert d2["frontier"]["points"] == d["frontier"]["points"] - sum(counts.values())
    assert d2["frontier"]["filters"] == {
        "min_steps": 1000,
        "min_time_s": 600,
        "max_time_s": YEAR,
        "applied": True,
    }


def _levers(e) -> dict[str, object]:
    return {
        "gpu": e.cluster.hardware.name,
        "model": e.model.name,
        "n_gpus": e.cluster.n_gpus,
        "precision": str(e.plan.precision),
        "tokens": e.plan.total_tokens,
    }


NAMED = {
    "GPU type": "gpu",
    "model size": "model",
    "GPU count": "n_gpus",
    "precision": "precision",
    "tokens ×½": "tokens",
    "tokens ×2": "tokens",
}


@pytest.mark.parametrize("gpu", ["v100-32gb,h100-sxm", "a100-80gb,h100-sxm"])
def test_each_runner_up_differs_from_the_optimum_in_exactly_its_named_lever(gpu):
    from trilemma.presets import get_hardware

    r = solve(
        deadline="30d", budget="$2M", gpu=gpu, params="100M..3B", max_gpus=256, precision="bf16,fp8"
    )
    o = _levers(r.optimum)
    assert {why for why, _, _ in r.runners_up} >= {
        "GPU type",
        "precision",
        "model size",
        "GPU count",
        "tokens ×½",
    }
    doc = r.to_dict()
    for (why, e, loss), d in zip(r.runners_up, doc["runners_up"]):
        a = _levers(e)
        differs = {k for k in o if a[k] != o[k]}
        if why == "GPU type" and o["precision"] not in map(
            str, get_hardware(a["gpu"]).peak_flop_per_s
        ):
            assert differs == {
                "gpu",
                "precision",
            }  # the chip lacks the optimum's precision: forced, not a lever
        else:
            assert differs == {NAMED[why]}, (why, differs)
        if why.startswith("tokens"):
            assert a["tokens"] / o["tokens"] == pytest.approx(0.5 if "½" in why else 2.0)
        # Δ against the optimum, as the JSON carries it
        assert d["differs_in"] == why
        assert d["delta"]["time_s"] == pytest.approx(e.time.total_s - r.optimum.time.total_s)
        assert d["delta"]["usd"] == pytest.approx(e.cost.usd - r.optimum.cost.usd)
        assert d["delta"]["loss"] == pytest.approx(loss.mean - r.optimum_loss.mean)
        # a lever that only changes speed or cost leaves the loss where it was
        if why in ("GPU type", "GPU count") and a["precision"] == o["precision"]:
            assert d["delta"]["loss"] == pytest.approx(0.0, abs=1e-12)


def test_axis_formatters_read_as_a_person_writes():
    from trilemma.report.axis_labels import fmt_time_axis, fmt_usd_axis, window

    day, hour = 86400.0, 3600.0
    assert fmt_time_axis(3.2 * day) == "3.2 days"
    assert fmt_time_axis(1 * day) == "1 day"
    assert fmt_time_axis(6 * hour) == "6 h"
    assert fmt_time_axis(600.0) == "10 min"
    assert fmt_time_axis(2 * 365.25 * day) == "2 years"
    assert fmt_usd_axis(1.5e6) == "$1.5M"
    assert fmt_usd_axis(100e3) == "$100k"
    assert fmt_usd_axis(2.5e9) == "$2.5B"
    assert fmt_usd_axis(50.0) == "$50"
    # a decade beyond the pins and the optimum, each side
    lo, hi = window([2.2 * day, 3 * day])
    assert lo == pytest.approx(0.22 * day) and hi == pytest.approx(30 * day)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_plot_writes_the_format_its_suffix_names(pair, tmp_path, suffix, magic):
    pytest.importorskip("matplotlib")
    from trilemma.errors import InputError
    from trilemma.report.frontier_plot import plot_frontier

    out = plot_frontier(pair[1], tmp_path / f"f{suffix}", "pins" if suffix == ".png" else "full")
    assert out.read_bytes().startswith(magic)
    with pytest.raises(InputError):
        plot_frontier(pair[0], tmp_path / "f.png", "everything")
