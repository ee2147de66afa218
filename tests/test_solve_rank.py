"""The solver ranks plans at the pessimistic end of each one's band (``--rank pessimistic``, the
default): a chip the calibration never measured wins only where it wins at its worst too, and an
optimum on such a chip comes with the best plan on a calibrated family."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trilemma.cli import main
from trilemma.errors import InfeasibleError
from trilemma.estimate.bands import family_calibrated
from trilemma.presets import hardware_presets
from trilemma.quality.laws import get_law
from trilemma.request.scenario import read_scenario
from trilemma.solve import solve
from trilemma.solve.inputs import law_fn

# one model, fixed tokens, a deadline: the cheapest plan (cost is linear in the price per GPU-hour)
BASE = dict(model="llama2-7b", tokens="100B", deadline="30d", minimize="cost", max_gpus=256)


def _cost(gpu: str, price: float | None = None, rank: str = "point") -> float:
    prices = None if price is None else {gpu: price}
    return solve(gpu=gpu, prices=prices, rank=rank, want_frontier=False, **BASE).optimum.cost.usd


@pytest.fixture(scope="module")
def tie_price() -> float:
    """The MI300X price at which its cheapest plan costs what H100's does (hand calculation: a plan's
    dollars are tokens × seconds per token × GPUs × price / 3600, linear in the price)."""
    ref = 1.0
    return ref * _cost("h100-sxm") / _cost("mi300x", ref)


def test_a_small_point_edge_does_not_beat_a_calibrated_chip(tie_price):
    """MI300X 3% cheaper than H100 at the point: the point ranking picks it; its band's pessimistic
    end (cross-family error added) is more than 3% above H100's, so the default picks H100."""
    prices = {"mi300x": 0.97 * tie_price}
    kw = dict(gpu=["h100-sxm", "mi300x"], prices=prices, want_frontier=False, **BASE)
    point = solve(rank="point", **kw)
    worst = solve(**kw)
    assert point.optimum.cluster.hardware.name == "mi300x"
    assert worst.rank == "pessimistic" and worst.optimum.cluster.hardware.name == "h100-sxm"
    # the uncalibrated winner of the point ranking names the calibrated plan beside it
    assert point.calibrated is not None
    assert point.calibrated[0].cluster.hardware.name == "h100-sxm"
    assert worst.calibrated is None
    # and the reason: MI300X's pessimistic cost is above H100's
    o, h = point.optimum.cost, worst.optimum.cost
    assert o.usd < h.usd and o.usd_high > h.usd_high


def test_a_large_edge_wins_anyway_and_names_the_calibrated_plan(tie_price):
    prices = {"mi300x": 0.5 * tie_price}
    r = solve(gpu=["h100-sxm", "mi300x"], prices=prices, want_frontier=False, **BASE)
    assert r.optimum.cluster.hardware.name == "mi300x"
    assert r.calibrated is not None and r.calibrated[0].cluster.hardware.name == "h100-sxm"
    assert r.optimum.cost.usd_high < r.calibrated[0].cost.usd_high
    doc = r.to_dict()
    assert doc["rank"] == "pessimistic"
    assert doc["calibrated_alternative"]["hardware"]["name"] == "h100-sxm"


def _pessimistic_metric(r, e, loss) -> float:
    """A realised plan at the pessimistic end of its own band: its time or cost, or for the loss
    corner the law's loss on the tokens its budget and deadline buy at that end (tokens × point /
    high: every rate is the band's high multiple of the point)."""
    if r.pins.minimize == "cost":
        return e.cost.usd_high
    if r.pins.minimize == "time":
        return e.time.total_s_high
    fn = law_fn(get_law(None), None)
    d = e.plan.total_tokens * e.cost.usd / e.cost.usd_high
    n_tot, n_non = e.params.total, e.params.non_embedding
    return float(fn(np.array([n_tot]), np.array([n_non]), np.array([d]), np.array(["bf16"]))[0])


@pytest.mark.parametrize("name", ["fast-and-cheap", "fast-and-good", "good-and-cheap"])
def test_readme_solves_do_not_pick_an_uncalibrated_chip_on_the_point_alone(name):
    """The README's three solves: where the optimum's chip is uncalibrated, it beats the best
    calibrated plan at both plans' pessimistic ends (computed from the realised estimates), or no
    calibrated plan meets the pins at all (a solve over the calibrated chips alone finds none)."""
    args = read_scenario(f"examples/scenarios/{name}.toml")
    r = solve(want_frontier=False, **args)
    assert r.rank == "pessimistic"
    if family_calibrated(r.optimum.cluster.hardware.family):
        assert r.calibrated is None
        return
    if r.calibrated is None:
        ours = [n for n, h in hardware_presets().items() if family_calibrated(h.family)]
        with pytest.raises(InfeasibleError):
            solve(want_frontier=False, gpu=ours, **args)
        return
    e, loss = r.calibrated
    assert family_calibrated(e.cluster.hardware.family)
    if any("at the pessimistic end of its band" in w for w in r.warnings):
        # none meets the pins at its worst: ranked on the objective at the high ends
        key = "usd_high" if r.pins.minimize == "cost" else "total_s_high"
        obj = (lambda x: x.cost.usd_high) if key == "usd_high" else (lambda x: x.time.total_s_high)
        assert obj(r.optimum) <= obj(e) * (1 + 1e-3)
    else:
        a = _pessimistic_metric(r, r.optimum, r.optimum_loss)
        assert a <= _pessimistic_metric(r, e, loss) * (1 + 1e-3)


def test_cli_rank_refusal_and_json(capsys):
    assert main(["solve", "--rank", "worst", "--budget", "$2M", "--deadline", "30d"]) == 2
    err = capsys.readouterr().err
    assert "rank" in err and "pessimistic or point" in err and len(err.strip().splitlines()) == 1
    rc = main(["solve", "--rank", "point", "--gpu", "h100-sxm", "-m", "llama2-7b", "--tokens",
               "100B", "--deadline", "30d", "--minimize", "cost", "--json"])  # fmt: skip
    assert rc in (0, None)
    doc = json.loads(capsys.readouterr().out)
    assert doc["rank"] == "point" and doc["calibrated_alternative"] is None


def test_scenario_file_sets_the_rank(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text(
        'model = "llama2-7b"\ntokens = "100B"\ndeadline = "30d"\nminimize = "cost"\n'
        'gpu = "h100-sxm"\nmax-gpus = 64\nrank = "point"\n'
    )
    assert main(["solve", str(f), "--json"]) in (0, None)
    assert json.loads(capsys.readouterr().out)["rank"] == "point"
