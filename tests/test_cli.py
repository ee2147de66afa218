"""The `trilemma` command: the JSON scripts rely on, the invariants in it, and one-line errors.

Most cases run `trilemma.cli.main(argv)` in-process (fast); a few run the installed console
script in a subprocess to check the real exit status and streams.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import run

BASE = [
    "estimate",
    "--model",
    "llama2-13b",
    "--gpu",
    "a100-80gb",
    "--gpus",
    "2048",
    "--tokens",
    "2T",
    "--seq",
    "4096",
    "--json",
]
LLAMA2_13B_PARAMS = 13_015_864_320  # meta-llama/Llama-2-13b-hf: 13,015,864,320 parameters


def _console_script() -> list[str]:
    """The installed `trilemma` entry point next to this interpreter, else `python -m trilemma.cli`."""
    here = Path(sys.executable).parent
    for name in ("trilemma", "trilemma.exe"):
        if (here / name).exists():
            return [str(here / name)]
    found = shutil.which("trilemma")
    return [found] if found else [sys.executable, "-m", "trilemma.cli"]


WIDE = "250"  # rich wraps tables to the terminal (80 columns when piped)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", WIDE)


def run_subprocess(*args: str, columns: str = WIDE) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": columns, "PYTHONWARNINGS": "default"}
    return subprocess.run(
        [*_console_script(), *args], capture_output=True, text=True, timeout=120, env=env
    )


def one_json(text: str) -> dict:
    """Exactly one JSON document (nothing before or after it but whitespace)."""
    doc, end = json.JSONDecoder().raw_decode(text.lstrip())
    assert text.lstrip()[end:].strip() == "", "more than one JSON document on stdout"
    assert isinstance(doc, dict)
    return doc


@pytest.fixture
def doc(capsys) -> dict:
    code, out, err = run(capsys, *BASE)
    assert code == 0, err
    assert err == ""
    return one_json(out)


def get(d: dict, dotted: str):
    for part in dotted.split("."):
        assert part in d, f"missing key {dotted!r} (at {part!r})"
        d = d[part]
    return d


# ------------------------------------------------------------------ the main JSON document

KEYS = [
    "schema",
    "model.params_total",
    "model.params_active",
    "flops.model_per_token",
    "flops.total_model",
    *(f"layout.{k}" for k in ("tp", "pp", "dp", "zero", "recompute", "micro_batch")),
    "memory.per_gpu_bytes",
    "memory.capacity_bytes",
    "memory.fits",
    *(
        f"memory.breakdown.{k}"
        for k in ("weights", "gradients", "optimizer", "activations", "other")
    ),
    "time.step_s",
    "time.tokens_per_s",
    "time.mfu",
    "time.total_s",
    "time.gpu_hours",
    "cost.usd",
    "cost.energy_kwh",
    "cost.co2_kg",
    "warnings",
]


@pytest.mark.parametrize("key", KEYS)
def test_json_has_key(doc, key):
    get(doc, key)


def test_json_types(doc):
    assert doc["schema"].startswith("trilemma.estimate/")
    assert isinstance(doc["warnings"], list) and all(isinstance(w, str) for w in doc["warnings"])
    for k in ("tp", "pp", "dp", "cp", "zero", "micro_batch"):
        assert isinstance(doc["layout"][k], int) and not isinstance(doc["layout"][k], bool)
    assert doc["layout"]["recompute"] in ("none", "selective", "full")
    assert doc["layout"]["zero"] in (0, 1, 2, 3)
    assert isinstance(doc["memory"]["fits"], bool)
    for section in ("time", "cost"):
        for k, v in doc[section].items():
            if isinstance(v, float):
                assert math.isfinite(v), f"{section}.{k} = {v}"


def test_json_invariants(doc):
    t, lay, mem, cost, fl = doc["time"], doc["layout"], doc["memory"], doc["cost"], doc["flops"]
    assert 0 < t["mfu"] < 1
    assert lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"] == 2048
    assert mem["fits"] is True and mem["per_gpu_bytes"] <= mem["capacity_bytes"]
    assert mem["capacity_bytes"] == 80 * 2**30
    assert math.isclose(sum(mem["breakdown"].values()), mem["per_gpu_bytes"], rel_tol=1e-9)
    assert all(v >= 0 for v in mem["breakdown"].values())
    assert math.isclose(t["gpu_hours"], 2048 * t["total_s"] / 3600, rel_tol=1e-9)
    assert math.isclose(cost["usd"], t["gpu_hours"] * cost["price_usd_per_gpu_hour"], rel_tol=1e-9)
    assert math.isclose(fl["total_model"], fl["model_per_token"] * 2e12, rel_tol=1e-9)
    assert t["total_s"] >= t["busy_s"] > 0
    assert math.isclose(t["total_s"], t["busy_s"] / t["goodput"], rel_tol=1e-9)
    assert math.isclose(t["tokens_per_s"], 2e12 / t["busy_s"], rel_tol=1e-9)
    assert cost["energy_kwh"] > 0 and cost["co2_kg"] > 0
    assert math.isclose(
        cost["co2_kg"], cost["energy_kwh"] * cost["grid_kg_co2_per_kwh"], rel_tol=1e-9
    )


def test_json_llama2_13b_params(doc):
    assert doc["model"]["params_total"] == LLAMA2_13B_PARAMS
    assert doc["model"]["params_active"] == LLAMA2_13B_PARAMS  # dense
    # PaLM convention: 6 N + 12 L s d per token, at least 6 N
    assert doc["flops"]["model_per_token"] >= 6 * 0.97 * LLAMA2_13B_PARAMS


def test_price_scales_cost(capsys, doc):
    code, out, err = run(capsys, *BASE, "--price", "2.5")
    assert code == 0 and err == ""
    priced = one_json(out)
    assert priced["cost"]["price_usd_per_gpu_hour"] == 2.5
    assert priced["time"]["gpu_hours"] == pytest.approx(doc["time"]["gpu_hours"], rel=1e-12)
    ratio = 2.5 / doc["cost"]["price_usd_per_gpu_hour"]
    assert priced["cost"]["usd"] == pytest.approx(doc["cost"]["usd"] * ratio, rel=1e-9)
    # energy and carbon do not depend on the price
    assert priced["cost"]["energy_kwh"] == pytest.approx(doc["cost"]["energy_kwh"], rel=1e-12)
    code, out, _ = run(capsys, *BASE, "--price", "$5")
    assert code == 0
    assert one_json(out)["cost"]["usd"] == pytest.approx(2 * priced["cost"]["usd"], rel=1e-9)


def test_inter_node_bw_in_bits(capsys):
    code, out, err = run(capsys, *BASE, "--inter-node-bw", "800Gb/s")
    assert code == 0 and err == ""
    assert one_json(out)["hardware"]["inter_node_bw_bytes_per_s"] == pytest.approx(1e11, rel=1e-12)


def test_intra_node_bw_in_bytes(capsys):
    code, out, err = run(capsys, *BASE, "--intra-node-bw", "150GB/s")
    assert code == 0 and err == ""
    assert one_json(out)["hardware"]["intra_node_bw_bytes_per_s"] == pytest.approx(
        1.5e11, rel=1e-12
    )


def test_slower_network_is_not_faster(capsys, doc):
    code, out, _ = run(capsys, *BASE, "--inter-node-bw", "1Gb/s", "--intra-node-bw", "1GB/s")
    assert code == 0
    assert one_json(out)["time"]["total_s"] >= doc["time"]["total_s"]


def test_pinned_layout_is_respected(capsys):
    code, out, err = run(
        capsys,
        *BASE,
        "--tp",
        "4",
        "--pp",
        "2",
        "--zero",
        "1",
        "--recompute",
        "selective",
        "--micro-batch",
        "1",
    )
    assert code == 0, err
    lay = one_json(out)["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"], lay["zero"], lay["recompute"], lay["micro_batch"]) == (
        4,
        2,
        256,
        1,
        "selective",
        1,
    )


def test_more_gpus_is_not_slower(capsys, doc):
    code, out, _ = run(capsys, *[a if a != "2048" else "4096" for a in BASE])
    assert code == 0
    assert one_json(out)["time"]["total_s"] < doc["time"]["total_s"]


# ------------------------------------------------------------------ the console script, for real


def test_console_script_json():
    proc = run_subprocess(*BASE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    d = one_json(proc.stdout)
    assert d["model"]["params_total"] == LLAMA2_13B_PARAMS


def test_console_script_bad_input():
    proc = run_subprocess("estimate", "--model", "lama2-7b", "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n")
    assert "Traceback" not in proc.stderr
    assert "llama2-7b" in proc.stderr


def test_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "trilemma.cli", "presets", "hardware"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": WIDE},
    )
    assert proc.returncode == 0 and proc.stderr == "" and "a100-80gb" in proc.stdout


# ------------------------------------------------------------------ bad input: status 2, one line


def assert_one_line_error(code: int, out: str, err: str, status: int = 2) -> str:
    assert code == status, (code, err)
    assert out == ""
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, repr(err)
    assert err.startswith("trilemma: error: ")
    assert len(err.strip()) > len("trilemma: error:")
    return err


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--model", "lama2-7b"], ["lama2-7b", "llama2-7b"]),
        (["--gpu", "a100-80"], ["a100-80", "a100-80gb"]),
        (["--tokens", "2Tx"], ["tokens", "2Tx"]),
        (["--gpus", "0"], ["gpus", "0"]),
        (["--gpus", "-4"], ["gpus", "-4"]),
        (["--gpus", "2.5"], ["gpus", "2.5"]),
        (["--gpus", "nan"], ["gpus"]),
        (["--gpus", "1e30"], ["gpus"]),
        (["--seq", "1e30"], ["seq"]),
        (["--tp", "0"], ["tp"]),
        (["--micro-batch", "0"], ["micro-batch"]),
        (["--precision", "fp7"], ["precision", "fp7"]),
        (["--precision", "fp8", "--gpu", "a100-80gb"], ["precision", "fp8"]),
        (["--zero", "5"], ["zero", "5"]),
        (["--recompute", "sometimes"], ["recompute", "sometimes"]),
        (["--intra-node-bw", "fast"], ["intra-node-bw", "fast"]),
        (["--inter-node-bw", "-1Gb/s"], ["inter-node-bw"]),
        (["--price", "-1"], ["price"]),
        (["--region", "mars"], ["region", "mars"]),
        (["--goodput", "1.5"], ["goodput"]),
        (["--goodput", "abc"], ["goodput"]),
        (["--pue", "0.5"], ["pue"]),
        (["--memory-headroom", "1.5"], ["memory-headroom", "1.5"]),
        (["--memory-headroom", "lots"], ["memory-headroom", "lots"]),
        (["--model", "/nonexistent/config.json"], ["/nonexistent/config.json"]),
        (["--frobnicate"], ["--frobnicate"]),
    ],
)
def test_bad_input(capsys, args, needles):
    err = assert_one_line_error(*run(capsys, "estimate", *args, "--json"))
    for n in needles:
        assert n in err, (n, err)


def test_illegal_layout_mentions_tp(capsys):
    err = assert_one_line_error(
        *run(capsys, "estimate", "--model", "llama2-7b", "--gpus", "64", "--tp", "3")
    )
    assert "tp" in err


def test_tp_that_divides_gpus_but_not_heads(capsys):
    err = assert_one_line_error(
        *run(capsys, "estimate", "--model", "llama2-7b", "--gpus", "48", "--tp", "3")
    )
    assert "tp" in err and "heads" in err


def test_layout_that_does_not_fit(capsys):
    err = assert_one_line_error(
        *run(
            capsys,
            "estimate",
            "--model",
            "llama2-70b",
            "--gpu",
            "a100-80gb",
            "--gpus",
            "8",
            "--tp",
            "1",
            "--pp",
            "1",
            "--zero",
            "0",
        )
    )
    assert "memory" in err
    low = err.lower()
    assert (
        "would work" in low
        or "no layout fits" in low
        or "no layout works" in low
        or "nothing fits" in low
    )


def test_pinned_layout_that_does_not_fit_suggests_one_that_does(capsys):
    err = assert_one_line_error(
        *run(
            capsys,
            "estimate",
            "--model",
            "llama2-13b",
            "--gpu",
            "a100-80gb",
            "--gpus",
            "64",
            "--tp",
            "1",
            "--pp",
            "1",
            "--zero",
            "0",
            "--tokens",
            "1T",
            "--seq",
            "4096",
        )
    )
    assert "memory" in err and "What would work" in err


def test_explicit_batch_that_no_layout_divides(capsys):
    # 4097 tokens at seq 4096 is one sequence; 16-way data parallelism cannot split it
    err = assert_one_line_error(
        *run(
            capsys,
            "estimate",
            "--model",
            "llama2-7b",
            "--gpus",
            "16",
            "--tp",
            "1",
            "--pp",
            "1",
            "--global-batch",
            "4097",
            "--seq",
            "4096",
            "--tokens",
            "1B",
        )
    )
    assert "batch" in err


def test_explicit_batch_is_kept_exactly(capsys):
    # 489 sequences of 4,096 = 2,002,944 tokens: kept as given (no rounding to a multiple of dp)
    code, out, err = run(
        capsys,
        "estimate",
        "--model",
        "llama2-7b",
        "--gpus",
        "64",
        "--tokens",
        "1B",
        "--seq",
        "4096",
        "--global-batch",
        "2002944",
        "--json",
    )
    assert code == 0, err
    stage = one_json(out)["batch"]["stages"][0]
    assert stage["global_batch_sequences"] == 489


def test_explicit_batch_not_whole_sequences_is_said_in_the_users_terms(capsys):
    """2,000,000 tokens at 4,096 per sequence is 488.28 sequences: the error says so and gives the two whole
    batches around it (488 × 4096 = 1,998,848; 489 × 4096 = 2,002,944), not a dp × micro-batch rule."""
    err = assert_one_line_error(
        *run(
            capsys,
            "estimate",
            "--model",
            "llama2-7b",
            "--gpus",
            "64",
            "--tokens",
            "1B",
            "--seq",
            "4096",
            "--global-batch",
            "2000000",  # a decimal prefix (2M) is a target rounded to whole sequences
        )
    )
    assert "2,000,000 tokens is 488.3 sequences" in err and "1,998,848 and 2,002,944 tokens" in err
    assert "dp × micro-batch" not in err


def test_vp_without_pp_says_why(capsys):
    err = assert_one_line_error(*run(capsys, "estimate", "--vp", "2", "--pp", "1"))
    assert "does not divide" not in err
    assert "virtual" in err or "vp" in err


def test_huge_global_batch_is_one_line():
    proc = run_subprocess("estimate", "--global-batch", "1e30")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_unknown_option_one_line(capsys):
    err = assert_one_line_error(*run(capsys, "estimate", "--frobnicate"))
    assert "frobnicate" in err


# ------------------------------------------------------------------ presets


def test_presets_json(capsys):
    code, out, err = run(capsys, "presets", "--json")
    assert code == 0 and err == ""
    d = one_json(out)
    assert isinstance(d["models"], list) and isinstance(d["hardware"], list)
    names = {m["name"] for m in d["models"]}
    assert {"llama2-7b", "llama2-13b", "llama2-70b"} <= names
    assert "a100-80gb" in {h["name"] for h in d["hardware"]}
    m13 = next(m for m in d["models"] if m["name"] == "llama2-13b")
    assert m13["params_total"] == LLAMA2_13B_PARAMS


@pytest.mark.parametrize("kind, present", [("models", "llama2-7b"), ("hardware", "a100-80gb")])
def test_presets_kinds(capsys, kind, present):
    code, out, err = run(capsys, "presets", kind)
    assert code == 0 and err == ""
    assert present in out


@pytest.mark.parametrize(
    "kind, key, other", [("models", "models", "hardware"), ("hardware", "hardware", "models")]
)
def test_presets_kind_json(capsys, kind, key, other):
    code, out, err = run(capsys, "presets", kind, "--json")
    assert code == 0 and err == ""
    d = one_json(out)
    assert d[key] and other not in d


@pytest.mark.parametrize("kind, present", [("models", "llama2-7b"), ("hardware", "a100-80gb")])
def test_presets_names_survive_a_pipe(kind, present):
    proc = run_subprocess("presets", kind, columns="80")
    assert proc.returncode == 0
    assert present in proc.stdout


def test_presets_unknown_kind(capsys):
    err = assert_one_line_error(*run(capsys, "presets", "gadgets"))
    assert "gadgets" in err


# ------------------------------------------------------------------ human output and help


def test_human_output(capsys):
    code, out, err = run(
        capsys, "estimate", "--model", "llama2-13b", "--gpus", "256", "--tokens", "1T"
    )
    assert code == 0 and err == ""
    assert "llama2-13b" in out


def test_human_output_subprocess():
    proc = run_subprocess("estimate", "--model", "llama2-7b", "--gpus", "64", "--tokens", "1T")
    assert proc.returncode == 0 and proc.stderr == ""
    assert "llama2-7b" in proc.stdout


def test_default_estimate_runs(capsys):
    # CI runs `trilemma estimate --json` on the embedded defaults
    code, out, err = run(capsys, "estimate", "--json")
    assert code == 0 and err == ""
    assert one_json(out)["schema"].startswith("trilemma.estimate/")


def test_help(capsys):
    code, out, err = run(capsys, "--help")
    assert code == 0 and "estimate" in out and err == ""
    code, out, err = run(capsys, "estimate", "--help")
    assert code == 0 and "--gpus" in out and err == ""


def test_no_command(capsys):
    code, out, err = run(capsys)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.strip() != "trilemma: error:"


def test_llama31_405b_as_meta_ran_it_and_any_gpu_count(capsys):
    """The issue's command: 126 layers on TP 8 × PP 16 (uneven first and last stages, Dubey et al. 2024
    §3.3.2) and a 16,777,216-token batch (2,048 sequences of 8,192) are accepted; 25,000 GPUs (DP not a
    power of two: 25,000 = 8 × 5 × 625) find a layout."""
    code, out, err = run(
        capsys,
        "estimate",
        "--model",
        "llama3.1-405b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "16384",
        "--tokens",
        "15.6T",
        "--seq",
        "8192",
        "--global-batch",
        "16777216",
        "--tp",
        "8",
        "--pp",
        "16",
        "--json",
    )
    assert code == 0, err
    doc = one_json(out)
    assert (doc["layout"]["tp"], doc["layout"]["pp"], doc["layout"]["dp"]) == (8, 16, 128)
    assert doc["batch"]["stages"][0]["global_batch_sequences"] == 2048
    code, out, err = run(
        capsys,
        "estimate",
        "--model",
        "llama3.1-405b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "25000",
        "--tokens",
        "15.6T",
        "--seq",
        "8192",
        "--json",
    )
    assert code == 0, err
    lay = one_json(out)["layout"]
    assert lay["tp"] * lay["pp"] * lay["cp"] * lay["dp"] == 25000


def test_a_batch_no_layout_splits_gets_batches_and_gpu_counts_that_would(capsys):
    """2,048 sequences over 25,000 GPUs: every data-parallel degree the layouts allow (25,000 / (tp·cp·pp))
    has a factor 5 that 2,048 = 2^11 lacks, so no layout divides the batch. The error says so in the
    user's terms and names batches and GPU counts that would, each of which is then accepted."""
    import re

    base = [
        "estimate",
        "--model",
        "llama3.1-405b",
        "--gpu",
        "h100-sxm",
        "--tokens",
        "15.6T",
        "--seq",
        "8192",
    ]
    code, out, err = run(capsys, *base, "--gpus", "25000", "--global-batch", "16777216")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert (
        "The 2,048-sequence batch (16,777,216 tokens) splits evenly over 25,000 GPUs in no layout"
        in err
    )
    batches = [int(b.replace(",", "")) for b in re.findall(r"([\d,]+) sequences \(", err)]
    gpus = [
        int(g.replace(",", "")) for g in re.search(r"--gpus ([\d,]+) or ([\d,]+)", err).groups()
    ]
    assert (
        len(batches) == 2
        and batches[0] < 2048 < batches[1]
        and all(abs(b - 2048) <= 205 for b in batches)
    )
    assert gpus[0] < 25000 < gpus[1]
    for b in batches:  # each suggested batch runs on the 25,000 GPUs ...
        code, out, err = run(
            capsys, *base, "--gpus", "25000", "--global-batch", str(b * 8192), "--json"
        )
        assert code == 0, err
        assert one_json(out)["batch"]["stages"][0]["global_batch_sequences"] == b
    for g in gpus:  # ... and each suggested GPU count with the 2,048 sequences
        code, out, err = run(
            capsys, *base, "--gpus", str(g), "--global-batch", "16777216", "--json"
        )
        assert code == 0, err


def test_a_partial_last_step_is_named_with_its_tokens(capsys):
    """400k tokens in batches of 128 × 2,048 = 262,144 tokens: 1.526 batches, so 2 optimizer steps, the last of
    400,000 − 262,144 = 137,856 tokens, and the busy time 400,000 / 262,144 step times (a short last batch, as
    PyTorch's DataLoader keeps it): a wall time of 2 steps that is under 2 step times is said, not hidden."""
    args = [
        "estimate",
        "--model",
        "llama2-7b",
        "--gpu",
        "a100-80gb",
        "--gpus",
        "8",
        "--finetune",
        "lora",
        "--tokens",
        "400k",
        "--seq",
        "2048",
    ]
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "2 steps (the last of 137.9k tokens)" in out
    code, out, _ = run(capsys, *args, "--json")
    t = json.loads(out)["time"]
    assert t["busy_s"] == pytest.approx(t["step_s"] * 400_000 / 262_144, rel=1e-9)
    # a long run says nothing of its last step
    code, out, _ = run(capsys, "estimate")
    assert "(the last of" not in out
