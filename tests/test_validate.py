"""The backtest: `trilemma validate` output, the reproducibility of the shipped calibration, and the
leave-one-source-out floors: throughput median ≤ 10% and whole runs ≤ 12% (the time floors), memory
≤ 12% (the memory floor).
"""

from __future__ import annotations

import json
import math

import pytest

from trilemma.api import estimate
from trilemma.cli import main
from trilemma.presets import calibration, uncalibrated_constants
from trilemma.validate.cases import load_cases
from trilemma.validate.fit import TIME_PARAMS, calibrate
from trilemma.validate.run import run_validate


@pytest.fixture(scope="module")
def doc():
    return run_validate()


def test_every_row_is_predicted_or_skipped_with_a_reason(doc):
    cases, skipped = load_cases()
    assert len(doc["rows"]) == len(cases)
    assert all(s["reason"] for s in doc["skipped"])
    for r in doc["rows"]:
        assert r["reported"] > 0
        if r["predicted"] is not None:
            assert math.isfinite(r["predicted"]) and r["predicted"] > 0
            assert r["ratio"] == pytest.approx(r["predicted"] / r["reported"])


def test_summary_has_in_sample_and_loso_per_kind(doc):
    for kind in ("runs", "throughput", "memory"):
        s = doc["summary"][kind]
        for which in ("in_sample", "leave_one_source_out"):
            st = s[which]
            assert st["n"] > 0
            assert 0 <= st["within_10pct"] <= st["within_25pct"] <= 1
            assert 0 <= st["median_error"] <= st["worst_error"]


def test_validate_cli_json_csv_and_bad_kind(tmp_path, capsys):
    out = tmp_path / "rows.csv"
    assert main(["validate", "--kind", "memory", "--json", "--csv", str(out)]) == 0
    captured = capsys.readouterr()
    d = json.loads(captured.out)
    assert captured.err == ""
    assert set(d["summary"]) == {"memory"}
    lines = out.read_text().strip().splitlines()
    assert len(lines) == 1 + len(d["rows"])
    assert main(["validate", "--kind", "gadgets"]) == 2


def test_validate_reads_the_published_finetune_memory(doc, capsys):
    """data/finetune_memory.csv beside the kinds: every row with its ratio, the criterion (within 15%)
    counted from the rows, held out (the memory constants refit without the sources it shares); `--kind finetune` prints that section alone."""
    import csv
    from importlib import resources

    ft = doc["finetune_memory"]
    text = resources.files("trilemma").joinpath("data", "finetune_memory.csv").read_text("utf-8")
    shipped = list(csv.DictReader(text.splitlines()))
    assert [r["case"] for r in ft["rows"]] == [r["case"] for r in shipped] and not ft["fitted"]
    assert "github.com/huggingface/transformers" in ft["held_out"]  # its BERT rows are memory rows
    gib = 2**30
    for r, row in zip(ft["rows"], shipped):
        assert r["reported_bytes"] == pytest.approx(float(row["reported_gib"]) * gib)
        assert r["ratio"] == pytest.approx(r["predicted_bytes"] / r["reported_bytes"])
    s = ft["summary"]
    assert (
        s["within_count"] == sum(abs(r["ratio"] - 1) <= 0.15 for r in ft["rows"]) >= 10
    )  # at least 10 published fine-tunes within 15%
    assert main(["validate", "--kind", "finetune", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["summary"] == {} and d["rows"] == [] and d["finetune_memory"]["summary"] == s


def test_fitted_constants_on_a_bound_are_listed_each_with_its_missing_term(doc, capsys):
    """validate --json lists every fitted constant within 0.1% of its bounds' width from a bound of its fit
    (fit.FITTED_PARAMS), read from the shipped calibration, and each carries a note naming the term it
    stands for. Today: efficiency.kernel_s on its upper bound, memory.framework_residual_bytes on its lower
    one (host.host_eager_op_s, once on its lower bound, is set by the asynchronous TP that nanotron issues
    from Python since its operators are counted: StackSpec.async_tp_host_ops)."""
    from trilemma.presets import constants
    from trilemma.validate.fit import FITTED_PARAMS

    consts = constants()
    on = {
        f"{s}.{k}": ("lower" if consts[s][k] - lo <= 1e-3 * (hi - lo) else "upper")
        for s, k, lo, hi in FITTED_PARAMS
        if min(consts[s][k] - lo, hi - consts[s][k]) <= 1e-3 * (hi - lo)
    }
    listed = doc["fitted_at_bounds"]
    assert {b["constant"]: b["bound"] for b in listed} == on
    assert on == {
        "efficiency.kernel_s": "upper",
        "memory.framework_residual_bytes": "lower",
    }
    for b in listed:
        assert b["note"] and b["lower"] <= b["value"] <= b["upper"], b
    assert main(["validate", "--kind", "finetune", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fitted_at_bounds"] == listed


def test_estimates_carry_a_band_from_the_backtest():
    e = estimate("llama2-7b", "a100-80gb", 512, 1e12, stack="megatron-core")
    b = calibration()["bands"]
    assert b["time_log_q10"] < 0 < b["time_log_q90"] or b["time_log_q10"] <= b["time_log_q90"]
    t, c = e.time, e.cost
    assert t.total_s_low <= t.total_s <= t.total_s_high
    assert t.gpu_hours_low <= t.gpu_hours <= t.gpu_hours_high
    assert c.usd_low <= c.usd <= c.usd_high
    assert t.total_s_high / t.total_s == pytest.approx(math.exp(-b["time_log_q10"]))
    keys = list(e.to_dict()["time"])
    assert keys.index("total_s_low") == keys.index("total_s") + 1


@pytest.fixture(scope="module")
def refit():
    """The documented fit on all shipped cases, done once for the tests below."""
    cases, _ = load_cases()
    return calibrate(cases, uncalibrated_constants())


@pytest.mark.slow
def test_shipped_constants_are_what_the_documented_fit_gives(refit):
    """calibrated.toml was written by scripts/calibrate.py on the shipped data: refit and compare."""
    fitted = refit
    shipped = calibration()["constants"]
    for section, key, _, _ in TIME_PARAMS:
        assert fitted[section][key] == pytest.approx(shipped[section][key], rel=1e-6)


@pytest.fixture(scope="module")
def loso_summary(doc):
    """Leave-one-source-out errors of the shipped calibration: the held-out predictions
    scripts/calibrate.py stored beside each row (the refit of the constants above checks the file is
    the documented fit's; test_bands checks the stored bands are what these rows give)."""
    s = doc["summary"]  # the module's one `run_validate()`
    return {k: s[k]["leave_one_source_out"] for k in ("runs", "throughput", "memory")}


@pytest.mark.xfail(
    strict=True,
    reason="the time floors' open line: throughput 12.2% leave-one-source-out, most of it llm-foundry's "
    "fold (216 rows, 12.4%): with Meta's rows timed with their first-generation attention kernel, the "
    "other sources no longer pull the attention efficiency down to llm-foundry's level; the Ultra-Scale "
    "Playbook's TP 2-8 runs at micro-batch 1, held out, are refitted on data where nothing else sets "
    "the eager host's cost per operator (1.1-3.0x too fast); strict: a pass means the floor holds",
)
def test_loso_throughput_floor(loso_summary):
    """The time floor: throughput median ≤ 10% leave-one-source-out."""
    assert loso_summary["throughput"]["median_error"] <= 0.10


@pytest.mark.xfail(
    strict=True,
    reason="the time floors' open line: whole runs read 12.3% leave-one-source-out (MPT-7B the "
    "median row); OPT-175B (0.63×), llm.c (1.49×), Llama 2 34B and StarCoderBase (0.76×) lead; "
    "strict: a pass means it holds",
)
def test_loso_runs_floor(loso_summary):
    """The time floor: whole runs ≤ 12% leave-one-source-out (11.5%). Llama 2's four rows run at 2,048 GPUs, the count
    their GPU-hours (each 2,048 × whole hours) and the Llama 2 model card's January–July 2023 training window
    support; at the 256 GPUs a batch rule gave (which would put the 70B's 1,720,320 GPU-hours at 280 days, past
    that window) it read 10.1%. Whole runs lose a run-specific share beyond steps and failures (up to 39% of
    OPT-175B's wall time) with no trend in the node count, so no form of the share does much better. MPT-7B's
    recomputation, StarCoderBase's launch-script layout and both AWS runs' 400 Gb/s per node (data/README.md)
    took it from 14.2% to 13.1%; the unfused attention core timed as the kernels it is (unfused_attention_s, no
    longer FlashAttention's fitted fraction of peak) with GLM-130B's FP32 softmax, to 11.5%."""
    assert loso_summary["runs"]["median_error"] <= 0.12


def test_whole_runs_held_out_floor(doc):
    """Whole runs: median ≤ 18% both leave-one-source-out and leave-one-stack-out (the floor beside the
    time floors' own 12% line)."""
    runs = doc["summary"]["runs"]
    assert runs["leave_one_source_out"]["median_error"] <= 0.18
    assert runs["leave_one_stack_out"]["median_error"] <= 0.18


def test_a_run_whose_source_refits_nothing_is_held_out_live(doc):
    """fit._held_out predicts a source with no step-time or memory row with the full fit's constants, the
    shipped ones: validate shows such a run's live prediction as held out (Llama 2's GPU-hours)."""
    from trilemma.validate.held_out import refitting_units

    refit = refitting_units(load_cases()[0], "group")
    live = [r for r in doc["rows"] if r["kind"] == "runs" and r["group"] not in refit]
    assert {"Llama 2 7B", "Llama 2 13B", "Llama 2 70B"} <= {r["model"] for r in live}
    for r in live:
        assert r["loso_predicted"] == pytest.approx(r["predicted"], rel=1e-12)


def test_loso_memory_floor(loso_summary):
    """The memory floor: leave-one-source-out median ≤ 12% on the published peaks, each compared with
    the quantity it counts (reserved peak, device memory in use)."""
    assert loso_summary["memory"]["median_error"] <= 0.12


def test_no_published_memory_row_is_predicted_out_of_memory():
    """Every memory row is a job that ran, so with the shipped constants its predicted peak
    fits its device (each compared with the quantity the row counts)."""
    from trilemma.presets import constants
    from trilemma.validate.predict import predict

    preds = predict(load_cases("memory")[0], constants())
    assert preds and all(p.predicted is not None for p in preds)
    assert [p.case.label for p in preds if not p.fits] == []
