"""Honest about what is calibrated: chip families per preset, the coverage the calibration writes, the
wider band and the note on a family with no measured step times or runs, and solve's mark."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from trilemma.api import estimate
from trilemma.cli import main
from trilemma.estimate.bands import (
    BAND_CROSS_FAMILY,
    BAND_LOSO,
    band_factors,
    band_for,
    family_calibrated,
    family_coverage,
)
from trilemma.presets import calibration, hardware_presets
from trilemma.report.solve import UNCALIBRATED_MARK, UNCALIBRATED_NOTE
from trilemma.solve import solve
from trilemma.specs.hardware import UNKNOWN_FAMILY
from trilemma.validate.cases import KINDS, load_cases

README = Path(__file__).resolve().parents[1] / "README.md"
NOTE = "no measured step times or runs of this chip family"


def test_every_preset_names_its_family_and_the_calibration_counts_it():
    fams = calibration()["families"]
    cases, _ = load_cases()
    measured = {c.hardware.family for c in cases}
    for name, hw in hardware_presets().items():
        assert hw.family and hw.family != UNKNOWN_FAMILY, name
        # a family added after the last calibration has no case: it is absent from [families]
        # and reads as uncalibrated; a family with cases must be counted there
        assert hw.family in fams or hw.family not in measured, (
            f"{name}: family {hw.family} not in calibrated.toml [families]"
        )
        if hw.family not in fams:
            assert not family_calibrated(hw.family), name
    by = {n: h.family for n, h in hardware_presets().items()}
    assert by["a100-40gb"] == by["a100-80gb"] == "nvidia-ampere"
    assert by["h100-sxm"] == by["h200"] == by["h800"] == by["h100-pcie"] == "nvidia-hopper"
    assert (
        by["mi300x"] == "amd-cdna3"
        and by["b200"] == "nvidia-blackwell"
        and by["v100-32gb"] == "nvidia-volta"
    )


def test_coverage_counts_are_the_cases_grouped_by_family():
    """An independent count: load the cases, group them by their hardware's family."""
    cases, _ = load_cases()
    counted = Counter((c.hardware.family, c.kind) for c in cases)
    fams = calibration()["families"]
    for fam, row in fams.items():
        for k in KINDS:
            assert row[k] == counted[(fam, k)], (fam, k)
    assert {f for f, _ in counted} <= set(fams)
    assert (
        sum(row[k] for row in fams.values() for k in KINDS)
        == len(cases)
        == calibration()["meta"]["cases"]
    )
    # the README scenarios' chip has none; the two families most rows come from have plenty
    assert not family_calibrated("amd-cdna3") and family_coverage("amd-cdna3") == {
        k: 0 for k in KINDS
    }
    assert family_calibrated("nvidia-ampere") and family_calibrated("nvidia-hopper")
    assert family_calibrated("nvidia-volta")  # Hugging Face's V100 rows measure its steps now
    assert not family_calibrated("no-such-family")


def test_cross_family_figures_are_stored():
    b, fams = calibration()["bands"], calibration()["families"]
    assert b["cross_family_log_q10"] <= b["cross_family_log_median"] <= b["cross_family_log_q90"]
    held = {f: r for f, r in fams.items() if "cross_family_n" in r}
    # every family with step times or runs was held out, and only those
    assert set(held) == {f for f in fams if family_calibrated(f)}
    assert sum(r["cross_family_n"] for r in held.values()) == b["cross_family_n"] > 0


def test_a_family_never_seen_errs_further_toward_fast_than_a_source():
    """Predicting a family never seen errs further toward too fast than predicting a source never seen
    (the cross-family residuals are throughput's and runs'; their lower quantile is the fast side)."""
    b = calibration()["bands"]
    assert b["cross_family_log_q10"] < b["throughput_log_q10"]


def test_calibrated_family_gets_the_plain_band_and_no_note():
    e = estimate("llama2-7b", "a100-80gb", 512, 1e12, stack="megatron-core")
    lo, hi = band_factors()
    assert e.time.band_reason == BAND_LOSO
    assert e.time.total_s_low == pytest.approx(e.time.total_s * lo)
    assert e.time.total_s_high == pytest.approx(e.time.total_s * hi)
    assert not any(NOTE in w for w in e.warnings)
    d = e.to_dict()
    assert d["hardware"]["family"] == "nvidia-ampere" and d["hardware"]["family_calibrated"] is True
    assert d["time"]["band_reason"] == BAND_LOSO


def test_uncalibrated_family_says_so_and_its_band_is_wider_and_contains_the_plain_one():
    e = estimate("llama2-7b", "mi300x", 512, 1e12, stack="megatron-core")
    t, c = e.time, e.cost
    lo, hi = band_factors()
    wlo, whi, reason = band_for("amd-cdna3")
    assert reason == BAND_CROSS_FAMILY == t.band_reason
    # strictly wider on both sides, and it contains the leave-one-source-out band
    assert t.total_s_low < t.total_s * lo and t.total_s_high > t.total_s * hi
    assert t.gpu_hours_low < t.gpu_hours * lo and t.gpu_hours_high > t.gpu_hours * hi
    assert c.usd_low < c.usd * lo and c.usd_high > c.usd * hi
    assert t.total_s_low == pytest.approx(t.total_s * wlo) and c.usd_high == pytest.approx(
        c.usd * whi
    )
    # the documented combination: outward quantiles in quadrature
    b = calibration()["bands"]
    assert wlo == pytest.approx(
        math.exp(-math.hypot(max(b["time_log_q90"], 0), max(b["cross_family_log_q90"], 0)))
    )
    assert whi == pytest.approx(
        math.exp(math.hypot(min(b["time_log_q10"], 0), min(b["cross_family_log_q10"], 0)))
    )
    notes = [w for w in e.warnings if NOTE in w]
    assert (
        len(notes) == 1
        and notes[0].startswith("mi300x (amd-cdna3)")
        and f"×{wlo:.2f}–×{whi:.2f}" in notes[0]
    )
    d = e.to_dict()
    assert (
        d["hardware"]["family_calibrated"] is False
        and d["time"]["band_reason"] == BAND_CROSS_FAMILY
    )
    # a device of no known family (a hand-built spec) is not calibrated either
    hw = hardware_presets()["a100-80gb"].replace(name="my-chip", family=UNKNOWN_FAMILY)
    assert (
        estimate("llama2-7b", hw, 512, 1e12, stack="megatron-core").time.band_reason
        == BAND_CROSS_FAMILY
    )


def test_cli_prints_the_note(capsys):
    assert (
        main(
            [
                "estimate",
                "--model",
                "llama2-7b",
                "--gpu",
                "mi300x",
                "--gpus",
                "256",
                "--tokens",
                "1T",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert NOTE in " ".join(out.split())


@pytest.fixture(scope="module")
def mixed():
    return solve(
        deadline="30d", budget="$2M", gpu="a100-80gb,mi300x", params="100M..3B", max_gpus=64
    )


def test_solve_json_flags_uncalibrated_plans(mixed):
    d = mixed.to_dict()
    plans = [d["optimum"], *d["runners_up"]]
    names = {p["hardware"]["name"] for p in plans}
    assert names == {"a100-80gb", "mi300x"}, names  # both kinds of plan are there to check
    for p in plans:
        assert p["hardware"]["family_calibrated"] is (p["hardware"]["name"] != "mi300x")
        # the family's reason is there exactly when the family is uncalibrated (a plan may carry others: a
        # node count outside the whole runs', for one)
        reasons = p["time"]["band_reasons"]
        assert (BAND_CROSS_FAMILY in reasons) is (not p["hardware"]["family_calibrated"])
        assert p["time"]["band_reason"] == ("; ".join(reasons) if reasons else BAND_LOSO)
    json.dumps(d)


def test_solve_table_marks_uncalibrated_gpus(mixed, capsys):
    from trilemma.report.solve import print_solve

    print_solve(mixed)
    out = capsys.readouterr().out
    assert f"mi300x{UNCALIBRATED_MARK}" in out and f"a100-80gb{UNCALIBRATED_MARK}" not in out
    assert UNCALIBRATED_NOTE in out


def test_readme_says_what_the_mark_means():
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert UNCALIBRATED_NOTE.lstrip("* ") in text
    assert "cross-family" in text and "time.band_reason" in text
