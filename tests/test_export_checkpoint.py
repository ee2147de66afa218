"""Exports run what was priced: the checkpoint interval of the estimate's goodput model, in each engine's
own option, read back with the engine's own parser (as tests/test_export.py reads the rest).

The plan is Llama 3.1 405B on 16,384 H100s (Dubey et al. 2024, §3.3: 16K H100s), whose estimate prices a
checkpoint every few minutes against a cluster MTBF of about three hours (Llama 3's 419 interruptions in 54
days on 16,384 GPUs, §3.3.4: 54 × 24 / 419 = 3.09 h). An engine counts steps: the exported N must give
N × step within half a step of the interval the estimate printed, and a resume from the latest save.
"""

from __future__ import annotations

import json

import pytest
from test_export import MEGATRON, _DataParallel, _load_torchtitan_config, megatron_args

from trilemma.api import estimate
from trilemma.export import export, expressible
from trilemma.units import HOUR

#: the pins each engine needs (as tests/test_export.py's README plans): torchtitan shards with FSDP, DeepSpeed's
#: AutoTP has no sequence parallelism, the Trainer export is data-parallel only (16,384 ranks: a batch of at
#: least 16,384 sequences)
PINS = {
    "megatron": {},
    "torchtitan": {"zero": 3},
    "deepspeed": {"sp": False},
    "hf": {"tp": 1, "pp": 1},
}
BATCH = {"hf": "16384seq"}


@pytest.fixture(scope="module")
def plans():
    out = {}
    for engine, layout in PINS.items():
        est = estimate(
            "llama3.1-405b",
            "h100-sxm",
            16384,
            global_batch_tokens=BATCH.get(engine),
            layout=layout or None,
            accept=expressible(engine),
        )
        out[engine] = (est, export(est, engine))
    return out


def _priced(est) -> tuple[float, float]:
    """(the interval the estimate printed, s; its step time, s)."""
    return est.time.reliability["checkpoint_interval_s"], est.time.step_s


@pytest.mark.parametrize("engine", list(PINS))
def test_the_interval_is_the_estimates_in_steps(plans, engine):
    est, doc = plans[engine]
    tau, step = _priced(est)
    every = doc.numbers.checkpoint.every_steps
    assert abs(every * step - tau) <= step / 2 + 1e-9  # N = round(τ / step)
    assert est.time.reliability["mtbf_s"] == pytest.approx(54 * 24 * HOUR / 419, rel=0.01)
    assert any(n.startswith(f"checkpoint every {every} steps") for n in doc.notes)


def test_megatron_reads_save_interval_async_and_resume(plans):
    est, doc = plans["megatron"]
    a = megatron_args(doc.files["train_megatron.sh"])
    assert int(a["--save-interval"]) == doc.numbers.checkpoint.every_steps
    assert (
        "--async-save" in a and "--use-persistent-ckpt-worker" in a
    )  # else validate_args drops it
    fsdp = int(doc.numbers.zero) >= 2  # Megatron-FSDP requires fsdp_dtensor (validate_args)
    assert a["--ckpt-format"] == ("fsdp_dtensor" if fsdp else "torch_dist")
    assert a["--load"] == a["--save"]  # a restart resumes from the run's own saves
    assert MEGATRON.parse_known_args(["--ckpt-format", "torch_dist"])[0]


def test_torchtitan_reads_its_checkpoint_section(plans, tmp_path):
    _, doc = plans["torchtitan"]
    path = tmp_path / "job.toml"
    path.write_text(doc.files["job.toml"])
    job = _load_torchtitan_config()().parse_args(["--job.config_file", str(path)])
    c = job.checkpoint
    assert (c.enable, c.interval, c.async_mode) == (
        True,
        doc.numbers.checkpoint.every_steps,
        "async",
    )
    assert c.load_step == -1 and not c.last_save_model_only


def test_deepspeed_config_parses_and_the_loop_is_told_the_interval(plans, monkeypatch):
    import deepspeed.runtime.config as dsc

    monkeypatch.setattr(dsc.dist, "get_rank", lambda *a, **k: 0)
    _, doc = plans["deepspeed"]
    n = doc.numbers
    dsc.DeepSpeedConfig(json.loads(doc.files["ds_config.json"]), mpu=_DataParallel(n.dp))
    assert doc.config["checkpoint"]["save_interval_steps"] == n.checkpoint.every_steps
    assert doc.to_dict()["numbers"]["checkpoint"]["every_steps"] == n.checkpoint.every_steps


def test_trainer_reads_save_steps_and_the_script_resumes(plans):
    from transformers import TrainingArguments

    _, doc = plans["hf"]
    args = TrainingArguments(**json.loads(doc.files["training_args.json"]), use_cpu=True)
    assert args.save_strategy == "steps"  # an enum of str (SaveStrategy.STEPS)
    assert args.save_steps == doc.numbers.checkpoint.every_steps
    script = doc.files["train_hf.py"]
    compile(script, "train_hf.py", "exec")
    assert "resume_from_checkpoint=last" in script and "get_last_checkpoint" in script


def test_a_given_goodput_prices_no_interval_and_exports_none():
    from trilemma.resolve import make_plan, resolve_model

    est = estimate("llama2-7b", "a100-80gb", 64, tokens=1e10)
    plan = make_plan(resolve_model("llama2-7b")[0], 1e10, goodput=0.9)
    given = estimate("llama2-7b", "a100-80gb", 64, plan=plan)
    assert export(est, "megatron").numbers.checkpoint is not None
    doc = export(given, "megatron")
    assert doc.numbers.checkpoint is None
    assert "--save-interval" not in doc.files["train_megatron.sh"]
