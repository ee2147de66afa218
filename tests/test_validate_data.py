"""Backtest rows as explicit data: the schema, the shipped rows, and `trilemma validate --data FILE.csv`."""

from __future__ import annotations

import csv
import json
from importlib import resources
from pathlib import Path

import pytest
from clitools import run

from trilemma.units import GIB
from trilemma.validate.cases import KINDS, load_cases, load_file, read_rows
from trilemma.validate.columns import COLUMNS, CONVERTED_METRICS, PUBLISHED

_HEADER = [
    "model",
    "metric",
    "reported",
    "gpu",
    "n_gpus",
    "model_preset",
    "seq_len",
    "global_batch",
    "precision",
    "tp",
    "pp",
    "dp",
    "micro_batch",
    "recompute",
    "source",
]
_GOOD = [
    [
        "7B fsdp",
        "mfu",
        "45",
        "h100-sxm",
        "16",
        "llama2-7b",
        "4096",
        "64",
        "bf16",
        "1",
        "1",
        "16",
        "4",
        "selective",
        "our cluster",
    ],
    [
        "7B tp2",
        "step_s",
        "5.5",
        "h100-sxm",
        "16",
        "llama2-7b",
        "4096",
        "64",
        "bf16",
        "2",
        "1",
        "8",
        "8",
        "full",
        "our cluster",
    ],
]


def _write(path: Path, header: list[str], rows: list[list[str]]) -> str:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


# ------------------------------------------------------------------ the shipped rows


@pytest.mark.parametrize("kind", KINDS)
def test_every_shipped_row_maps_from_its_columns(kind: str) -> None:
    raw = read_rows(kind)
    cases, skipped = load_cases(kind)
    assert sorted([c.row for c in cases] + [s.row for s in skipped]) == list(range(len(raw)))
    for s in skipped:  # a skipped row carries its reason as data
        assert raw[s.row]["skip_reason"] == s.reason
    for c in cases:
        r = raw[c.row]
        assert not r["skip_reason"] and r["gpu"] in c.hardware.name
        assert CONVERTED_METRICS.get(r["metric"], r["metric"]) == c.metric
        assert int(r["n_gpus"]) == c.n_gpus and int(r["seq_len"]) == c.plan.stages[0].seq_len
        assert c.assumptions == tuple(
            a for a in r["assumptions"].split(" | ") if a
        )  # nothing left to assume


def test_shipped_reported_equals_the_published_figure() -> None:
    """The explicit `reported` repeats the published value column it came from, in that column's unit."""
    col = {
        "tokens_per_s_per_gpu": "tokens_per_s_reported",
        "sequences_per_s_per_gpu": "sequences_per_s_reported",
        "mfu": "mfu_reported",
        "hfu": "mfu_reported",
        "model_tflops_per_gpu": "tflops_per_gpu_reported",
        "hardware_tflops_per_gpu": "tflops_per_gpu_reported",
        "step_s": "step_time_s_reported",
        "forward_backward_s": "step_time_s_reported",
    }
    raw = read_rows("throughput")
    for c in load_cases("throughput")[0]:
        r = raw[c.row]
        assert float(r[col[r["metric"]]]) == float(r["reported"])
    for c in load_cases("memory")[0]:
        assert c.reported == float(read_rows("memory")[c.row]["peak_memory_gb_reported"]) * GIB


def test_shipped_columns_are_all_in_the_schema_and_documented() -> None:
    doc = (resources.files("trilemma") / "data" / "SCHEMA.md").read_text(encoding="utf-8")
    names = {c.name for c in COLUMNS}
    for c in COLUMNS:  # each column's table row says what the code reads
        row = f"| `{c.name}` | {c.allowed} | {c.unit or '—'} | {'yes' if c.required else 'no'} | {c.doc or '—'} |"
        assert row in doc, row
    for kind in KINDS:
        header = set(read_rows(kind)[0])
        assert header <= names | PUBLISHED
        assert {"source", "notes", "metric", "reported", "assumptions", "skip_reason"} <= header


@pytest.mark.parametrize("kind", KINDS)
def test_schema_round_trip_explicit_columns_alone(tmp_path: Path, kind: str) -> None:
    """The shipped rows cut down to the schema's columns give the same cases: the published columns
    are a record, not an input."""
    raw = read_rows(kind)
    keep = [c.name for c in COLUMNS if c.name in raw[0]] + (
        ["model_or_size"] if "model_or_size" in raw[0] else []
    )
    path = _write(tmp_path / f"{kind}.csv", keep, [[r[k] for k in keep] for r in raw])
    got_kind, cases, skipped = load_file(path, kind)
    want, want_skipped = load_cases(kind)
    assert got_kind == kind and skipped == want_skipped and len(cases) == len(want)
    for a, b in zip(cases, want):
        assert (
            a.row,
            a.label,
            a.metric,
            a.reported,
            a.layout,
            a.plan,
            a.hardware,
            a.n_gpus,
            a.assumptions,
            a.group,
        ) == (
            b.row,
            b.label,
            b.metric,
            b.reported,
            b.layout,
            b.plan,
            b.hardware,
            b.n_gpus,
            b.assumptions,
            b.group,
        )
        assert a.model.model_dump(exclude={"source"}) == b.model.model_dump(exclude={"source"})


# ------------------------------------------------------------------ a user's own file, end to end


def test_user_csv_is_backtested_through_the_cli(capsys, tmp_path: Path) -> None:
    path = _write(tmp_path / "mine.csv", _HEADER, _GOOD)
    code, out, err = run(capsys, "validate", "--data", path, "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert [r["row"] for r in doc["rows"]] == [0, 1] and {r["kind"] for r in doc["rows"]} == {
        "throughput"
    }
    mfu, step = doc["rows"]
    assert mfu["metric"] == "mfu" and mfu["reported"] == pytest.approx(0.45)  # 45 % as a fraction
    assert step["metric"] == "step_s" and step["reported"] == 5.5
    for r, tp, dp, mb in ((mfu, 1, 16, 4), (step, 2, 8, 8)):
        assert r["n_gpus"] == 16 and r["hardware"] == "h100-sxm" and r["group"] == "our cluster"
        assert r["ratio"] == pytest.approx(r["predicted"] / r["reported"])
        assert (r["layout"]["tp"], r["layout"]["dp"], r["layout"]["micro_batch"]) == (
            tp,
            dp,
            mb,
        )  # pinned
        assert r["loso_predicted"] is None  # no stored LOSO for a user's rows
    assert step["layout"]["recompute"] == "full" and mfu["layout"]["recompute"] == "selective"
    # the shipped constants were not fitted on a user's rows: out of sample, never labelled in-sample
    assert doc["summary"]["throughput"]["shipped_constants"]["n"] == 2 and doc["skipped"] == []
    assert "in_sample" not in doc["summary"]["throughput"] and doc["data"] == path
    code, out, _ = run(capsys, "validate", "--data", path)  # the human table too
    assert code == 0 and "7B tp2" in out and "shipped constants" in out and "in-sample" not in out


def test_a_row_breaking_a_layout_rule_is_skipped_with_the_rule(capsys, tmp_path: Path) -> None:
    """The axes' rules come from the registry: a row that breaks one is skipped, the rule named."""
    header = _HEADER + ["zero", "ep"]
    rows = [
        _GOOD[0][:10] + ["2", "8"] + _GOOD[0][12:] + ["3", "1"],  # ZeRO-3 with pp 2
        _GOOD[1] + ["1", "2"],
    ]  # ep 2 on a dense model
    path = _write(tmp_path / "rules.csv", header, rows)
    code, out, err = run(capsys, "validate", "--data", path, "--json")
    assert code == 0 and err == ""
    reasons = {s["row"]: s["reason"] for s in json.loads(out)["skipped"]}
    assert "ZeRO stage 2/3 cannot be combined with pipeline parallelism" in reasons[0]
    assert "ep must divide the number of experts and dp (and be 1 for a dense model)" in reasons[1]


def test_user_memory_csv_and_defaults(capsys, tmp_path: Path) -> None:
    header = [
        "metric",
        "reported",
        "gpu",
        "n_gpus",
        "model_preset",
        "seq_len",
        "micro_batch",
        "dp",
        "grad_accum",
    ]
    path = _write(
        tmp_path / "mem.csv",
        header,
        [["peak_memory_bytes", "40", "a100-80gb", "8", "llama2-7b", "2048", "2", "8", "4"]],
    )
    kind, cases, _ = load_file(path)  # all rows memory → a memory file
    assert kind == "memory"
    c = cases[0]
    assert c.reported == 40 * GIB and c.label == "row 1"
    st = c.plan.stages[0]
    assert st.global_batch_tokens == 2 * 8 * 4 * 2048  # micro_batch × dp × grad_accum sequences
    assert st.tokens == 100 * st.global_batch_tokens
    assert any("bf16 assumed" in a for a in c.assumptions) and any(
        "grad-accum 4" in a for a in c.assumptions
    )
    code, out, _ = run(capsys, "validate", "--data", path, "--json")
    assert code == 0 and json.loads(out)["rows"][0]["metric"] == "peak_memory_bytes"


# ------------------------------------------------------------------ bad input: one line, exit 2


@pytest.mark.parametrize(
    "column, value, expect",
    [
        ("tp", "2x", "column tp: '2x' is not allowed; expected a positive whole number"),
        (
            "micro_batch",
            "0",
            "column micro_batch: '0' is not allowed; expected a positive whole number",
        ),
        ("metric", "speed", "column metric: 'speed' is not allowed; expected one of gpu_hours"),
        (
            "recompute",
            "some",
            "column recompute: 'some' is not allowed; expected none, selective, full or op",
        ),
        ("gpu", "h1000", "column gpu: 'h1000' is not allowed; expected a hardware preset name"),
        ("model_preset", "llama9-1b", "column model_preset: 'llama9-1b' is not allowed"),
        ("n_gpus", "12", "column n_gpus: 12 is not allowed; expected 16 = tp 2 × pp 1 × dp 8"),
        ("reported", "-3", "column reported: '-3' is not allowed; expected a positive number"),
        ("seq_len", "", "column seq_len: missing"),
    ],
)
def test_a_bad_row_names_row_column_and_value(
    capsys, tmp_path: Path, column: str, value: str, expect: str
) -> None:
    rows = [list(r) for r in _GOOD]
    rows[1][_HEADER.index(column)] = value
    path = _write(tmp_path / "bad.csv", _HEADER, rows)
    code, out, err = run(capsys, "validate", "--data", path)
    assert code == 2 and out == ""
    assert (
        err.count("\n") == 1
        and err.startswith("trilemma: error: bad.csv row 2 (line 3), ")
        and expect in err
    )


def test_metric_must_fit_the_kind_and_the_flop_convention(capsys, tmp_path: Path) -> None:
    path = _write(tmp_path / "k.csv", _HEADER + ["flop_convention"], [_GOOD[0] + ["hardware"]])
    code, _, err = run(capsys, "validate", "--data", path)
    assert (
        code == 2
        and "row 1 (line 2), column flop_convention: 'hardware'" in err
        and "model for metric mfu" in err
    )
    path = _write(tmp_path / "m.csv", _HEADER, [_GOOD[0]])
    code, _, err = run(capsys, "validate", "--data", path, "--kind", "memory")
    assert code == 2 and "column metric: 'mfu'" in err and "peak_memory_bytes" in err


def _file(d: Path, name: str, content: bytes) -> str:
    (d / name).write_bytes(content)
    return str(d / name)


@pytest.mark.parametrize(
    "make, expect",
    [
        (lambda d: str(d / "missing.csv"), "expected an existing CSV file"),
        (lambda d: str(d), "expected a CSV file, not a directory"),
        (lambda d: _file(d, "b.csv", b"\x00\x01\x02metric"), "this one is binary"),
        (lambda d: _file(d, "e.csv", b""), "this one is empty"),
        (
            lambda d: _file(d, "u.csv", b"name,speed\nx,1\n"),
            "u.csv columns: 'name, speed' is not allowed; expected the backtest schema's columns",
        ),
        (
            lambda d: _file(d, "r.csv", b"metric,reported\nmfu,40\n"),
            "expected a header with the required columns gpu, n_gpus, seq_len",
        ),
    ],
)
def test_file_problems_are_one_line(capsys, tmp_path: Path, make, expect: str) -> None:
    code, out, err = run(capsys, "validate", "--data", make(tmp_path))
    assert code == 2 and out == "" and err.count("\n") == 1 and expect in err


def test_forward_backward_time_is_the_step_without_its_optimizer_update(tmp_path: Path) -> None:
    """A benchmark that times forward + loss + backward alone (no optimizer.step(), as the CS336 rows do) is
    compared with the step less its optimizer update: the same plan's step_s and forward_backward_s predictions
    differ by exactly the estimate's optimizer_s, and the forward-backward one is the smaller."""
    from trilemma.api import estimate
    from trilemma.presets import constants
    from trilemma.validate.predict import predict

    rows = [
        [
            "1B",
            metric,
            "1.0",
            "a100-80gb",
            "1",
            "llama2-7b",
            "512",
            "4",
            "fp32",
            "1",
            "1",
            "1",
            "4",
            "none",
            "bench",
        ]
        for metric in ("step_s", "forward_backward_s")
    ]
    header = _HEADER + ["n_layers", "d_model", "n_heads", "ffn_dim"]
    path = _write(tmp_path / "fb.csv", header, [r + ["8", "2048", "16", "5504"] for r in rows])
    _, cases, skipped = load_file(path)
    assert not skipped
    step, fb = (p.predicted for p in predict(cases, constants()))
    e = estimate(
        cases[0].model,
        "a100-80gb",
        1,
        tokens=4 * 512 * 100,
        seq_len=512,
        global_batch_tokens=4 * 512,
        precision="fp32",
        layout={"tp": 1, "pp": 1, "dp": 1, "micro_batch": 4, "recompute": "none", "zero": 0},
    )
    assert e.time.optimizer_s > 0 and fb < step
    assert step - fb == pytest.approx(e.time.optimizer_s, rel=1e-9)
    assert step == pytest.approx(e.time.step_s, rel=1e-9)
