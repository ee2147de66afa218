"""The loss suites added under the rule of docs/derivations.md ("More suites, chosen by a rule fixed before
any was measured"): each row checked against its source by hand, and the rule's points as properties.
"""

from __future__ import annotations

from collections import Counter

import pytest

from trilemma.validate.quality import loss_suites


def _rows(prefix: str) -> list[dict[str, str]]:
    return [r for v in loss_suites().values() for r in v if r["model"].startswith(prefix)]


def test_muennighoff_largest_single_epoch_run_by_hand():
    # Muennighoff et al. 2023 (arXiv 2305.16264), github.com/huggingface/datablations@e79231ed710f
    # plotstables/return.ipynb NAMES_TO_VAL_LOSSES["8b7178b178b"] = 2.336741; its shape,
    # utils/model_params.sh PARAM_9293M = (d 4096, ffw 16384, kv 128, heads 32, layers 42), Megatron's GPT-2
    # layout: QKV 3d·a + 3a, projection a·d + d, MLP 2·d·ffw + ffw + d, two LayerNorms 4d (a = 32·128),
    # a final LayerNorm 2d, the tied word embedding 50304·d and 2048 learned positions·d
    d, ffw, a, layers = 4096, 16384, 32 * 128, 42
    block = 3 * d * a + 3 * a + a * d + d + 2 * d * ffw + ffw + d + 4 * d
    total = layers * block + 2 * d + 50304 * d + 2048 * d
    (r,) = [r for r in _rows("Muennighoff C4 8b7178b178b")]
    assert int(r["params_total"]) == total == 8_672_395_264
    assert int(r["params_total"]) - int(r["params_nonembedding"]) == (50304 + 2048) * d
    assert int(r["tokens"]) == 178_000_000_000
    assert float(r["final_loss_reported"]) == 2.336741


def test_muennighoff_seeds_are_averaged_and_repeated_data_left_out():
    # rule point 4: the plain 2.8B run at 55B tokens and its four seeds (return.ipynb: 2b855b55b 2.574117,
    # c4seed1-4 2.569702, 2.568221, 2.569587, 2.570589) make one row, their mean
    (r,) = _rows("Muennighoff C4 2b855b55b")
    assert float(r["final_loss_reported"]) == pytest.approx(
        (2.574117 + 2.569702 + 2.568221 + 2.569587 + 2.570589) / 5, abs=1e-6
    )
    # rule point 3: a run that repeats its data (e.g. 8b7178b88b, 88B unique tokens seen twice) is no row
    rows = _rows("Muennighoff C4 ")
    assert not _rows("Muennighoff C4 8b7178b88b")
    assert len(rows) == 33 and all(r["dataset"].endswith("<1 epoch") for r in rows)


def test_misfitting_rows_are_the_learning_rate_envelope_at_each_run_length():
    # Li, Kudugunta & Zettlemoyer 2025 (arXiv 2502.18969): open_lm runs at 512 sequences x 2048 tokens a
    # step, swept over the peak learning rate; rule point 4 keeps one row, the lowest loss, per (N, D)
    rows = _rows("misfitting ")
    cells = Counter((r["params_total"], r["tokens"]) for r in rows)
    assert len(rows) == 81 and max(cells.values()) == 1
    for r in rows:
        steps = int(r["model"].split()[2])
        assert int(r["tokens"]) == steps * 512 * 2048


def test_misfitting_1b_parameter_count_by_hand():
    # open_lm's SwiGLU hidden size rounded up to a multiple of 256: 8·1792/3 = 4778 -> 4864; 26 layers of
    # attention 4d², MLP 3·d·4864, two RMSNorm gains, a final norm; untied 50432-row embedding and head
    d, layers, hidden = 1792, 26, 4864
    assert hidden == 256 * -(-int(8 * d / 3) // 256)
    nonemb = layers * (4 * d * d + 3 * d * hidden + 2 * d) + d
    (r,) = _rows("misfitting 1b 20000 steps")
    assert int(r["params_nonembedding"]) == nonemb == 1_013_936_896
    assert int(r["params_total"]) == nonemb + 2 * 50432 * d


def test_routing_dense_runs_share_one_run_length_and_the_file_counts_no_embedding():
    # Clark et al. 2022 (arXiv 2202.01169): every dense run ends at step 249,000 of 2^19 tokens; the 130M
    # size's three seeds are one row; the five runs with the feed-forward layer widened (flop_increase 2
    # or 4) are dense models of their own size (rule point 5). The file's total_parameter_count of the
    # 1.3B model is L·(5·d·h_q + 8d² + 4d) at d 2048, L 24, h_q 2048: no embedding matrix in it
    rows = _rows("Clark routing dense ")
    assert len(rows) == 11
    assert {int(r["tokens"]) for r in rows} == {249_000 * 2**19}
    (big,) = _rows("Clark routing dense 1.3B")
    d, layers = 2048, 24
    assert int(big["params_nonembedding"]) == layers * (5 * d * d + 8 * d * d + 4 * d)
    assert int(big["params_total"]) == int(big["params_nonembedding"]) + 32000 * d


def test_brandfonbrener_extrapolation_run_by_hand():
    # Brandfonbrener et al. 2024 (arXiv 2411.12925), loss-to-loss-notebooks@457ce81a0190
    # data/extrapolation.csv: the FineWeb run of 40 layers at d_model 2560, params 3,309,980,160, its
    # fineweb_100b validation loss 2.328246593475342. OLMo blocks of 12·d² (attention 4d², MLP 8d²) and
    # (4L + 1)·d norm parameters, with an untied 32,000-row embedding and head: 2·32000·d
    d, layers = 2560, 40
    total = 12 * d * d * layers + (4 * layers + 1) * d + 2 * 32000 * d
    (r,) = [r for r in _rows("L2L fineweb-100b ") if r["model"].endswith("at 1e+21 FLOP")]
    assert int(r["params_total"]) == total == 3_309_980_160
    assert int(r["params_nonembedding"]) == total - 2 * 32000 * d
    assert float(r["final_loss_reported"]) == 2.328247
    assert int(r["tokens"]) == round(1e21 / (6 * total))
    # one suite a training corpus, each held-out 3.3B run under one epoch of its corpus
    corpora = Counter(r["dataset"] for r in _rows("L2L "))
    assert len(corpora) == 6 and sum(corpora.values()) == 529 + 6
