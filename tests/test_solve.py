"""The solver: agreement with brute force, the frontier, monotone pins, re-evaluation, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trilemma.api import evaluate_layout, make_cluster, make_plan
from trilemma.cli import main
from trilemma.errors import InfeasibleError
from trilemma.estimate.evaluate import evaluate
from trilemma.estimate.layouts import LayoutArrays
from trilemma.presets import constants, get_hardware
from trilemma.shape import model_for_params
from trilemma.solve import solve
from trilemma.solve.search import search_configs
from trilemma.solve.space import solve_axes
from trilemma.specs import Layout, Precision, Recompute

SMALL = dict(gpu="a100-80gb,h100-sxm", params="100M..3B", max_gpus=256)


def _all_layouts(n: int) -> list[Layout]:
    rc = dict(enumerate(Recompute))  # the axis's codes (trilemma.specs.axis.Axis.code)
    ax = solve_axes()
    out = []
    for tp in ax["tp"]:
        for pp in ax["pp"]:
            if n % (tp * pp):
                continue
            for vp in ax["vp"]:
                for z in ax["zero"]:
                    for r in ax["recompute"]:
                        for mb in ax["micro_batch"]:
                            out.append(
                                Layout(
                                    tp=tp,
                                    pp=pp,
                                    dp=n // (tp * pp),
                                    vp=vp,
                                    zero=z,
                                    recompute=rc[r],
                                    micro_batch=mb,
                                    sp=tp > 1,
                                )
                            )
    return out


def test_vectorised_search_agrees_with_brute_force():
    models = [model_for_params(1.5e8), model_for_params(1.3e9)]
    gpus = [get_hardware("a100-40gb"), get_hardware("h100-sxm")]
    counts = [8, 64]
    seq, batch = 2048, 2**20
    table = search_configs(models, gpus, [Precision.BF16], counts, seq, batch)
    for mi, m in enumerate(models):
        for gi, hw in enumerate(gpus):
            for n in counts:
                plan = make_plan(m, 1e12, seq, batch, "bf16")
                plan = plan.replace(stages=(plan.stages[0].replace(explicit_batch=False),))
                cl = make_cluster(hw, n)
                lays = _all_layouts(n)
                ev = evaluate(m, cl, plan, LayoutArrays.from_layouts(lays), constants())
                ok = ev.reasons == 0
                rows = np.nonzero(
                    (table.model_idx == mi) & (table.gpu_idx == gi) & (table.n_gpus == n)
                )[0]
                if not ok.any():
                    assert rows.size == 0
                    continue
                assert rows.size == 1
                brute = float(np.max(np.where(ok, ev.tokens_per_s, -np.inf)))
                assert table.tokens_per_s[rows[0]] == pytest.approx(brute, rel=1e-9)
                # and the layout it names gives that throughput through the scalar API
                e = evaluate_layout(m, cl, plan, table.layout(int(rows[0])))
                assert e.time.tokens_per_s == pytest.approx(brute, rel=1e-9)


@pytest.fixture(scope="module")
def base():
    return solve(deadline="30d", budget="$2M", **SMALL)


def test_optimum_meets_the_pins_and_reevaluates_to_the_same_corners(base):
    o = base.optimum
    assert o.time.total_s <= 30 * 86400 * (1 + 1e-9)
    assert o.cost.usd <= 2e6 * (1 + 1e-9)
    assert o.memory.fits
    # the corners the solver computed in closed form equal estimate's for the same plan
    f = base.frontier
    assert f is not None and f.time_s.size > 0
    d = base.to_dict()
    assert list(d)[0] == "optimum"
    assert (
        d["optimum"]["loss"]["low"] <= d["optimum"]["loss"]["mean"] <= d["optimum"]["loss"]["high"]
    )


class _Kept(dict):
    """A cache of searches as trilemma.web keeps them: get and put by key."""

    put = dict.__setitem__


def test_a_kept_search_is_ranked_again_and_answers_the_same(base):
    """A solve with a kept search answers exactly what the search done afresh (``base``) does; one that
    moves only a pin ranks the same table, whose arrays cannot be written."""
    kept = _Kept()
    again = solve(deadline="30d", budget="$2M", searches=kept, **SMALL)
    moved = solve(deadline="20d", budget="$2M", searches=kept, **SMALL)
    assert moved.table is again.table and len(kept) == 1
    d0, d1 = base.to_dict(), again.to_dict()
    d0["search"].pop("seconds"), d1["search"].pop("seconds")
    assert d1 == d0
    with pytest.raises(ValueError):
        again.table.n_gpus[0] = 1


def test_solver_corners_equal_estimate(base):
    from trilemma.presets import constants
    from trilemma.solve.optimize import Pins, choose_tokens, rates, table_goodput

    tab = base.table
    # the table's steady goodput equals the estimate's own for a run longer than its checkpoint interval
    c = rates(tab, table_goodput(tab, 2048), {}, constants()["energy"])
    o = base.optimum
    i = [
        k
        for k in range(len(tab))
        if tab.models[tab.model_idx[k]].name == o.model.name
        and tab.gpus[tab.gpu_idx[k]].name == o.cluster.hardware.name
        and tab.n_gpus[k] == o.cluster.n_gpus
        and tab.precisions[tab.prec_idx[k]] == o.plan.precision
    ][0]
    D = o.plan.total_tokens
    assert D * c.s_per_token[i] == pytest.approx(o.time.total_s, rel=1e-9)
    assert D * c.usd_per_token[i] == pytest.approx(o.cost.usd, rel=1e-9)
    assert isinstance(Pins(), Pins) and choose_tokens is not None


def test_frontier_has_no_dominated_plan(base):
    f = base.frontier
    P = np.stack([f.time_s, f.usd, f.loss], axis=1)
    for k in range(len(P)):
        dominated = (P <= P[k]).all(axis=1) & (P < P[k]).any(axis=1)
        assert not dominated.any()


def test_loosening_a_pin_never_makes_the_optimum_worse(base):
    loss0 = base.optimum_loss.mean
    assert solve(deadline="45d", budget="$2M", **SMALL).optimum_loss.mean <= loss0 + 1e-12
    assert solve(deadline="30d", budget="$3M", **SMALL).optimum_loss.mean <= loss0 + 1e-12
    target = base.optimum_loss.mean + 0.05
    cheap = solve(deadline="30d", target_loss=target, **SMALL).optimum.cost.usd
    assert solve(deadline="60d", target_loss=target, **SMALL).optimum.cost.usd <= cheap * (
        1 + 1e-12
    )
    assert solve(deadline="30d", target_loss=target + 0.05, **SMALL).optimum.cost.usd <= cheap * (
        1 + 1e-12
    )


def test_target_below_irreducible_loss_is_infeasible_naming_E(capsys):
    with pytest.raises(InfeasibleError) as exc:
        solve(deadline="30d", target_loss=0.5, **SMALL)
    assert "E =" in str(exc.value)
    assert main(["solve", "--deadline", "30d", "--target-loss", "0.5", "--gpu", "a100-80gb"]) == 1


def test_out_of_reach_target_explains_how_far_the_pins_must_move():
    with pytest.raises(InfeasibleError) as exc:
        solve(
            deadline="1d",
            budget="$1k",
            target_loss=2.2,
            gpu="a100-80gb",
            params="100M..1B",
            max_gpus=8,
            minimize="cost",
        )
    msg = str(exc.value)
    assert "needs" in msg or "reach" in msg


def test_cli_json_and_bad_input(tmp_path, capsys):
    out = tmp_path / "f.csv"
    rc = main(
        [
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
    )
    cap = capsys.readouterr()
    assert rc == 0 and cap.err == ""
    d = json.loads(cap.out)
    assert list(d)[0] == "optimum" and d["schema"].startswith("trilemma.solve")
    assert out.read_text().count("\n") == d["frontier"]["points"] + 1
    for bad in (
        ["--deadline", "30x", "--budget", "$2M"],
        ["--deadline", "30d", "--budget", "lots"],
        ["--deadline", "30d", "--budget", "$2M", "--gpu", "a100-80"],
        ["--deadline", "30d", "--budget", "$2M", "--minimize", "happiness"],
    ):
        assert main(["solve", *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err


def test_scenario_file_and_flags_override(tmp_path, capsys):
    sc = tmp_path / "s.toml"
    sc.write_text(
        'deadline = "30d"\nbudget = "$2M"\ngpu = ["a100-80gb"]\nparams = "100M..3B"\nmax-gpus = 64\n'
    )
    assert main(["solve", str(sc), "--json"]) == 0
    d1 = json.loads(capsys.readouterr().out)
    assert d1["pins"]["deadline_s"] == 30 * 86400
    assert main(["solve", str(sc), "--deadline", "10d", "--json"]) == 0
    d2 = json.loads(capsys.readouterr().out)
    assert d2["pins"]["deadline_s"] == 10 * 86400
    sc.write_text("colour = 'red'\n")
    assert main(["solve", str(sc)]) == 2


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(0, 300), levels=st.integers(2, 8))
def test_pareto_mask_equals_brute_force(seed, n, levels):
    """Rows kept = rows no other row dominates (≤ everywhere, < somewhere), the first of equal rows;
    few distinct values per column so that ties are common."""
    from trilemma.solve.frontier import pareto_mask

    pts = np.random.default_rng(seed).integers(0, levels, size=(n, 3)).astype(float)
    want = np.zeros(n, dtype=bool)
    for i in range(n):
        le = (pts <= pts[i]).all(axis=1)
        lt = (pts < pts[i]).any(axis=1)
        equal_before = (pts == pts[i]).all(axis=1) & (np.arange(n) < i)
        want[i] = not (le & lt).any() and not equal_before.any()
    assert (pareto_mask(pts) == want).all()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(0, 200), levels=st.integers(2, 6))
def test_pareto_prereduction_equals_one_pass(seed, n, levels):
    """The frontier's pre-reduction keeps, within each loss value, the points strictly cheaper than
    every point before them in (time, cost) order: the same as one pass over the sorted points, ties,
    NaN and infinite values included (NaN loss: a group of its own; NaN or infinite cost: never kept)."""
    from trilemma.solve.frontier import _cheaper_than_faster

    rng = np.random.default_rng(seed)
    key, t, usd = rng.integers(0, levels, size=(3, n)).astype(float)
    for col in (key, t, usd):
        col[rng.random(n) < 0.1] = np.nan
        col[rng.random(n) < 0.05] = np.inf
    want = np.zeros(n, dtype=bool)
    best, prev = np.inf, None
    for i in np.lexsort((usd, t, key)).tolist():
        if key[i] != prev:
            prev, best = key[i], np.inf
        if usd[i] < best:
            want[i], best = True, usd[i]
    got = np.zeros(n, dtype=bool)
    got[_cheaper_than_faster(key, t, usd)] = True
    assert (got == want).all()


def test_frontier_holds_the_optimum_itself(base):
    """The optimum's (configuration, tokens) is a point of the frontier, feasible, at the optimum's own time, cost
    and loss: the tokens-per-parameter grid alone (1..1000, 16 points) does not contain the optimum's tokens, so a
    frontier of grid points only would pass beside the plan the solver printed."""
    f, o = base.frontier, base.optimum
    at = np.isclose(f.tokens, o.plan.total_tokens, rtol=1e-12)
    assert at.any()
    k = int(np.flatnonzero(at)[0])
    assert f.feasible[k]
    assert f.time_s[k] == pytest.approx(o.time.total_s, rel=1e-9)
    assert f.usd[k] == pytest.approx(o.cost.usd, rel=1e-9)
    assert f.loss[k] == pytest.approx(base.optimum_loss.mean, rel=1e-9)


def test_a_small_plans_summary_keeps_its_figures_and_a_runner_up_at_the_same_cost_reads_zero(
    capsys,
):
    """A one-GPU LoRA fine-tune of an hour: the summary line gives its GPU-hours to three figures, its energy in
    kWh and its CO2 in kg (it printed "1 GPU-hours, 0.0 MWh, 0.0 t CO2e"), and the runner-up on twice the GPUs
    for half the time, the same GPU-hours, differs in cost by float rounding only: ±0, not "+$1.1e-05"."""
    args = [
        "solve",
        "--finetune",
        "lora",
        "--model",
        "llama2-7b",
        "--tokens",
        "50M",
        "--deadline",
        "2h",
        "--gpu",
        "a100-80gb",
    ]
    assert main(args + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    o = doc["optimum"]
    assert main(args) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("optimum:"))
    assert f"optimum: {o['time']['gpu_hours']:.3g} GPU-hours, " in line
    assert " kWh, " in line and " kg CO2e;" in line and " MWh" not in line
    runner = [ln for ln in out.splitlines() if ln.startswith("│ GPU count")][
        -1
    ]  # the runners-up table's row
    assert "│ ±0 " in runner
