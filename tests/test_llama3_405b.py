"""Llama 3.1 405B at Meta's own layout, against two published figures it was not fitted to alone.

- Step MFU: Dubey et al. 2024, "The Llama 3 Herd of Models" (arXiv 2407.21783), Table 4: BF16 MFU
  38-43% across its three 405B configurations (41% at 16,384 GPUs, TP 8, PP 16, DP 128, sequence
  8,192, 16M tokens per batch). Table 4's rows are calibration rows (data/throughput.csv), so this is
  a check that the default plan lands in their band, ± 3 points.
- GPU-hours: the Llama 3.1 model card (github.com/meta-llama/llama-models, models/llama3_1/
  MODEL_CARD.md, "Training Energy Use": 30.84M GPU-hours for 405B). The model cards' GPU-hours are kept
  independent (../shared/calibration/README.md): never fitted, only checked. The plan's 80% band must
  contain them.
- Goodput: the paper's §3.3.4, "higher than 90% effective training time", less the checkpoints the
  paper's figure does not count: at least 0.88 (tests/test_goodput_published.py checks its parts).
"""

from __future__ import annotations

import pytest

from trilemma.api import estimate

#: the model card's training GPU-hours for Llama 3.1 405B (kept independent: a check, never a fit)
MODEL_CARD_GPU_HOURS = 30.84e6
#: Table 4's BF16 MFU range over its 405B rows, and the tolerance the issue allows around it
TABLE4_MFU = (0.38, 0.43)
TOLERANCE = 0.03


def _plan(stack: str | None = None):
    # trilemma estimate --model llama3.1-405b --gpu h100-sxm --gpus 16384 --tokens 15.6T --seq 8192
    #   --global-batch 16777216 --tp 8 --pp 16 [--stack meta-llama]
    return estimate(
        "llama3.1-405b",
        "h100-sxm",
        16384,
        15.6e12,
        seq_len=8192,
        global_batch_tokens=16777216,
        layout={"tp": 8, "pp": 16},
        **({"stack": stack} if stack else {}),
    )


@pytest.fixture(scope="module", params=[None, "meta-llama"], ids=["no stack", "meta-llama"])
def plan(request):
    return _plan(request.param)


def test_step_mfu_within_table_4(plan):
    """The issue's command as written (the default stack's features) and with Meta's stack (presets/
    stacks.toml meta-llama: asynchronous pipeline sends, TP overlapped, §3.3.2) both land in Table 4's
    band ± 3 points; with no stack the band widens by the cross-stack error instead."""
    lo, hi = TABLE4_MFU
    assert lo - TOLERANCE <= plan.time.mfu <= hi + TOLERANCE, plan.time.mfu


def test_the_search_finds_metas_128_chunks():
    """§3.3.2: 126 layers on pp 16 with interleaving, the first chunk the embedding alone and the last
    the head alone: 16 × 8 = 128 chunks, 8 layers on a middle rank. The planner may use the layout."""
    L = _plan().layout
    assert (L.pp, L.vp) == (16, 8), L


def test_goodput_at_least_the_papers_effective_time_less_checkpoints(plan):
    assert plan.time.goodput >= 0.88


def test_gpu_hours_band_contains_the_model_card(plan):
    t = plan.time
    assert t.gpu_hours_low <= MODEL_CARD_GPU_HOURS <= t.gpu_hours_high, (
        t.gpu_hours_low,
        t.gpu_hours,
        t.gpu_hours_high,
    )
