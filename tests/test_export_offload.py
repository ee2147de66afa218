"""Offload plans that DeepSpeed launches: the planner prices only what DeepSpeed can run, and the
exported ZeRO block is one DeepSpeed's own config classes accept.

DeepSpeed (0.19.8, deepspeed/runtime/zero/offload_config.py) moves optimizer states with ZeRO stage
1 or more (``offload_optimizer``) and parameters only at stage 3 (``offload_param``, ZeRO-Infinity);
its offload device is one of none, cpu, nvme. trilemma's offload is to host memory: ``cpu``.
"""

from __future__ import annotations

import json

import pytest
from clitools import run

from trilemma.api import estimate
from trilemma.errors import TrilemmaError
from trilemma.export import export

PLAN = ["-m", "llama2-7b", "--gpu", "a100-80gb", "--gpus", "1", "--tokens", "1B"]
#: offload → (lowest ZeRO stage DeepSpeed runs it at, the ZeRO block's offload keys)
DEEPSPEED = {
    "optimizer": (1, {"offload_optimizer"}),
    "optimizer+params": (3, {"offload_optimizer", "offload_param"}),
}


@pytest.fixture(scope="module")
def zero_config():
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    return DeepSpeedZeroConfig


def _zero_block(doc) -> dict:
    cfg = doc.config.get("ds_config") or doc.config["training_args"]["deepspeed"]
    return cfg["zero_optimization"]


@pytest.mark.parametrize("offload", sorted(DEEPSPEED))
@pytest.mark.parametrize(("engine", "method"), [("deepspeed", "full"), ("hf", "lora")])
def test_an_exported_offload_block_is_one_deepspeed_accepts(offload, engine, method, zero_config):
    est = estimate(
        "llama2-7b",
        "a100-80gb",
        1,
        tokens=1e9,
        finetune=method,
        offload=offload,
        layout={"recompute": "full"},
    )
    zero = _zero_block(export(est, engine))
    stage, keys = DEEPSPEED[offload]
    assert zero["stage"] >= stage and keys <= zero.keys()
    parsed = zero_config(**zero)  # DeepSpeed's own model: an unknown device is a validation error
    assert parsed.offload_optimizer.device == "cpu"
    assert (parsed.offload_param is not None) == (offload == "optimizer+params")


@pytest.mark.parametrize("offload", sorted(DEEPSPEED))
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_the_planner_prices_offload_only_where_deepspeed_runs_it(capsys, offload, zero):
    args = [*PLAN, "--finetune", "full", "--offload", offload, "--zero", str(zero), "--json"]
    code, out, err = run(capsys, "estimate", *args)
    if zero >= DEEPSPEED[offload][0]:
        assert code == 0, err
        assert json.loads(out)["layout"]["zero"] == zero
    else:
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "offload needs ZeRO" in err and "What would work" in err


@pytest.mark.parametrize("offload", sorted(DEEPSPEED))
def test_an_offload_plan_the_planner_accepts_exports(offload):
    """What estimate prices, export writes: the search keeps offload's ZeRO stages."""
    for zero in range(4):
        try:
            est = estimate(
                "llama2-7b",
                "a100-80gb",
                1,
                tokens=1e9,
                finetune="full",
                offload=offload,
                layout={"zero": zero},
            )
        except TrilemmaError:
            assert zero < DEEPSPEED[offload][0]
            continue
        assert _zero_block(export(est, "deepspeed"))["stage"] == zero
