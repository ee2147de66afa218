"""Inputs a systematic pass over every verb found mishandled (a traceback, a segfault, a number printed for
nonsense, a flag silently dropped, the wrong flag blamed), each now refused in one line naming the flag and
the value, with exit status 2, before any long work; and the outputs that printed nonsense now read right."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from clitools import save_stated_cpu_profile
from test_hostile_corpus import LAW_OK  # the tests' folder is on the path (as for clitools)

from trilemma.cli import main
from trilemma.units import DAY, YEAR, fmt_duration, fmt_usd, parse_duration

SMALL = ["--gpus", "8", "--tokens", "1B"]
VALIDATE_HEADER = "model,metric,reported,gpu,n_gpus,model_preset,seq_len,global_batch,precision,tp,pp,dp,micro_batch,source"
VALIDATE_ROW = "my 7B,step_s,5.5,h100-sxm,16,llama2-7b,4096,64,bf16,2,1,8,8,our cluster"
RAGGED_LAW = (
    LAW_OK
    + """
[uncertainty]
kind = "samples"
level = 0.8
params = ["E", "A", "B", "alpha", "beta"]
samples = [[1.0, 1.0, 2.0], [1.8, 480.0, 2000.0, 0.35, 0.37]]
"""
)


@pytest.fixture(scope="module", autouse=True)
def config_dir(tmp_path_factory):
    """A config directory of the tests' own, holding a stated `local` CPU profile: the refusals that name
    `local` must not depend on this machine's user having run the probe, and no test reads their profiles."""
    cfg = tmp_path_factory.mktemp("config")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRILEMMA_CONFIG_DIR", str(cfg))
        save_stated_cpu_profile()
        yield cfg


def _files(root: Path) -> dict[str, Path]:
    files = {
        "header_only.csv": VALIDATE_HEADER + "\n",
        "doubled.csv": VALIDATE_HEADER.replace("source", "model") + "\n" + VALIDATE_ROW + "\n",
        "short_row.csv": VALIDATE_HEADER + "\n" + VALIDATE_ROW.rsplit(",", 1)[0] + "\n",
        "ok.csv": VALIDATE_HEADER + "\n" + VALIDATE_ROW + "\n",
        "ragged.law.toml": RAGGED_LAW,
    }
    out = {}
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
        out[name] = root / name
    return out


CASES = [
    # a traceback before: KeyError 'finetune'
    (["validate", "--data", "{ok.csv}", "--kind", "finetune"], "kind", "finetune"),
    # a traceback before: numpy's inhomogeneous-shape ValueError
    (["estimate", *SMALL, "--law", "{ragged.law.toml}"], "law", "uncertainty.samples"),
    # silently accepted before
    (["validate", "--data", "{header_only.csv}"], "--data", "header only"),
    (["validate", "--data", "{doubled.csv}"], "columns", "each column once"),
    (["validate", "--data", "{short_row.csv}"], "row 1", "13 cells"),
    (["validate", "--csv", ""], "csv", "file path"),
    (
        ["estimate", "--model", "llama2-7b", *SMALL, "--finetune", "lora", "--lora-rank", "5000"],
        "lora-rank",
        "at most 4,096",
    ),
    (
        ["estimate", "--model", "llama3-8b", *SMALL, "--finetune", "lora", "--lora-rank", "1025"],
        "lora-rank",
        "at most 1,024, the narrower side of k_proj",
    ),
    (
        ["estimate", "--model", "gpt2-124m", *SMALL, "--seq", "2048"],
        "seq",
        "1,024 learned positions",
    ),
    (
        ["estimate", "--model", "bert-base", *SMALL, "--seq", "100000"],
        "seq",
        "512 learned positions",
    ),
    (["estimate", *SMALL, "--context", "4k"], "context", "--deploy"),
    (["estimate", *SMALL, "--deploy-precision", "int8"], "deploy-precision", "--deploy"),
    (["estimate", *SMALL, "--export", "foo"], "export", "torchtitan"),
    (
        ["estimate", *SMALL, "--no-flash", "--softmax-passes", "0"],
        "softmax-passes",
        "from 1 (a fused softmax) to 16",
    ),
    (
        ["estimate", *SMALL, "--no-flash", "--softmax-passes", "two"],
        "softmax-passes: 'two' is not allowed",
        "a whole number",
    ),
    (
        ["export", "--to", "megatron", "estimate", "--gpu", "tpu-v4", *SMALL],
        "hardware tpu-v4",
        "JAX",
    ),
    (["solve", "--deadline", "30d", "--budget", "2M", "--gpu", ""], "gpu", "hardware preset"),
    (
        [
            "solve",
            "--deadline",
            "30d",
            "--budget",
            "2M",
            "--gpu",
            "a100-80gb",
            "--precision",
            "fp8",
        ],
        "precision",
        "a100-80gb: bf16, fp16, fp32, tf32",
    ),
    (
        ["solve", "--deadline", "30d", "--budget", "2M", "--gpu", "local"],
        "precision",
        "local: fp32",
    ),
    (["solve", "--deadline", "30d", "--budget", "0"], "budget", "a positive budget"),
    (
        [
            "solve",
            "--deadline",
            "30d",
            "--budget",
            "2M",
            "--model",
            "llama2-7b",
            "--params",
            "1B..7B",
        ],
        "params",
        "no range with --model",
    ),
    (
        ["solve", "--deadline", "30d", "--budget", "2M", "--plot-range", "full"],
        "plot-range",
        "--plot",
    ),
    (["solve", "--deadline", "30d", "--budget", "2M", "--frontier", ""], "frontier", "file path"),
    (["serve", "--host", ""], "host", "address"),
    (["serve", "--host", "999.1.1.1", "--port", "18777"], "host", "resolves"),
    # second pass: values whose results overflowed to inf, empty strings taken for the default, ignored input
    (["estimate", *SMALL, "--price", "1e308"], "price", "at most $10,000"),
    (["estimate", *SMALL, "--host-power", "1e308W"], "host-power", "at most 1 MW"),
    (["estimate", *SMALL, "--inter-node-bw", "1e-300GB/s"], "inter-node-bw", "1 MB/s to 1 PB/s"),
    (["estimate", *SMALL, "--law", ""], "law", "leave --law out"),
    (["optimal", "--flops", "1e23", "--law", ""], "law", "leave --law out"),
    (["solve", "--deadline", "30d", "--budget", "2M", "--minimize", ""], "minimize", "time, cost"),
    (["solve", "--deadline", "30d", "--budget", "2M", "--task", ""], "task", "causal-lm"),
    (
        ["solve", "--deadline", "30d", "--budget", "2M", "--task", "classification"],
        "task",
        "no loss corner",
    ),
    (
        ["estimate", *SMALL, "--deploy", "iphone-15-pro", "--deploy-precision", ""],
        "deploy-precision",
        "int4",
    ),
    (
        [
            "solve",
            "--deadline",
            "3d",
            "--budget",
            "100k",
            "--gpu",
            "a100-80gb",
            "--price",
            "h100-sxm=2",
        ],
        "price",
        "a GPU type searched",
    ),
    (
        [
            "solve",
            "--deadline",
            "3d",
            "--budget",
            "100k",
            "--gpu",
            "a100-80gb",
            "--price",
            "a100-80gb=2",
            "--price",
            "a100-80gb=3",
        ],
        "price",
        "given twice",
    ),
    (["optimal", "--loss", "1e308"], "loss", "at most 20"),
    (["solve", "--target-loss", "100", "--budget", "$1M"], "target-loss", "at most 20"),
    (
        ["estimate", "--gpus", "64", "--global-batch", "4000000"],
        "global-batch: ",
        "4,096-token sequences",
    ),
    (["estimate", "--gpus", "64", "--tokens", "1e19"], "tokens: ", "1000000000000000000"),
    (
        ["estimate", "--gpus", "64", "--tokens", "10B", "--memory-headroom", "0.97"],
        "memory",
        "97% headroom, set by --memory-headroom",
    ),
    (
        [
            "export",
            "--to",
            "deepspeed",
            "estimate",
            "--model",
            "llama3-8b",
            "--gpu",
            "h100-sxm",
            "--gpus",
            "8",
            "--tokens",
            "100M",
            "--finetune",
            "freeze",
            "--trainable-layers",
            "4",
            "--no-sp",
        ],
        "fine-tune freeze",
        "frozen-layer switch",
    ),
    # the value as typed, in the words of every other refusal (click named the flag only)
    (["estimate", "--pue", "abc"], "pue: 'abc' is not allowed", "a number"),
    (["serve", "--port", "abc"], "port: 'abc' is not allowed", "a whole number"),
]


@pytest.mark.parametrize(
    "args, field, needle", CASES, ids=lambda v: " ".join(v)[:60] if isinstance(v, list) else None
)
def test_refused_in_one_line_with_exit_2(tmp_path, capsys, args, field, needle):
    files = _files(tmp_path)
    argv = [str(files[a[1:-1]]) if a.startswith("{") else a for a in args]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith("trilemma: error: ") and err.count("\n") == 1, err
    assert field in err and needle in err, err
    assert "Traceback" not in err and out == ""


def test_probe_checks_its_output_path_and_threads_before_training(tmp_path, capsys):
    """`probe --out FOLDER` trained the whole run, then died writing (IsADirectoryError); `--threads 99999`
    crashed the interpreter (SIGSEGV). Both are refused before a model is built."""
    pytest.importorskip("torch")
    assert main(["probe", "--out", str(tmp_path), "--steps", "2", "--warmup", "0"]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert (
        main(
            [
                "probe",
                "--out",
                str(tmp_path / "no" / "such" / "dir.jsonl"),
                "--steps",
                "2",
                "--warmup",
                "0",
            ]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    assert main(["probe", "--threads", "99999", "--steps", "2", "--warmup", "0"]) == 2
    assert "threads: 99999" in capsys.readouterr().err


def test_ladder_dry_run_checks_the_plot_path(tmp_path, capsys):
    """A bad --plot was accepted by --dry-run and refused by the real run a minute later."""
    assert (
        main(
            ["ladder", "--out", str(tmp_path / "lad"), "--dry-run", "--plot", "/nonexistent/x.png"]
        )
        == 2
    )
    assert "plot" in capsys.readouterr().err
    assert main(["ladder", "--out", "", "--dry-run"]) == 2


def test_a_loss_above_a_uniform_guess_is_flagged_not_presented(capsys):
    """One unique token repeated 1e10 times: the law's repetition term runs away (1,907 nats/token). A
    uniform guess over llama2-7b's 32,000 tokens scores ln 32000 = 10.37, which no trained model does worse
    than: the estimate says so, and that the effective model is below the law's data."""
    assert main(["estimate", "--model", "llama2-7b", *SMALL, "--unique-tokens", "1", "--json"]) == 0
    loss = json.loads(capsys.readouterr().out)["loss"]
    assert loss["mean"] > math.log(32000)
    assert any("uniform guess" in w and "10.373" in w for w in loss["warnings"])
    assert any("below the smallest model" in w for w in loss["warnings"])
    # a sane plan carries neither
    assert (
        main(["estimate", "--model", "llama2-7b", "--gpus", "8", "--tokens", "100B", "--json"]) == 0
    )
    loss = json.loads(capsys.readouterr().out)["loss"]
    assert loss["mean"] < math.log(32000)
    assert not any("uniform guess" in w or "below the smallest" in w for w in loss["warnings"])


def test_money_and_time_keep_their_units_at_any_size():
    assert (
        fmt_usd(2.5e9) == "$2.50B" and fmt_usd(5e12) == "$5.00T" and fmt_usd(2.79e17) == "$2.79e+17"
    )
    assert fmt_usd(1.5e6) == "$1.50M"  # unchanged below a billion
    assert (
        fmt_duration(3 * YEAR) == "3.0 years" and fmt_duration(1e30) == f"{1e30 / YEAR:.3g} years"
    )
    assert fmt_duration(30 * DAY) == "30.0 days"


def test_duration_units_in_any_case_but_an_ambiguous_capital_m():
    assert parse_duration("30D") == 30 * DAY and parse_duration("2 Weeks") == 14 * DAY
    with pytest.raises(ValueError, match="unambiguous"):
        parse_duration("1M")  # minutes or months


def test_a_classifier_gets_no_loss_corner(capsys):
    """The laws predict a causal LM's next-token loss; `--task classification` printed one for a classifier."""
    assert (
        main(["estimate", "--model", "bert-large", "--task", "classification", *SMALL, "--json"])
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d.get("loss") is None and any("no loss for a classifier" in w for w in d["warnings"])


def test_validate_skips_a_row_estimate_refuses(tmp_path, capsys):
    """A row of gpt2-124m at 8,192 tokens (1,024 learned positions) was evaluated; it is skipped with the reason."""
    f = tmp_path / "pos.csv"
    f.write_text(
        VALIDATE_HEADER
        + "\n"
        + "g,step_s,0.5,h100-sxm,8,gpt2-124m,8192,64,bf16,1,1,8,8,x\n"
        + VALIDATE_ROW
        + "\n",
        encoding="utf-8",
    )
    assert main(["validate", "--data", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["rows"]) == 1 and any("learned positions" in s["reason"] for s in d["skipped"])


def test_serve_refuses_a_port_in_use(capsys):
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"port: {port}" in err


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"hardware": None}, "gpu"),
        ({"hardware": 5}, "gpu"),
        ({"model": None}, "model"),
        ({"tokens": "x"}, "tokens"),
        ({"precision": "nope"}, "precision"),
        ({"seq_len": 0}, "seq"),
        ({"law": 5}, "law"),
        ({"layout": "tp2"}, "layout"),
        ({"cluster": [1]}, "cluster"),
        ({"plan": "x"}, "plan"),
        ({"n_gpus": True}, "gpus"),
    ],
)
def test_python_api_refuses_wrong_types_naming_the_argument(kwargs, field):
    """The Python API raised AttributeError / TypeError from deep inside for these; now InputError (a
    ValueError) naming the argument, as the CLI does."""
    from trilemma.api import estimate
    from trilemma.errors import InputError

    args = {"model": "llama2-7b", "hardware": "a100-80gb", "n_gpus": 8, "tokens": 1e9, **kwargs}
    with pytest.raises(InputError) as exc:
        estimate(
            args.pop("model"), args.pop("hardware"), args.pop("n_gpus"), args.pop("tokens"), **args
        )
    assert exc.value.field == field


def test_python_api_takes_counts_as_text_and_any_case():
    from trilemma.api import estimate

    e = estimate(
        "llama2-7b",
        "a100-80gb",
        8,
        "10B",
        precision="BF16",
        global_batch_tokens="4194304",
        seq_len=4096,
    )
    assert e.plan.total_tokens == 10e9 and str(e.plan.precision) == "bf16"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"gpu": 5}, "gpu"),
        ({"gpu": [5]}, "gpu"),
        ({"precision": 5}, "precision"),
        ({"seq_len": -5}, "seq"),
        ({"params": 7}, "params"),
        ({"params": (7e9,)}, "params"),
        ({"prices": [1]}, "prices"),
        ({"prices": {"a100-80gb": "x"}}, "prices"),
        ({"prices": {"a100-80gb": -2}}, "prices"),
        ({"layout": "x"}, "layout"),
        ({"finetune": [1]}, "finetune"),
        ({"minimize": 5}, "minimize"),
    ],
)
def test_solve_python_api_refuses_wrong_types_naming_the_argument(kwargs, field):
    from trilemma.errors import InputError
    from trilemma.solve import solve

    with pytest.raises(InputError) as exc:
        solve(**{"deadline": "30d", "budget": "2M", "gpu": "a100-80gb", "max_gpus": 64, **kwargs})
    assert exc.value.field == field


def test_python_api_export_and_deploy_refuse_wrong_types():
    from trilemma import api
    from trilemma.errors import InputError

    e = api.estimate("llama2-7b", "a100-80gb", 8, 1e9)
    for call, field in (
        (lambda: api.export(None, "megatron"), "plan"),
        (lambda: api.export("x", "megatron"), "plan"),
        (lambda: api.export(e, "hf", finetune="lora"), "finetune"),
        (lambda: api.with_deploy(None, "iphone-15-pro"), "estimate"),
        (lambda: api.with_deploy(e, "iphone-15-pro", "int4", 4096.5), "context"),
        (lambda: api.with_loss(None), "estimate"),
    ):
        with pytest.raises(InputError) as exc:
            call()
        assert exc.value.field == field
    assert api.with_deploy(e, "iphone-15-pro", "int4", "4k").deploy is not None


def test_validate_prints_an_absurd_reported_value_in_a_readable_form(tmp_path, capsys):
    """A user's row reporting 1e300 s per step (finite, so a backtest row) is printed as 1.000e+300, not as
    301 grouped digits that fill the terminal."""
    f = tmp_path / "absurd.csv"
    f.write_text(
        VALIDATE_HEADER + "\n" + VALIDATE_ROW.replace("step_s,5.5", "step_s,1e300") + "\n",
        encoding="utf-8",
    )
    assert main(["validate", "--data", str(f)]) == 0
    out = capsys.readouterr().out
    assert "1.000e+300" in out and "000,000,000,000" not in out
