"""Hardware (and grid-carbon) presets: every entry loads, is sourced, and matches its datasheet."""

from __future__ import annotations

import math

import pytest

from trilemma.errors import InputError, UnknownPresetError
from trilemma.presets import get_hardware, hardware_presets, regions
from trilemma.specs import HardwareSpec
from trilemma.specs.enums import Precision

ALL = ("fp32", "tf32", "bf16", "fp16", "fp8")

# Precisions each preset must carry (dense, per device). A chip without a matrix path for a
# precision must NOT list it (V100: no bf16/tf32; Ampere: no fp8; TPUs publish bf16 only).
REQUIRED = {
    "v100-32gb": {"fp32", "fp16"},
    "a100-40gb": {"fp32", "tf32", "bf16", "fp16"},
    "a100-80gb": {"fp32", "tf32", "bf16", "fp16"},
    "h100-sxm": set(ALL),
    "h100-pcie": set(ALL),
    "h800": set(ALL),
    "h200": set(ALL),
    "b200": set(ALL),
    "mi250x": {"fp32", "bf16", "fp16"},
    "mi300x": set(ALL),
    "l40s": set(ALL),
    "rtx-4090": set(ALL),
    "tpu-v4": {"bf16"},
    "tpu-v5p": {"bf16"},
}
ABSENT = {
    "v100-32gb": {"bf16", "tf32", "fp8"},
    "a100-40gb": {"fp8"},
    "a100-80gb": {"fp8"},
    "mi250x": {"tf32", "fp8"},
    "tpu-v4": {"fp32", "tf32", "fp16", "fp8"},
}

# Datasheet reference figures (dense), each with where it is printed.
REFERENCE = [
    # NVIDIA A100 Tensor Core GPU datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity).
    ("a100-80gb", "bf16", 312e12),
    ("a100-40gb", "tf32", 156e12),
    # NVIDIA H100 Tensor Core GPU Architecture whitepaper, SXM5: BF16 989.4 dense (1978.9 sparse).
    ("h100-sxm", "bf16", 989.4e12),
    ("h100-sxm", "fp8", 1978.9e12),
    # AMD Instinct MI300X datasheet: peak FP16/BF16 1307.4 TFLOPS (dense).
    ("mi300x", "bf16", 1307.4e12),
    # Google Cloud TPU v4 documentation: peak compute per chip 275 teraflops (bf16).
    ("tpu-v4", "bf16", 275e12),
    # Google Cloud TPU v5p documentation: peak compute per chip 459 TFLOPs (bf16).
    ("tpu-v5p", "bf16", 459e12),
    # NVIDIA Tesla V100 datasheet (SXM2): 125 TFLOPS tensor performance (FP16).
    ("v100-32gb", "fp16", 125e12),
    # NVIDIA Ada GPU Architecture whitepaper, RTX 4090: FP16/BF16 with FP32 accumulate 165.2 dense.
    ("rtx-4090", "bf16", 165.2e12),
    # NVIDIA HGX B200 specifications: FP16/BF16 4.5 PFLOPS with sparsity -> 2.25 dense.
    ("b200", "bf16", 2.25e15),
]

# Memory and bandwidth reference figures (label GB read as GiB; bandwidth decimal).
MEMORY = [
    ("a100-80gb", 80 * 2**30, 2039e9),  # nvidia-smi: 81920 MiB; datasheet 2,039 GB/s
    ("h100-sxm", 80 * 2**30, 3.35e12),  # H100 datasheet: 80 GB HBM3, 3.35 TB/s
    ("h200", 141 * 2**30, 4.8e12),  # H200 datasheet: 141 GB HBM3e, 4.8 TB/s
    ("mi300x", 192 * 2**30, 5.3e12),  # MI300X datasheet: 192 GB HBM3, 5.3 TB/s
    ("tpu-v4", 32 * 2**30, 1.2e12),  # Cloud TPU v4 doc: 32 GiB, 1200 GBps
    ("tpu-v5p", 95 * 2**30, 2.765e12),  # Cloud TPU v5p doc: 95 GiB, 2765 GBps
]

# Scale-up per device per direction (half the vendor's bidirectional figure).
INTRA = [
    ("a100-80gb", 300e9),  # NVLink3 600 GB/s bidirectional
    ("h100-sxm", 450e9),  # NVLink4 900 GB/s bidirectional
    ("h800", 200e9),  # NVLink 400 GB/s bidirectional
    ("b200", 900e9),  # NVLink5 1.8 TB/s bidirectional
]


@pytest.fixture(scope="module")
def presets() -> dict[str, HardwareSpec]:
    return hardware_presets()


def test_all_required_presets_load(presets):
    assert set(REQUIRED) <= set(presets)
    for name, hw in presets.items():
        assert isinstance(hw, HardwareSpec)
        assert hw.name == name
        assert name == name.lower() and " " not in name and "_" not in name


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_required_precisions(presets, name):
    have = {str(p) for p in presets[name].peak_flop_per_s}
    assert REQUIRED[name] <= have, f"{name} lacks {REQUIRED[name] - have}"
    assert not (ABSENT.get(name, set()) & have), f"{name} lists {ABSENT[name] & have}"


def test_every_preset_has_a_training_precision(presets):
    for name, hw in presets.items():
        assert {Precision.BF16, Precision.FP16} & set(hw.peak_flop_per_s), name


def test_fields_positive_and_sourced(presets):
    for name, hw in presets.items():
        for p, v in hw.peak_flop_per_s.items():
            assert v > 0 and math.isfinite(v), (name, p)
            # Stored in FLOP/s, not TFLOP/s: every accelerator here exceeds 1 TFLOP/s.
            assert 1e12 < v < 1e17, (name, p, v)
        assert 1 * 2**30 <= hw.hbm_bytes <= 1024 * 2**30, name
        assert 1e11 < hw.hbm_bw_bytes_per_s < 1e14, name
        assert hw.intra_node_bw_bytes_per_s > 0 and hw.inter_node_bw_bytes_per_s > 0, name
        # scale-up fabric is never slower than scale-out networking
        assert hw.intra_node_bw_bytes_per_s >= hw.inter_node_bw_bytes_per_s, name
        assert isinstance(hw.devices_per_node, int) and hw.devices_per_node >= 1, name
        assert 50 <= hw.board_power_w <= 2000, name
        assert 0 < hw.price_usd_per_hour < 100, name
        assert hw.source.strip(), f"{name}: source"
        assert hw.price_source.strip(), f"{name}: price_source"
        assert hw.price_date.strip(), f"{name}: price_date"
        assert hw.notes.strip(), f"{name}: notes"
        assert hw.vendor.strip(), f"{name}: vendor"


@pytest.mark.parametrize(("name", "precision", "flops"), REFERENCE)
def test_datasheet_reference_figures(presets, name, precision, flops):
    assert presets[name].peak(precision) == pytest.approx(flops, rel=1e-9)


@pytest.mark.parametrize(("name", "hbm", "bw"), MEMORY)
def test_memory_reference_figures(presets, name, hbm, bw):
    assert presets[name].hbm_bytes == hbm
    assert presets[name].hbm_bw_bytes_per_s == pytest.approx(bw, rel=1e-9)


@pytest.mark.parametrize(("name", "bw"), INTRA)
def test_intra_node_is_per_direction(presets, name, bw):
    assert presets[name].intra_node_bw_bytes_per_s == pytest.approx(bw, rel=1e-9)


def test_inter_node_dgx_assumptions(presets):
    assert presets["a100-80gb"].inter_node_bw_bytes_per_s == pytest.approx(25e9)  # 8x HDR 200G
    assert presets["h100-sxm"].inter_node_bw_bytes_per_s == pytest.approx(50e9)  # 8x NDR 400G


def test_precision_ordering(presets):
    """Lower precision is never slower: fp32 <= tf32 <= bf16 <= fp8, and fp16 == bf16 here."""
    for name, hw in presets.items():
        pk = {str(p): v for p, v in hw.peak_flop_per_s.items()}
        chain = [pk[p] for p in ("fp32", "tf32", "bf16") if p in pk]
        assert chain == sorted(chain), (name, chain)
        if "bf16" in pk and "fp8" in pk:
            assert pk["bf16"] <= pk["fp8"], name
        if "bf16" in pk and "fp16" in pk:
            assert pk["fp16"] == pytest.approx(pk["bf16"]), name


def test_dense_not_sparse(presets):
    # the sparse H100 SXM figure (1979 TFLOPS) must never appear as the bf16 peak
    assert presets["h100-sxm"].peak("bf16") < 1.0e15
    assert presets["a100-80gb"].peak("bf16") < 400e12


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("a100", "a100-80gb"),
        ("h100", "h100-sxm"),
        ("h100-80gb", "h100-sxm"),
        ("v100", "v100-32gb"),
        ("4090", "rtx-4090"),
        ("tpuv4", "tpu-v4"),
        ("tpuv5p", "tpu-v5p"),
        ("A100-80GB", "a100-80gb"),  # case-insensitive
        ("h100_sxm", "h100-sxm"),  # underscores read as dashes
        ("  MI300X ", "mi300x"),
    ],
)
def test_aliases_resolve(alias, canonical):
    assert get_hardware(alias).name == canonical


def test_every_alias_resolves_to_its_preset_and_none_collide(presets):
    seen: dict[str, str] = {n: n for n in presets}
    for name, hw in presets.items():
        assert get_hardware(name) is hw
        for a in hw.aliases:
            key = a.lower()
            owner = seen.setdefault(key, name)
            assert owner == name, f"alias {a!r} of {name} also names {owner}"
            assert get_hardware(a) is hw


def test_unknown_name_suggests_close_match():
    with pytest.raises(UnknownPresetError) as err:
        get_hardware("a100-80")
    assert "a100-80gb" in str(err.value)
    with pytest.raises(UnknownPresetError):
        get_hardware("no-such-accelerator-xyz")


def test_missing_precision_is_a_clear_error(presets):
    with pytest.raises(InputError, match="fp16"):
        presets["v100-32gb"].peak("bf16")  # the message lists what the V100 has
    with pytest.raises(InputError):
        presets["tpu-v4"].peak("fp32")


def test_regions_presets():
    reg = regions()
    assert {"us", "world", "eu", "france", "quebec"} <= set(reg)
    for name, r in reg.items():
        assert 0.0 <= r["kg_co2_per_kwh"] < 1.5, name
        assert str(r["source"]).strip(), name
        assert 1990 <= int(r["year"]) <= 2030, name
    # Touvron et al. 2023 (LLaMA): US average 0.385 kg CO2eq/kWh
    assert reg["us"]["kg_co2_per_kwh"] == pytest.approx(0.385)
    # Luccioni et al. 2022 (BLOOM): French grid 57 gCO2eq/kWh
    assert reg["france"]["kg_co2_per_kwh"] == pytest.approx(0.057)
    kg = {k: v["kg_co2_per_kwh"] for k, v in reg.items()}
    assert kg["france"] < kg["eu"] < kg["world"]
