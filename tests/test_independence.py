"""Evidence that claims independence has it: no row of a set the tests or ``trilemma validate`` call
evidence ("no calibration row", "a check", "held out") is a row of a data file the constants are fitted on,
matched by source group and reported value. A set whose rows are calibration rows says so: its
tests carry the ``in_sample`` marker; a set whose floor holds the shared source out says which.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from trilemma.units import GIB
from trilemma.validate import source_group

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "trilemma" / "data"

#: the data files the calibration fits (trilemma.validate.fit.calibrate): their rows without a skip_reason
FITTED = ("memory.csv", "throughput.csv", "runs.csv")

#: evidence set → (the columns holding its reported figures, a group for files whose rows name no source,
#: what the tests claim: "no calibration row", "held out" (its floor refits without the shared sources) or
#: "in sample" (its tests are marked in_sample))
EVIDENCE: dict[str, tuple[tuple[str, ...], str | None, str]] = {
    "src/trilemma/data/finetune_memory.csv": (("reported_gib",), None, "held out"),
    "src/trilemma/data/ondevice.csv": (("decode_tokens_per_s",), None, "no calibration row"),
    "src/trilemma/data/rl_steps.csv": (
        ("reported_step_s", "reported_generation_s", "reported_training_s"),
        None,
        "no calibration row",
    ),
    "tests/data/cs336_fp32_a100.csv": (("reported",), None, "no calibration row"),
    "tests/data/cs336_fp32_h100.csv": (
        ("h100_step_s", "a100_step_s"),
        "github.com/yyin-dev/cs336-a2",
        "no calibration row",
    ),
    "tests/data/cs336_fp32_a100_memory.csv": (("reported",), None, "in sample"),
}

#: two figures are the same measurement when they agree to this relative tolerance (the files round
#: the same published number to different digits: 14.5986 and 14.599 GiB)
SAME = 2e-3


def row_group(row: dict[str, str]) -> str:
    """A row's source group: its ``group`` column, else the one its ``source`` names."""
    return row.get("group") or source_group(row.get("source", ""))


def read_rows(path: Path) -> list[dict[str, str]]:
    """A CSV's rows, its ``#`` comment lines skipped."""
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def fitted_rows() -> list[tuple[str, str, float]]:
    """(file, group, reported) of every row the calibration fits."""
    out = []
    for name in FITTED:
        for row in read_rows(DATA / name):
            if not row["skip_reason"] and row["reported"]:
                out.append((name, row_group(row), float(row["reported"])))
    return out


def overlaps(evidence: str) -> list[tuple[str, str, float]]:
    """(fitted file, group, value) of each figure of an evidence set that a fitted file carries too."""
    columns, group, _ = EVIDENCE[evidence]
    fitted = fitted_rows()
    found = []
    for row in read_rows(ROOT / evidence):
        g = group or row_group(row)
        for col in columns:
            if not row.get(col):
                continue
            v = float(row[col])
            found += [(f, g, v) for f, fg, fv in fitted if fg == g and abs(fv / v - 1) <= SAME]
    return found


@pytest.mark.parametrize(
    "evidence", [k for k, v in EVIDENCE.items() if v[2] == "no calibration row"]
)
def test_never_fitted_evidence_is_no_calibration_row(evidence: str) -> None:
    assert overlaps(evidence) == [], evidence


@pytest.mark.parametrize("evidence", [k for k, v in EVIDENCE.items() if v[2] == "in sample"])
def test_in_sample_evidence_is_named_so_because_it_is_fitted(evidence: str) -> None:
    """The label stays true both ways: a set called in-sample has rows in the fit (else it would be a
    held-out check, and should say so)."""
    assert overlaps(evidence), evidence


def test_finetune_memory_floor_holds_out_the_sources_it_shares_with_the_fit() -> None:
    """data/finetune_memory.csv's BERT rows are data/memory.csv's Hugging Face rows: its floor predicts them
    with the memory constants refit without that source, on cases none of which is one of its rows."""
    from trilemma.validate.finetune import held_out_cases, held_out_groups

    shared = {g for _, g, _ in overlaps("src/trilemma/data/finetune_memory.csv")}
    assert shared and shared <= held_out_groups()
    ft = read_rows(DATA / "finetune_memory.csv")
    for c in held_out_cases():
        assert not any(
            row_group(r) == c.group and abs(float(r["reported_gib"]) * GIB / c.reported - 1) <= SAME
            for r in ft
        ), c.label


def test_every_evidence_file_is_scanned() -> None:
    """A new evidence set under tests/data or src/trilemma/data with reported figures is declared above."""
    found = {
        str(p.relative_to(ROOT))
        for p in [*DATA.glob("*.csv"), *(ROOT / "tests" / "data").glob("*.csv")]
        if p.name not in FITTED and p.name != "losses.csv"
    }
    scanned = (
        set(EVIDENCE)
        | {
            "tests/data/published_params.csv",  # parameter counts, not measurements of a run
            "tests/data/xla_h100_matmul.csv",  # XLA's GEMM table: no calibration source
            "tests/data/cs336_attention_h100_fp32.csv",  # one attention kernel: no calibration row is one
            # published benchmark scores: fitted by the benchmark curves alone, held out by family in
            # their own backtest (quality.bench_fit.backtest); no time or memory constant reads them
            "src/trilemma/data/benchmarks.csv",
        }
    )
    assert found <= scanned, found - scanned


def _document(row: dict[str, str]) -> tuple[str, str]:
    """(group, the page in it) of a row: a repository's file ("github.com/x/y docs/page.md ...") is its own
    document; elsewhere the group is."""
    words = row["source"].split()
    page = words[1] if len(words) > 1 and "/" in words[1] and "." in words[1] else ""
    return row_group(row), page


def test_kept_independent_sources_have_no_fitted_row() -> None:
    """A source the calibration keeps independent (rows carried with skip_reason "kept independent ...": a
    paper, a model card, or one page of a repository whose other pages are fitted, as torchtitan's
    docs/performance.md) has no row the fit uses. tests/test_cases.py checks that the sources the shared
    README names are skipped; this checks that no other row of the same document slipped into the fit."""
    kept, used = set(), set()
    for name in FITTED:
        for row in read_rows(DATA / name):
            if row["skip_reason"].startswith("kept independent"):
                kept.add(_document(row))
            elif not row["skip_reason"]:
                used.add(_document(row))
    clash = {(g, p) for g, p in used for kg, kp in kept if g == kg and kp in ("", p)}
    assert kept and not clash, clash
