"""On-device deployment: memory and speed by hand, the published decode rows, the CLI."""

from __future__ import annotations

import json

import pytest
from clitools import run

from trilemma.estimate.deploy import DEPLOY_BITS, decode_bytes_per_token, deploy, kv_cache_bytes
from trilemma.presets import deploy_efficiency, device_presets, get_device, get_format, get_runtime
from trilemma.validate.ondevice import fit, pooled, rows, summary


def test_memory_and_speed_by_hand():
    # Llama-2-7B (6,738,415,616 params, 32 layers, KV width 4,096, untied 32,000 × 4,096 input table) at int4:
    # 4 bits + one fp16 scale per 32 = 4.5 bits; KV cache at 4,096 tokens: 2 × 32 × 4,096 × 4,096 × 2 bytes
    assert DEPLOY_BITS["int4"] == 4.5 and DEPLOY_BITS["int8"] == 8.5
    assert kv_cache_bytes(32, 4096, 4096) == 2 * 32 * 4096 * 4096 * 2
    phone = get_device("iphone-15-pro")
    rt = get_runtime("llamacpp-metal").replace(bandwidth_share=0.5, per_token_s=0.002)
    eff = deploy_efficiency()
    d = deploy(
        6_738_415_616,
        6_738_415_616 - 131_072_000,
        32,
        4096,
        phone,
        get_format("int4"),
        4096,
        eff,
        rt,
    )
    assert d.weights_bytes == 6_738_415_616 * 4.5 / 8
    per_token = (6_738_415_616 - 131_072_000) * 4.5 / 8 + 2 * 32 * 4096 * 4096 * 2
    # time per token = bytes / (share × 51.2 GB/s) + the fixed 2 ms
    assert d.decode_tokens_per_s == pytest.approx(
        1 / (per_token / (0.5 * 51.2e9) + 0.002), rel=1e-12
    )
    assert d.energy_per_token_j == pytest.approx(phone.power_w / d.decode_tokens_per_s, rel=1e-12)
    # prefill of 4,096 tokens on the GPU: 2 FLOP per weight read per token at the share of 4.3 TFLOPS
    n = 6_738_415_616 - 131_072_000
    assert d.prefill_tokens_per_s == pytest.approx(rt.prefill_share * 4.3e12 / (2 * n), rel=1e-12)
    # fits ⇔ weights + KV ≤ usable × (1 − runtime share); the margin says by how much
    assert d.fits == (d.margin_bytes >= 0)
    assert d.margin_bytes == pytest.approx(
        phone.usable_bytes * (1 - eff["runtime_share"]) - d.weights_bytes - d.kv_cache_bytes
    )
    # a longer context reads more KV per token: slower, never faster
    assert decode_bytes_per_token(1e9, 4.5, 16, 512, 8192) > decode_bytes_per_token(
        1e9, 4.5, 16, 512, 1024
    )


def test_usable_memory_is_less_than_ram():
    # macOS Metal: 2/3 of RAM up to 32 GB (10,922.67 MB on 16 GB, llama-cpp-python#687); iPhone 15 Pro: 6 GB of 8
    for dev in device_presets().values():
        assert 0 < dev.usable_bytes < dev.ram_bytes, dev.name
        get_runtime(dev.runtime)  # every device's own runtime is a preset
    assert get_device("macbook-pro-m1-pro-16gb").usable_bytes / 2**20 == pytest.approx(
        10922.67, abs=0.01
    )


def test_ggml_block_rates():
    # ggml-common.h: block_q2_K 84 B, block_q3_K 110 B, block_q4_K 144 B per 256 weights; block_q4_0 18 B per 32
    assert get_format("q2_k").bits_per_weight == 84 * 8 / 256
    assert get_format("q3_k_m").bits_per_weight == 110 * 8 / 256
    assert get_format("q4_k_m").bits_per_weight == 144 * 8 / 256
    assert get_format("q4_0").bits_per_weight == 18 * 8 / 32


def test_published_rows_held_out_by_row_source_and_runtime():
    """The on-device floors, held out three ways (trilemma validate --kind ondevice). Decode: ≥ 60 published
    rows from ≥ 6 runtimes at ≤ 20% median error, prefill ≥ 20 rows at ≤ 35%, leaving one row, one source or
    one runtime out (a runtime without rows takes the pooled fit of its unit). The rows listed with a skip
    reason (one GPU whose setup the source does not describe) are held out with the rest and printed beside.
    Fits right on every row."""
    s = summary()
    assert s["measured_rows"] >= 60 and len(s["runtimes"]) >= 6 and s["sources"] < s["rows"]
    assert s["prefill_rows"] >= 20
    # the floors themselves, each way of holding out (decode ≤ 20%, prefill ≤ 35%), not the figures printed
    for how in ("leave_one_out", "leave_one_source_out", "leave_one_runtime_out"):
        assert s[how]["decode"]["median_abs_error"] <= 0.20, how
        assert s[how]["prefill"]["median_abs_error"] <= 0.35, how
    skipped = s["leave_one_out_with_skipped"]
    assert (
        skipped["rows"] > s["leave_one_out"]["decode"]["rows"]
    )  # the skipped rows are added, not lost
    assert 0 < skipped["median_abs_error"] < 1
    assert s["fits_right"] == s["rows"]
    assert any(r["fits"] == "no" for r in rows())  # the verdict is tested both ways
    assert {get_device(r["device"]).kind for r in rows()} >= {"phone", "laptop", "desktop-gpu"}


def test_shipped_constants_are_the_fit():
    fitted, pool = fit(), pooled(rows())
    for name, v in fitted.items():
        rt = get_runtime(name)
        assert rt.fit_rows == v["rows"], name
        if rt.ceiling_bound:  # its ceiling, bytes/s (4 significant digits written)
            ceiling = v["bandwidth_ceiling_bytes_per_s"]
            assert rt.bandwidth_ceiling_bytes_per_s == pytest.approx(ceiling, rel=1e-3), name
            continue
        assert rt.bandwidth_share == pytest.approx(v["bandwidth_share"], abs=5e-4), name
        assert rt.per_token_s == pytest.approx(v["per_token_s"], abs=5e-5), name
        if "prefill_share" in v:
            assert rt.prefill_share == pytest.approx(v["prefill_share"], abs=5e-4), name
    eff = deploy_efficiency()
    for unit, v in pool.items():
        for k, x in v.items():
            assert eff["pooled"][unit][k] == pytest.approx(x, rel=1e-3, abs=5e-4), (unit, k)
    # the band an estimate prints is the held-out one (by row; by runtime for a runtime without rows)
    s = summary()
    assert (eff["band_low"], eff["band_high"]) == pytest.approx(
        s["leave_one_out"]["decode"]["band"], abs=5e-4
    )
    assert (eff["band_low_loro"], eff["band_high_loro"]) == pytest.approx(
        s["leave_one_runtime_out"]["decode"]["band"], abs=5e-4
    )


def test_cli_deploy_json_and_bad_input(capsys):
    code, out, err = run(
        capsys,
        "estimate",
        "-m",
        "llama2-7b",
        "-g",
        "h100-sxm",
        "-n",
        "64",
        "-t",
        "10B",
        "--deploy",
        "rtx-4090",
        "--deploy-precision",
        "int8",
        "--context",
        "2k",
        "--json",
    )
    assert code == 0 and err == ""
    doc = json.loads(out)
    d = doc["deploy"]
    assert (
        d["device"] == "rtx-4090"
        and d["precision"] == "int8"
        and d["context"] == 2048
        and d["fits"]
    )
    assert d["weights_bytes"] == pytest.approx(6_738_415_616 * 8.5 / 8)
    for args, field in (
        (["--deploy", "no-such-phone"], "no-such-phone"),
        (["--deploy", "rtx-4090", "--deploy-precision", "int3"], "deploy-precision"),
        (["--deploy", "rtx-4090", "--context", "-5"], "context"),
    ):
        code, out, err = run(
            capsys, "estimate", "-m", "llama2-7b", "-g", "h100-sxm", "-n", "64", "-t", "10B", *args
        )
        assert code == 2 and field in err and "Traceback" not in err


def test_solve_deploy_pin_and_inference_aware(capsys):
    # the deployment floor: solve --deploy <a phone> --min-tokens-per-s 10 returns a model that fits there with margin and
    # meets the rate; with --inference-tokens 10T (Sardana et al. 2023) a smaller model trained on more tokens
    args = (
        "solve",
        "--deadline",
        "14d",
        "--target-loss",
        "2.3",
        "--minimize",
        "cost",
        "--params",
        "100M..3B",
        "--gpu",
        "h100-sxm",
        "--max-gpus",
        "64",
        "--deploy",
        "iphone-15-pro",
        "--min-tokens-per-s",
        "10",
        "--json",
    )
    docs = []
    for extra in ((), ("--inference-tokens", "10T")):
        code, out, err = run(capsys, *args, *extra)
        assert code == 0 and err == ""
        docs.append(json.loads(out))
    for d in docs:
        dep = d["optimum"]["deploy"]
        assert dep["fits"] and dep["margin_bytes"] > 0 and dep["decode_tokens_per_s"] >= 10
    plain, served = (d["optimum"] for d in docs)
    assert served["model"]["params_total"] < plain["model"]["params_total"]
    assert served["batch"]["tokens"] > plain["batch"]["tokens"]
    life = docs[1]["lifetime"]
    assert life["lifetime_usd"] == pytest.approx(life["training_usd"] + life["serving_usd"])
    # served on the phone, not at datacentre $/FLOP: the phone's 5 W draw (devices.toml) × the time of one chat
    # answer (LMSYS-Chat-1M: 69.5 prompt + 214.5 reply tokens) at the optimum's printed rates, × 10T / 284 answers,
    # at EIA's 2023 US residential 16.00 cents per kWh
    dep = served["deploy"]
    answer_s = 69.5 / dep["prefill_tokens_per_s"] + 214.5 / dep["decode_tokens_per_s"]
    kwh = 10e12 / (69.5 + 214.5) * 5.0 * answer_s / 3.6e6
    assert life["serving_energy_kwh_on_device"] == pytest.approx(kwh, rel=1e-9)
    assert life["serving_usd"] == pytest.approx(0.16 * kwh, rel=1e-9)
    assert "devices themselves are not priced" in life["convention"]
    # no size decodes 1,000 tokens/s on a phone: infeasible (exit 1), and the reason names the device
    code, out, err = run(capsys, *args[:-2], "1000")
    assert code == 1 and "iphone-15-pro" in (out + err)


def test_bad_deploy_and_empty_lora_targets_name_their_flags(capsys):
    """An unknown --deploy names the flag (not an internal 'device'), and an empty --lora-targets is refused
    instead of silently taking the default modules."""
    from clitools import run

    code, out, err = run(
        capsys,
        "estimate",
        "--model",
        "llama2-7b",
        "--gpus",
        "8",
        "--tokens",
        "1B",
        "--deploy",
        "nope",
    )
    assert (
        code == 2 and out == "" and err.startswith("trilemma: error: deploy: unknown preset 'nope'")
    )
    code, out, err = run(
        capsys,
        "estimate",
        "--model",
        "llama2-7b",
        "--gpus",
        "8",
        "--tokens",
        "1B",
        "--finetune",
        "lora",
        "--lora-targets",
        "",
    )
    assert code == 2 and err.startswith("trilemma: error: lora-targets:")


def test_device_serving_dollars_by_hand(capsys):
    """Serving on the users' devices at their electricity price (trilemma.solve.ondevice): 10T tokens as chat
    answers of 69.5 + 214.5 tokens (LMSYS-Chat-1M) at 31.6 J each and $0.16/kWh: 10e12 / 284 = 3.5211e10 answers ×
    31.6 J = 1.11268e12 J = 309,076.7 kWh → $49,452.3. --device-kwh out of range, or without --deploy, is one line
    naming the flag, exit 2, from the CLI and the Python API alike."""
    from clitools import run

    from trilemma.errors import InputError
    from trilemma.solve import solve
    from trilemma.solve.ondevice import device_serving_kwh, device_serving_usd

    assert device_serving_kwh(10e12, 31.6) == pytest.approx(309_076.7, rel=1e-6)
    assert device_serving_usd(10e12, 31.6, 0.16) == pytest.approx(49_452.3, rel=1e-6)
    base = ("solve", "--deadline", "14d", "--target-loss", "2.3", "--params", "1B")
    for extra, allowed in (
        (("--deploy", "iphone-15-pro", "--device-kwh", "0"), "above 0, at most 10"),
        (("--deploy", "iphone-15-pro", "--device-kwh", "11"), "above 0, at most 10"),
        (("--device-kwh", "0.2"), "with --deploy DEVICE"),
    ):
        code, out, err = run(capsys, *base, *extra)
        assert code == 2 and err.startswith("trilemma: error: device-kwh: ") and allowed in err
        assert err.count("\n") == 1
    for kw in ({"deploy": "iphone-15-pro", "device_usd_per_kwh": -1}, {"device_usd_per_kwh": 0.2}):
        with pytest.raises(InputError, match="device-kwh"):
            solve(deadline="14d", target_loss=2.3, params="1B", **kw)
