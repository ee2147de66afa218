"""trilemma.validate.cases: every calibration row becomes a Case or a Skipped, read from its explicit columns."""

from __future__ import annotations

import math
from typing import get_args

import pytest

from trilemma.api import estimate_plan, make_cluster
from trilemma.errors import LayoutError
from trilemma.estimate.params import param_counts
from trilemma.specs import Precision
from trilemma.units import GIB
from trilemma.validate import Case, Metric, Skipped
from trilemma.validate.cases import KINDS, load_cases, read_rows


@pytest.fixture(scope="module")
def mapped() -> tuple[list[Case], list[Skipped]]:
    return load_cases()


def _find(cases: list[Case], kind: str, **want) -> Case:
    """The one case of ``kind`` whose label contains ``label`` and whose other attributes match."""
    label = want.pop("label", "")
    hits = [
        c
        for c in cases
        if c.kind == kind and label in c.label and all(getattr(c, k) == v for k, v in want.items())
    ]
    assert len(hits) == 1, [(c.row, c.label) for c in hits]
    return hits[0]


# ------------------------------------------------------------------ coverage


@pytest.mark.parametrize("kind", KINDS)
def test_every_row_is_a_case_or_a_skip_exactly_once(mapped, kind: str) -> None:
    cases, skipped = mapped
    n = len(read_rows(kind))
    rows = sorted(
        [c.row for c in cases if c.kind == kind] + [s.row for s in skipped if s.kind == kind]
    )
    assert rows == list(range(n))


def test_one_kind_at_a_time_matches_all(mapped) -> None:
    cases, skipped = mapped
    for kind in KINDS:
        cs, sk = load_cases(kind)
        assert {c.kind for c in cs} <= {kind} and {s.kind for s in sk} <= {kind}
        assert [c.row for c in cs] == [c.row for c in cases if c.kind == kind]
        assert [s.row for s in sk] == [s.row for s in skipped if s.kind == kind]


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        load_cases("losses")


def test_most_rows_map(mapped) -> None:
    cases, _ = mapped
    assert len(cases) >= 250
    for kind in KINDS:
        assert any(c.kind == kind for c in cases)


def test_returned_layouts_are_copies() -> None:
    cases, _ = load_cases("throughput")
    cases[0].layout["tp"] = 999
    again, _ = load_cases("throughput")
    assert again[0].layout.get("tp") != 999


# ------------------------------------------------------------------ every case is well formed


def test_cases_are_well_formed(mapped) -> None:
    cases, _ = mapped
    metrics = set(get_args(Metric))
    for c in cases:
        where = f"{c.kind} row {c.row} ({c.label})"
        assert c.metric in metrics, where
        assert math.isfinite(c.reported) and c.reported > 0, where
        assert c.group.strip() and c.source.strip() and c.label.strip(), where
        assert isinstance(c.n_gpus, int) and c.n_gpus >= 1, where
        assert all(isinstance(a, str) and a for a in c.assumptions), where
        st = c.plan.stages[0]
        for x in (
            st.tokens,
            st.global_batch_tokens,
            c.hardware.hbm_bytes,
            c.hardware.board_power_w,
        ):
            assert math.isfinite(x) and x > 0, where
        assert st.global_batch_tokens <= st.tokens, where
        assert math.isfinite(param_counts(c.model).total), where
        c.hardware.peak(c.plan.precision)  # the chip has the plan's precision
        if c.metric in ("mfu", "hfu"):
            assert c.reported < 1, where


def test_layouts_agree_with_gpu_count(mapped) -> None:
    cases, _ = mapped
    allowed = {"tp", "pp", "dp", "cp", "vp", "sp", "zero", "recompute", "micro_batch"}
    for c in cases:
        lay, where = c.layout, f"{c.kind} row {c.row} ({c.label})"
        assert set(lay) <= allowed, where
        for k in ("tp", "pp", "dp", "cp", "vp", "micro_batch"):
            if k in lay:
                assert isinstance(lay[k], int) and lay[k] >= 1, where
        prod = math.prod(lay.get(k, 1) for k in ("tp", "pp", "dp", "cp"))
        if {"tp", "pp", "dp"} <= set(lay):
            assert prod == c.n_gpus, where
        else:
            assert c.n_gpus % prod == 0, where
        if "vp" in lay:
            # uneven stages are modelled (trilemma.estimate.pipeline.stage_layers): each virtual stage needs a layer
            assert lay["pp"] > 1 and lay["pp"] * lay["vp"] <= c.model.n_layers, where
        assert lay.get("pp", 1) <= c.model.n_layers, where
        if lay.get("zero", 0) >= 2:
            assert lay.get("pp", 1) == 1, where
        if "recompute" in lay:
            assert lay["recompute"] in ("none", "selective", "full", "op"), where
        st = c.plan.stages[0]
        if st.explicit_batch and "dp" in lay:
            seqs = round(st.global_batch_tokens / st.seq_len)
            assert seqs % (lay["dp"] * lay.get("micro_batch", 1)) == 0, where


def test_skips_have_one_sentence_reasons(mapped) -> None:
    _, skipped = mapped
    for s in skipped:
        assert s.reason and "\n" not in s.reason and len(s.reason) < 300, s
        assert s.label, s


def test_every_case_evaluates_or_is_predicted_out_of_memory(mapped) -> None:
    """A case either gives an Estimate or, with its pinned axes, fails only for memory (a finding)."""
    cases, _ = mapped
    oom = 0
    for c in cases:
        try:
            # headroom 0: the job ran, so its predicted peak is checked against the bare capacity
            est = estimate_plan(
                c.model, make_cluster(c.hardware, c.n_gpus, memory_headroom=0.0), c.plan, c.layout
            )
        except LayoutError as exc:
            assert str(exc).startswith("memory:"), f"{c.kind} row {c.row} ({c.label}): {exc}"
            oom += 1
            continue
        assert est.cluster.n_gpus == c.n_gpus
        for k, v in c.layout.items():
            got = getattr(est.layout, k)
            assert (str(got) if k == "recompute" else got) == v, f"{c.kind} row {c.row}: {k}"
    assert oom < len(cases) / 4


# ------------------------------------------------------------------ hand-checked mappings


def test_korthikanti_175b_selective(mapped) -> None:
    c = _find(mapped[0], "throughput", label="GPT 175B (GPT-3) - sequence parallel + selective")
    assert c.layout == {
        "tp": 8,
        "pp": 8,
        "dp": 1,
        "micro_batch": 1,
        "recompute": "selective",
        "sp": True,
        "vp": 3,
    }
    assert c.n_gpus == 64 and c.metric == "mfu" and c.reported == pytest.approx(0.514)
    assert c.group == "arXiv:2205.05198"
    assert c.hardware.name == "a100-80gb"
    assert c.plan.precision == Precision.FP16 and c.plan.flash_attention is False
    st = c.plan.stages[0]
    assert st.seq_len == 2048 and st.global_batch_tokens == 64 * 2048 and st.explicit_batch
    assert (c.model.n_layers, c.model.d_model, c.model.n_heads, c.model.vocab_size) == (
        96,
        12288,
        96,
        51200,
    )


def test_korthikanti_baseline_uses_step_time(mapped) -> None:
    c = _find(mapped[0], "throughput", label="GPT 175B (GPT-3) - full recompute baseline")
    assert c.metric == "step_s" and c.reported == pytest.approx(18.13)
    assert c.layout["sp"] is False and c.layout["recompute"] == "full"


def test_megatron_counts_hardware_flops(mapped) -> None:
    c = _find(mapped[0], "throughput", label="GPT 1.7B (Megatron weak scaling)")
    assert c.metric == "hardware_tflops_per_gpu" and c.reported == 137
    assert c.layout == {"tp": 1, "pp": 1, "dp": 32, "recompute": "full"}
    assert c.plan.stages[0].global_batch_tokens == 512 * 2048
    assert abs(param_counts(c.model).total / 1.7e9 - 1) < 0.05


def test_llm_foundry_row(mapped) -> None:
    c = _find(mapped[0], "throughput", label="MPT-7b", n_gpus=8, reported=4641.0)
    assert c.group == "github.com/mosaicml/llm-foundry"
    assert c.layout == {"tp": 1, "pp": 1, "dp": 8, "zero": 3, "recompute": "none", "micro_batch": 6}
    assert c.metric == "tokens_per_s_per_gpu"
    assert c.hardware.name == "a100-80gb" and c.plan.precision == Precision.BF16
    st = c.plan.stages[0]
    assert st.seq_len == 2048 and st.global_batch_tokens == 96 * 2048 and st.explicit_batch
    assert st.tokens == 100 * st.global_batch_tokens
    assert c.model.vocab_size == 50368
    assert param_counts(c.model).total == 6658859008  # the row's NumParams exactly


def test_llm_foundry_pure_mode_keeps_bf16_grads(mapped) -> None:
    pure = [
        c
        for c in mapped[0]
        if c.group == "github.com/mosaicml/llm-foundry"
        and "mode PURE" in read_rows("throughput")[c.row]["notes"]
    ]
    assert pure and all(c.plan.dtypes.grad == "bf16" for c in pure)


def test_torchtitan_h100_96gb(mapped) -> None:
    c = _find(mapped[0], "throughput", label="Llama 3.1 8B - FSDP 4, CP 2")
    assert c.layout["cp"] == 2 and c.layout["dp"] == 4 and c.layout["zero"] == 3
    assert c.hardware.hbm_bytes == 96 * GIB and c.hardware.board_power_w == 500
    assert c.plan.precision == Precision.FP8
    assert c.model.n_layers == 32 and c.model.kv_heads == 8  # Llama 3 8B preset


def test_runs_row_with_gpu_hours(mapped) -> None:
    """Llama 2 13B (Touvron et al. 2023, arXiv 2307.09288 Table 2): 368,640 GPU-hours for 2T tokens at
    4,096 tokens per sequence and a 4M-token batch; the GPU count is not published."""
    c = _find(mapped[0], "runs", label="Llama 2 13B")
    assert c.metric == "gpu_hours" and c.reported == 368640
    assert c.model.name == "llama2-13b" and c.group == "arXiv:2307.09288"
    st = c.plan.stages[0]
    assert (
        st.tokens == 2e12
        and st.seq_len == 4096
        and st.global_batch_tokens == 4e6
        and not st.explicit_batch
    )
    assert any("GPU count not reported" in a for a in c.assumptions)


def test_sources_kept_independent_are_never_calibrated_on(mapped) -> None:
    """../shared/calibration/README.md keeps some sources out of calibration so that the project can
    check how the planner generalises on them: their rows are listed as skipped, with that reason."""
    import csv
    from importlib import resources

    kept = (
        "maximizing-training",
        "torchtitan docs/performance.md",
        "Llama 3.2 model card",
        "Llama 4 model card",
    )
    for kind in ("runs", "throughput", "memory"):
        rows = list(
            csv.DictReader(
                resources.files("trilemma")
                .joinpath("data", f"{kind}.csv")
                .read_text(encoding="utf-8")
                .splitlines()
            )
        )
        for i, r in enumerate(rows):
            if any(k in r["source"] for k in kept) or (
                "Pythia" in r["source"] and "GPU-hours" in r["source"]
            ):
                assert r["skip_reason"].startswith("kept independent"), (kind, i, r["model"])
    used = {c.group for c in mapped[0]}
    assert not any("maximizing-training" in g or "Pythia" in g for g in used)


def test_llama_table_15_rows_are_busy_time_on_2048_gpus(mapped) -> None:
    """LLaMA's Table 15 (Touvron et al. 2023, arXiv 2302.13971) gives GPU-hours that are training time at
    the measured rate: 65B's 1,022,362 h is 1.4T tokens at §2.4's 380 tokens/s per GPU to 0.1%, with no
    idle time or restarts. They are 2048 GPUs' hours (7B: 82,432 = 2048 × 40.25 h; 33B: 530,432 =
    2048 × 259 h), the cluster of §6. So the rows compare the step time alone (busy_gpu_hours), on 2048 GPUs."""
    assert 1.4e12 / 380 / 3600 == pytest.approx(1_022_362, rel=2e-3)
    for label, hours in (("LLaMA-7B", 82432), ("LLaMA-33B", 530432)):
        c = _find(mapped[0], "runs", label=label)
        assert c.metric == "busy_gpu_hours" and c.reported == hours and c.n_gpus == 2048
        assert (hours / 2048 * 4).is_integer()  # whole quarter-hours of 2048 GPUs
        assert not c.plan.stages[0].explicit_batch  # 4M tokens is not a whole number of sequences


def test_runs_mfu_and_bounds(mapped) -> None:
    palm = _find(mapped[0], "runs", label="PaLM")
    assert (
        palm.metric == "mfu"
        and palm.reported == pytest.approx(0.462)
        and palm.hardware.name == "tpu-v4"
    )
    assert (
        abs(param_counts(palm.model).total / 540.35e9 - 1) < 0.05
    )  # the row's count picks the gated MLP
    glm = _find(mapped[0], "runs", label="GLM-130B")
    assert glm.metric == "mfu"  # its 60 days is an upper bound, not a measurement


def test_memory_row(mapped) -> None:
    c = _find(mapped[0], "memory", label="Llama 3.1 8B - FSDP (8 GPUs)")
    assert c.metric == "peak_reserved_bytes" and c.reported == pytest.approx(82.4 * GIB)
    assert c.layout == {"tp": 1, "pp": 1, "dp": 8, "zero": 3, "recompute": "op", "micro_batch": 2}
    assert c.hardware.hbm_bytes == 96 * GIB and c.n_gpus == 8
    assert any("peak reserved" in a for a in c.assumptions)
    bert = _find(mapped[0], "memory", label="8-bit Adam", reported=12.778 * GIB)
    assert (
        bert.metric == "peak_memory_bytes"
    )  # nvidia-smi: device memory in use, CUDA context included
    assert bert.model.name == "bert-large" and bert.plan.dtypes.optimizer_state == "int8"
    assert bert.hardware.hbm_bytes == 16 * GIB and bert.plan.precision == Precision.FP32


def test_hand_checked_skips(mapped) -> None:
    _, skipped = mapped
    by = {(s.kind, s.label): s.reason for s in skipped}
    assert "TPUv3" in by[("runs", "T5-11B")]
    assert "mixture-of-experts" in by[("runs", "Llama 4 Scout (17Bx16E MoE)")]
    assert (
        "throughput",
        "Llama 3.1 405B - 16,384 GPUs (TP8 CP1 PP16 DP128)",
    ) not in by  # Llama 3's FSDP inside pipeline stages: ZeRO-1's state (Table 4 rows, zero 1)
    assert (
        "throughput",
        "Llama 3.1 405B - 3D 1F1B",
    ) not in by  # torchtitan's FSDP2 + PP: ZeRO-1's state
    assert "Adafactor" in by[("memory", "bert-large-uncased seq-classification - Adafactor")]


def test_torchtitans_405b_rows_run_what_torchtitan_ran(mapped) -> None:
    """Table 5: local batch 32 in micro-batches of local / pp (pipeline_parallel_microbatches defaults to pp);
    the interleaved schedule puts two stages on each rank (generate_split_points); async TP on."""
    one = _find(mapped[0], "throughput", label="Llama 3.1 405B - 3D 1F1B")
    two = _find(mapped[0], "throughput", label="Llama 3.1 405B - 3D Interleaved 1F1B")
    for c, vp in ((one, 1), (two, 2)):
        assert c.layout == {
            "tp": 8,
            "pp": 8,
            "dp": 8,
            "cp": 1,
            "vp": vp,
            "zero": 1,
            "recompute": "full",
            "micro_batch": 4,
        }
        assert c.plan.async_tp and c.plan.precision == Precision.FP8 and c.n_gpus == 512
        assert (
            c.plan.stages[0].global_batch_tokens == 256 * 8192
        )  # dp 8 × local batch 32 sequences of 8,192
