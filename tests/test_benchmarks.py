"""Benchmark scores from compute and data (trilemma.quality.benchmarks): held-out checks on published
scores, monotonicity, bounds, and the estimate's JSON and table."""

from __future__ import annotations

import json

import pytest

from trilemma.cli import main
from trilemma.quality import benchmarks as bm
from trilemma.quality.bench_fit import backtest, fit_all, load_rows

LLAMA3_8B = (
    8.03e9,
    15e12,
)  # the llama3-8b preset's parameters; 15T tokens (Meta Llama 3 model card)


@pytest.fixture(scope="module")
def without_llama3() -> dict:
    """The curves refitted with every Llama 3 row left out (the held-out check)."""
    return fit_all(exclude_families=("Llama 3",))


def test_llama3_8b_mmlu_band_contains_published_score_when_held_out(without_llama3: dict) -> None:
    # Meta Llama 3 model card (github.com/meta-llama/llama3 MODEL_CARD.md, 2024-04-18): Llama 3 8B
    # base MMLU 5-shot 66.6; OLMo 2 13B model card (Ai2, 2024-11-26): Llama 3.1 8B MMLU 66.9
    assert without_llama3["mmlu"]["families"] == 20  # Llama 3 is out of the fit
    item = bm.predict(*LLAMA3_8B, without_llama3)["items"][0]
    assert item["name"] == "mmlu"
    for published in (0.666, 0.669):
        assert item["low"] <= published <= item["high"], (item, published)


@pytest.mark.xfail(
    strict=True,
    reason="Llama 3 sits below the pooled trend on ARC-C (multiple-choice format): held out, its "
    "band is about 86-96 against 78.6 (Meta Llama 3 model card, 25-shot); 10 families only",
)
def test_llama3_8b_arc_band_contains_published_score_when_held_out(without_llama3: dict) -> None:
    item = bm.predict(*LLAMA3_8B, without_llama3)["items"][2]
    assert item["name"] == "arc_c"
    assert item["low"] <= 0.786 <= item["high"], item


def test_leave_one_family_out_mmlu_error_floor() -> None:
    got = backtest()["mmlu"]
    assert got["families"] >= 20
    assert got["lofo_median_abs_error_points"] <= 5.0, got


def test_shipped_constants_are_the_fit_of_the_shipped_rows() -> None:
    # a stale presets/benchmarks.toml (rows changed, not refitted) is caught here
    fresh, shipped = fit_all(), bm.constants()
    for name, consts in fresh.items():
        for key, v in consts.items():
            assert shipped[name][key] == pytest.approx(v, rel=1e-6, abs=1e-9), (name, key)


def test_scores_never_fall_as_compute_grows() -> None:
    for name in bm.BENCHMARKS:
        at_20_tpp = [bm.predict(n, 20 * n)["items"] for n in (1e8, 1e9, 1e10, 1e11, 1e12)]
        more_data = [bm.predict(8e9, d)["items"] for d in (1e11, 1e12, 1e13, 1e14)]
        for series in (at_20_tpp, more_data):
            vals = [next(i["value"] for i in items if i["name"] == name) for items in series]
            assert vals == sorted(vals), (name, vals)


def test_band_never_leaves_chance_to_one() -> None:
    for n in (1e7, 1e9, 7e9, 7e10, 1e12):
        for tpp in (1, 20, 2000, 1e5):
            for i in bm.predict(n, n * tpp)["items"]:
                assert i["chance"] <= i["low"] <= i["value"] <= i["high"] <= 1.0, (n, tpp, i)


def test_near_chance_scores_are_flagged_and_widened() -> None:
    item = bm.predict(1e8, 2e9)["items"][0]  # a 100M model on 2B tokens: MMLU at chance
    assert item["regime"] == "near chance"
    c = bm.constants()["mmlu"]  # widened to the error 80% of held-out rows stay within
    assert item["high"] - item["value"] >= c["lofo_p80_abs_error_points"] / 100 - 1e-9
    assert "MMLU near chance" in bm.format_line(bm.predict(1e8, 2e9))


def test_every_row_names_its_source() -> None:
    rows = load_rows()
    assert rows and all(r.source.strip() for r in rows)
    assert len({r.family for r in rows if r.benchmark == "mmlu"}) >= 20


def _estimate(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    args = ["estimate", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "1024"]
    rc = main([*args, "--tokens", "15T", *extra])
    return rc, capsys.readouterr().out


def test_estimate_prints_benchmark_line_and_json_block(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _estimate(capsys)
    assert rc == 0
    text = " ".join(out.split())  # the console may wrap the line
    line = text[text.index("benchmarks MMLU") :]
    assert "HellaSwag" in line and "ARC-C" in line and "GSM8K" in line and "avg" in line
    rc, out = _estimate(capsys, "--json")
    items = json.loads(out)["quality"]["benchmarks"]["items"]
    assert [i["name"] for i in items] == list(bm.BENCHMARKS)
    assert all({"value", "low", "high", "chance"} <= set(i) for i in items)
    assert "Llama 3" in json.loads(out)["quality"]["benchmarks"]["method"]


def test_finetune_estimate_shows_no_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _estimate(capsys, "--finetune", "lora", "--json")
    assert rc == 0
    assert "quality" not in json.loads(out)
    rc, out = _estimate(capsys, "--finetune", "lora")
    assert "benchmarks MMLU" not in " ".join(out.split())


def test_finetune_estimate_names_the_base_models_published_scores(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A fine-tune of Llama 3 8B prints, under its no-loss note, the base model's published scores where its
    general scores start: MMLU 66.6 5-shot and ARC-C 78.6 25-shot (Meta Llama 3 model card, base pretrained
    table); a model with none shipped gets no such note."""
    from trilemma.quality.bench_fit import published_scores

    rc, out = _estimate(capsys, "--finetune", "lora", "--json")
    notes = [w for w in json.loads(out)["warnings"] if "published scores" in w]
    assert rc == 0 and len(notes) == 1
    assert (
        "the base model llama3-8b's published scores: MMLU 66.6 (5-shot), ARC-C 78.6 (25-shot MC)"
        in notes[0]
    )
    assert [round(r.score, 3) for r in published_scores("LLAMA3-8B")] == [0.666, 0.786]
    assert published_scores("llama3.2-1b") == []


#: Llama 3 8B's published base-model scores (fractions), each with its source
LLAMA3_8B_PUBLISHED = {
    # Meta Llama 3 model card (github.com/meta-llama/llama3 MODEL_CARD.md, 2024-04-18), base
    # pretrained table: MMLU 5-shot 66.6 (macro average), ARC-Challenge 25-shot 78.6
    "mmlu": (0.666, 0.669),
    "arc_c": (0.786, 0.795),
    # Llama 3.1 8B (the same 15T-token pre-training) in the OLMo 2 13B model card's evaluation table
    # (huggingface.co/allenai/OLMo-2-1124-13B, 2024-11-26, Ai2 OLMES): MMLU 66.9, ARC-C 79.5,
    # HellaSwag 81.6, GSM8K 56.5
    "hellaswag": (0.816,),
    "gsm8k": (0.565,),
}


def test_estimate_bands_contain_llama3_8b_published_scores(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out = _estimate(capsys, "--json")
    assert rc == 0
    items = {i["name"]: i for i in json.loads(out)["quality"]["benchmarks"]["items"]}
    for name, scores in LLAMA3_8B_PUBLISHED.items():
        for published in scores:
            assert items[name]["low"] <= published <= items[name]["high"], (name, items[name])
