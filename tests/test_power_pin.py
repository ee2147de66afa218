"""The site's power as a pin (``solve --max-power``) and the host share of each system class.

Facility power while training = devices × (board power × power fraction + host share per device) × PUE
(trilemma.estimate.cost.wall_power_w). The host share of a class is its system's maximum less its boards,
over its devices, so eight devices of a class draw the system's datasheet maximum × PUE:
DGX A100 6.5 kW (NVIDIA DGX A100 datasheet), DGX H100/H200 10.2 kW (NVIDIA DGX H100/H200 User Guide,
Power Specifications), DGX B200 14.3 kW (NVIDIA DGX B200 User Guide, Power Specifications). A desktop card
is not a DGX: one RTX 4090 (450 W board) with an Intel Core i9-13900K at its 125 W base power (Intel ARK).
"""

from __future__ import annotations

import pytest
from clitools import run

from trilemma.api import estimate
from trilemma.api import solve as api_solve
from trilemma.errors import InputError
from trilemma.presets import get_hardware
from trilemma.request import SolveRequest
from trilemma.solve import solve

PUE = 1.1  # constants.toml energy.pue: Touvron et al. 2023 §6.1
DEFAULT_HOST_W = 575.0  # constants.toml: a DGX H100's 10.2 kW less 8 × 700 W, over 8


@pytest.mark.parametrize(
    ("gpu", "system_w"),
    [("a100-80gb", 6500.0), ("h100-sxm", 10200.0), ("h200", 10200.0), ("b200", 14300.0)],
)
def test_eight_devices_draw_their_systems_datasheet_maximum(gpu, system_w):
    est = estimate("llama2-7b", gpu, 8, tokens=1e9)
    assert est.cost.power_w == pytest.approx(system_w * PUE, rel=1e-9)


def test_a_desktop_card_is_not_given_a_dgx_host():
    est = estimate("gpt2", "rtx-4090", 1, tokens=1e8)
    assert est.cost.power_w == pytest.approx(
        (450.0 + 125.0) * PUE, rel=1e-9
    )  # 632.5 W, not 1.127 kW


def _hand_power_w(n_gpus: int, gpu: str, pue: float = PUE) -> float:
    """n × (board power + the preset's host share, or a DGX H100's) × PUE, from the preset's figures."""
    h = get_hardware(gpu)
    host = DEFAULT_HOST_W if h.host_power_w_per_device is None else h.host_power_w_per_device
    return n_gpus * (h.board_power_w + host) * pue


@pytest.fixture(scope="module")
def capped():
    return {cap: solve(deadline="90d", max_power=cap) for cap in (5e6, 10e6, 20e6, 40e6)}


def test_no_plan_on_the_frontier_exceeds_the_cap(capped):
    r = capped[20e6]
    plans = [r.optimum, *(e for _, e, _ in r.runners_up)]
    assert all(e.cost.power_w <= 20e6 for e in plans)
    rows = set(int(i) for i in r.frontier.config)
    assert rows
    for i in rows:
        gpu = r.table.gpus[int(r.table.gpu_idx[i])].name
        assert _hand_power_w(int(r.table.n_gpus[i]), gpu) <= 20e6 * (1 + 1e-9)


def test_raising_the_cap_never_worsens_the_loss(capped):
    losses = [capped[c].optimum_loss.mean for c in sorted(capped)]
    assert all(b <= a + 1e-12 for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < losses[0]  # 5 MW binds: eight times the power buys a better plan


def test_the_optimum_is_the_best_loss_within_the_cap(capped):
    r = capped[20e6]
    loose = solve(deadline="90d", max_power=1e12)  # a cap that binds nothing
    assert loose.optimum.cost.power_w > 20e6  # the pin is what moved the optimum
    assert r.optimum_loss.mean >= loose.optimum_loss.mean


def test_pue_and_host_power_reach_the_pin():
    r = solve(deadline="90d", max_power="20MW", pue=1.3, host_power_w_per_node=0.0)
    e = r.optimum
    n, gpu = e.cluster.n_gpus, e.cluster.hardware.name
    assert e.cost.power_w == pytest.approx(n * get_hardware(gpu).board_power_w * 1.3, rel=1e-9)
    assert e.cost.power_w <= 20e6


def test_frontier_lab_scenario_prints_power_homes_and_the_pin(capsys):
    code, out, err = run(capsys, "solve", "examples/scenarios/frontier-lab.toml")
    assert code == 0, err
    assert "power ≤ 40 MW" in out  # the title's pins
    line = next(ln for ln in out.splitlines() if ln.startswith("optimum:"))
    assert "while it runs (pin: at most 40 MW)" in line and "average US homes" in line


@pytest.mark.parametrize("value", ["0", "20MWh", "-5MW", "lots"])
def test_bad_max_power_is_one_line_from_every_door(capsys, tmp_path, value):
    code, out, err = run(capsys, "solve", "--deadline", "90d", "--max-power", value)
    assert code == 2 and out == "" and err.count("\n") == 1 and "max-power: " in err
    line = err.removeprefix("trilemma: error: ").rstrip("\n")
    with pytest.raises(InputError) as exc:
        SolveRequest(deadline="90d", **{"max-power": value})
    assert str(exc.value) == line
    with pytest.raises(InputError) as exc:
        api_solve(deadline="90d", max_power=value)
    assert str(exc.value) == line
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'deadline = "90d"\nmax-power = "{value}"\n', "utf-8")
    assert run(capsys, "solve", str(scenario))[2] == err
