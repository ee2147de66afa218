"""The chips added for today's users (GB200 NVL72, L4, T4, RTX 5090, RTX A6000, MI325X): each
datasheet figure against the document that prints it, each marked uncalibrated, and GB200 planned as
one 72-GPU NVLink domain."""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.api import estimate
from trilemma.cli import main
from trilemma.estimate.bands import BAND_CROSS_FAMILY, family_calibrated
from trilemma.estimate.layouts import candidate_layouts
from trilemma.presets import get_hardware, get_model

NEW = ("gb200", "l4", "t4", "rtx-5090", "rtx-a6000", "mi325x")
NOTE = "no measured step times or runs of this chip family"

# (chip, precision, dense FLOP/s, where it is printed)
PEAKS = [
    # NVIDIA GB200 NVL72 specifications: FP16/BF16 Tensor Core 360 PFLOPS per rack of 72 GPUs,
    # "sparse; dense is one-half" -> 360e15 / 72 / 2
    ("gb200", "bf16", 360e15 / 72 / 2),
    # same table: FP8 720 PFLOPS sparse per rack; FP32 5,760 TFLOPS per rack
    ("gb200", "fp8", 720e15 / 72 / 2),
    ("gb200", "fp32", 5760e12 / 72),
    # NVIDIA L4 datasheet: BF16 242 TFLOPS and FP8 485 TFLOPS with sparsity
    ("l4", "bf16", 242e12 / 2),
    ("l4", "fp8", 485e12 / 2),
    # NVIDIA T4 datasheet: 65 TFLOPS mixed precision (FP16), 8.1 TFLOPS FP32
    ("t4", "fp16", 65e12),
    ("t4", "fp32", 8.1e12),
    # NVIDIA RTX Blackwell whitepaper, RTX 5090: BF16 with FP32 accumulate 209.5 dense / 419 sparse
    ("rtx-5090", "bf16", 209.5e12),
    # NVIDIA GA102 whitepaper, RTX A6000: BF16 with FP32 accumulate 154.8 dense / 309.6 sparse
    ("rtx-a6000", "bf16", 154.8e12),
    # AMD Instinct MI325X specifications: FP16/BF16 1,307.4 TFLOPS, FP8 2,614.9 TFLOPS (dense)
    ("mi325x", "bf16", 1307.4e12),
    ("mi325x", "fp8", 2614.9e12),
]

# (chip, device memory bytes (marketed GB read as GiB), bandwidth B/s, board power W)
MEMORY = [
    ("gb200", 13.4e12 / 72 / 1e9 // 1 * 2**30, 576e12 / 72, 1200),  # 13.4 TB, 576 TB/s per rack
    ("l4", 24 * 2**30, 300e9, 72),  # L4 datasheet: 24 GB GDDR6, 300 GB/s, 72 W
    ("t4", 16 * 2**30, 320e9, 70),  # T4: 16 GB GDDR6, 320 GB/s, 70 W
    ("rtx-5090", 32 * 2**30, 1792e9, 575),  # RTX 5090: 32 GB GDDR7, 1,792 GB/s, 575 W
    ("rtx-a6000", 48 * 2**30, 768e9, 300),  # RTX A6000: 48 GB GDDR6, 768 GB/s, 300 W
    ("mi325x", 256 * 2**30, 6e12, 1000),  # MI325X: 256 GB HBM3e, 6 TB/s, 1,000 W
]


@pytest.mark.parametrize(("chip", "precision", "flops"), [p[:3] for p in PEAKS])
def test_datasheet_peaks(chip, precision, flops):
    assert get_hardware(chip).peak(precision) == pytest.approx(flops, rel=1e-9)


@pytest.mark.parametrize(("chip", "hbm", "bw", "watts"), MEMORY)
def test_datasheet_memory_bandwidth_power(chip, hbm, bw, watts):
    hw = get_hardware(chip)
    assert hw.hbm_bytes == hbm
    assert hw.hbm_bw_bytes_per_s == pytest.approx(bw, rel=1e-9)
    assert hw.board_power_w == watts


def test_links_per_direction():
    # NVLink5 through the NVL72 switch: 130 TB/s per rack / 72 = 1.8 TB/s bidirectional per GPU
    assert get_hardware("gb200").intra_node_bw_bytes_per_s == pytest.approx(130e12 / 72 / 2, 0.01)
    assert get_hardware("gb200").devices_per_node == 72
    # PCIe Gen3 x16 32 GB/s and Gen4 x16 64 GB/s bidirectional
    assert get_hardware("t4").intra_node_bw_bytes_per_s == 16e9
    assert get_hardware("l4").intra_node_bw_bytes_per_s == 32e9


def test_turing_has_no_bf16_and_says_so():
    with pytest.raises(Exception, match="no bf16"):
        get_hardware("t4").peak("bf16")


@pytest.mark.parametrize("chip", NEW)
def test_new_chips_are_uncalibrated_and_sourced(chip):
    hw = get_hardware(chip)
    assert not family_calibrated(hw.family)
    assert hw.source and hw.price_source and hw.price_date


def test_gb200_tensor_parallel_spans_the_72_gpu_domain():
    """A 128-head model on 576 GPUs (8 racks): the search offers TP up to 64 on GB200, since the
    NVLink domain is 72 GPUs, and up to 16 (twice the 8-GPU node) on HGX B200."""
    m = get_model("llama3-405b")
    tps = {int(t) for t in np.unique(candidate_layouts(m, 576, 72).tp)}
    assert {16, 32, 64} <= tps and max(tps) == 64
    assert max(int(t) for t in candidate_layouts(m, 576, 8).tp) == 16


def test_gb200_tp16_stays_on_nvlink_and_is_marked_uncalibrated():
    gb = estimate("llama3-70b", "gb200", 144, 1e12, layout={"tp": 16}, stack="megatron-core")
    b2 = estimate("llama3-70b", "b200", 144, 1e12, layout={"tp": 16}, stack="megatron-core")
    assert gb.layout.tp == b2.layout.tp == 16
    spans = "spans nodes"
    assert not any(spans in w for w in gb.warnings)
    assert any(spans in w for w in b2.warnings)
    assert BAND_CROSS_FAMILY in gb.time.band_reason
    assert any(w.startswith("gb200 (nvidia-blackwell)") and NOTE in w for w in gb.warnings)


def test_cli_estimate_gb200_says_uncalibrated(capsys):
    rc = main(["estimate", "-m", "llama3-70b", "-g", "gb200", "-n", "144", "--tokens", "1T"])
    out = capsys.readouterr().out
    assert rc in (0, None)
    assert "72/node" in out and NOTE in " ".join(out.split())


def test_gb200_expert_parallel_inside_the_domain_stays_on_nvlink():
    """EP 64 of a 128-expert model on 128 GPUs: on GB200 every all-to-all peer is in the 72-GPU
    NVLink domain (900 GB/s per direction); on HGX B200, 56 of each rank's 63 peers are behind its
    50 GB/s network card, so its exchange is several times slower (18x the bandwidth on GB200)."""
    kw = dict(layout={"ep": 64, "tp": 1, "pp": 1}, stack="megatron-core")
    gb = estimate("qwen3-30b-a3b", "gb200", 128, 1e11, **kw)
    b2 = estimate("qwen3-30b-a3b", "b200", 128, 1e11, **kw)
    assert gb.layout.ep == b2.layout.ep == 64
    assert gb.time.tp_comm_s < b2.time.tp_comm_s / 4
