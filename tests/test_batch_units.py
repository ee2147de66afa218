"""The global batch in tokens or sequences, and the batch as a lever in ``estimate``.

Units: ``4Mi`` is 2^22 = 4,194,304 tokens (IEC binary prefix), ``1024seq`` is 1,024 sequences, ``4M`` is
4,000,000 tokens, which at 4,096 tokens per sequence is 976.5625 sequences: a target rounded to whole
sequences with a note, as published batches are printed (Llama 2's 4,194,304 as "4M": Touvron et al.
2023, arXiv 2307.09288, Table 1 and §2.2). The hint: a large MoE at the reported GPT-4 scale (about 1.8T
parameters, 16 experts, 2 routed per token, 120 layers: SemiAnalysis, "GPT-4 Architecture", July 2023)
on 25,000 A100s at a 4M-token batch spends most of each step in the pipeline bubble and the DP
reduction; the named batch must cut that share under the stated threshold and raise the MFU.
"""

from __future__ import annotations

import json
import re

import pytest
from clitools import run

from trilemma.api import estimate
from trilemma.errors import InputError
from trilemma.quality.batch import (
    NEAR_OPTIMAL_FACTOR,
    non_embedding_flop_per_token,
    optimal_batch_tokens,
)
from trilemma.quality.batch_hint import OVERHEAD_SHARE, overhead_share
from trilemma.request import EstimateRequest
from trilemma.units import parse_batch

SEQ = 4096


@pytest.mark.parametrize(
    ("text", "tokens", "exact"),
    [
        ("4Mi", 2**22, True),  # 4 × 1,048,576
        ("1024seq", 1024 * SEQ, True),
        ("1024 seqs", 1024 * SEQ, True),
        ("1k sequences", 1000 * SEQ, True),
        ("4,194,304", 4_194_304, True),
        ("4194304 tokens", 4_194_304, True),
        ("4M", 977 * SEQ, False),  # round(4e6 / 4096) = round(976.5625) = 977 sequences
        ("8.192M", 8_192_000, True),  # 2,000 sequences exactly: no rounding
    ],
)
def test_batch_units_in_tokens_at_seq_4096(text, tokens, exact):
    got, is_exact, note = parse_batch(text).at(SEQ)
    assert (got, is_exact) == (tokens, exact)
    assert (note is None) == exact


@pytest.mark.parametrize("text", ["4Mx", "4Bi", "1.5seq", "0", "-4M", "seq", "4M4"])
def test_bad_batch_units_are_refused_naming_the_flag(text):
    with pytest.raises(InputError, match=r"^global-batch: "):
        parse_batch(text)


def _json(capsys, *args):
    code, out, err = run(capsys, "estimate", "--gpus", "64", "--tokens", "10B", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_decimal_4m_at_seq_4096_is_accepted_with_a_note(capsys):
    doc = _json(capsys, "--global-batch", "4M", "--seq", "4096")
    stage = doc["batch"]["stages"][0]
    assert stage["global_batch_sequences"] % 64 == 0  # rounded to a multiple of dp (64 GPUs here)
    assert abs(stage["global_batch_sequences"] - 977) <= 0.1 * 977  # the layout's tolerance
    assert any("976.6 sequences" in w and "977 sequences" in w for w in doc["warnings"])


def test_binary_and_sequence_batches_are_the_same_exact_batch(capsys):
    a = _json(capsys, "--global-batch", "4Mi", "--seq", "4096")
    b = _json(capsys, "--global-batch", "1024seq", "--seq", "4096")
    sa, sb = (d["batch"]["stages"][0] for d in (a, b))
    assert sa["global_batch_sequences"] == sb["global_batch_sequences"] == 1024
    assert not any("sequences of 4,096" in w for w in a["warnings"] + b["warnings"])


def test_request_and_python_api_take_sequences():
    req = EstimateRequest(gpus=64, tokens="10B", seq="4k", **{"global-batch": "512seq"})
    est = estimate(req)
    py = estimate("llama2-7b", "a100-80gb", 64, 1e10, seq_len=4096, global_batch_tokens="512seq")
    assert est.stages[0].global_batch_sequences == py.stages[0].global_batch_sequences == 512


MOE = {  # a Mixtral-format config at the reported GPT-4 scale (see the module's docstring)
    "model_type": "mixtral",
    "architectures": ["MixtralForCausalLM"],
    "hidden_size": 10240,
    "intermediate_size": 29440,
    "num_hidden_layers": 120,
    "num_attention_heads": 80,
    "num_key_value_heads": 8,
    "vocab_size": 100352,
    "max_position_embeddings": 8192,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
}


@pytest.fixture(scope="module")
def moe_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("moe") / "config.json"
    path.write_text(json.dumps(MOE), "utf-8")
    return str(path)


def test_moe_estimate_names_a_batch_that_raises_mfu(moe_config):
    base = dict(tokens=13e12, seq_len=8192)
    est = estimate(moe_config, "a100-80gb", 25_000, **base)
    assert overhead_share(est) > OVERHEAD_SHARE  # the default 4M-token batch: the hint's premise
    hint = next(w for w in est.warnings if w.startswith("batch: "))
    seqs = int(re.search(r"--global-batch (\d+)seq", hint).group(1))
    better = estimate(moe_config, "a100-80gb", 25_000, **base, global_batch_tokens=f"{seqs}seq")
    assert better.time.mfu > est.time.mfu
    assert overhead_share(better) <= OVERHEAD_SHARE
    # within the batch law's near-optimal band (the law solve sizes batches by)
    law = optimal_batch_tokens(non_embedding_flop_per_token(est.model, 8192) * 13e12)
    assert seqs * 8192 <= NEAR_OPTIMAL_FACTOR * law
    assert "DeepSeek LLM" in hint and "predicted loss cost at most 0.25%" in hint


def test_no_hint_when_the_overhead_is_small():
    est = estimate("llama2-7b", "a100-80gb", 64, 1e10)
    assert overhead_share(est) <= OVERHEAD_SHARE
    assert not any(w.startswith("batch: ") for w in est.warnings)


def test_no_hint_for_a_batch_the_user_gave(moe_config):
    est = estimate(
        moe_config, "a100-80gb", 25_000, 13e12, seq_len=8192, global_batch_tokens="500seq"
    )
    assert not any(w.startswith("batch: ") for w in est.warnings)


def test_the_web_api_and_a_scenario_take_sequences(capsys, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trilemma.web import app as web

    body = {"gpus": 64, "tokens": "10B", "seq": "4k", "global-batch": "1024seq"}
    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        r = c.post("/api/estimate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["batch"]["stages"][0]["global_batch_sequences"] == 1024
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'deadline = "30d"\nbudget = "$1M"\nglobal-batch = "512seq"\nseq = 4096\n', "utf-8"
    )
    code, out, err = run(capsys, "solve", str(scenario), "--json")
    assert code == 0, err
    # solve's batch is a target each layout rounds to a multiple of dp × micro-batch (within 10%)
    seqs = json.loads(out)["optimum"]["batch"]["stages"][0]["global_batch_sequences"]
    assert abs(seqs - 512) <= 0.1 * 512
