"""DeepSeek-V3: multi-head latent attention and DeepSeekMoE, checked against its technical report
(DeepSeek-AI 2024, arXiv:2412.19437).

- Parameters: "671B total parameters with 37B activated for each token" (Abstract; §4.2 gives the shape:
  61 layers, hidden 7168, 128 heads of d_h 128, KV compression d_c 512, query compression 1536, decoupled
  rotary width 64 per head, 1 shared + 256 routed experts of intermediate 2048, 8 routed per token, the
  first three FFNs dense). The 14B multi-token-prediction module is not among the 671B.
- Pre-training cost: 2.664M H800 GPU-hours for 14.8T tokens on a cluster of 2,048 H800s (§1, Table 1;
  §3.1 the cluster), FP8 mixed precision (§3.3), on HAI-LLM with 16-way PP, 64-way EP over 8 nodes and
  ZeRO-1 (§3.2), DualPipe hiding the all-to-all (§3.2.1), each token sent to at most 4 nodes (§3.2.2).
- The latent KV cache: (d_c + d_h^R) = 512 + 64 = 576 elements per token and layer (DeepSeek-V2, arXiv
  2405.04434 §2.1.2 and Table 1).
"""

from __future__ import annotations

import json
import math

import pytest

from trilemma.api import estimate
from trilemma.errors import InputError
from trilemma.estimate.comm import Fabric, all_to_all_s, fabric, node_limited_all_to_all_s
from trilemma.estimate.flops import attention_core_flop_fwd
from trilemma.estimate.nccl import without_latency
from trilemma.estimate.params import attention_params, param_counts
from trilemma.estimate.pipeline import bubble_s
from trilemma.presets import constants, stack
from trilemma.resolve import make_cluster, resolve_model

CONFIG = {  # deepseek-ai/DeepSeek-V3-Base config.json, the keys that shape the model
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "tie_word_embeddings": False,
    "n_group": 8,
    "topk_group": 4,
    "num_nextn_predict_layers": 1,
    "hidden_act": "silu",
    "attention_bias": False,
}
PAPER_H800_HOURS = 2.664e6  # pre-training, §1 Table 1


@pytest.fixture(scope="module")
def v3():
    return resolve_model("deepseek-v3")[0]


def test_671b_total_37b_active(v3):
    pc = param_counts(v3)
    assert pc.total == pytest.approx(671e9, rel=0.001)
    assert 37e9 <= pc.active < 38e9  # "37B activated": the report rounds 37.55B down


def test_mla_weights_by_hand(v3):
    d, h = 7168, 128
    hand = (
        d * 1536  # W^DQ
        + 1536 * h * (128 + 64)  # W^UQ and W^QR
        + d * (512 + 64)  # W^DKV and W^KR
        + 512 * h * (128 + 128)  # W^UK and W^UV
        + h * 128 * d  # W^O
        + 1536
        + 512  # the two latent RMSNorms
    )
    assert attention_params(v3) == hand == 187_107_328


def test_the_config_json_is_the_preset(tmp_path, v3):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG), "utf-8")
    m, how = resolve_model(str(path))
    assert param_counts(m) == param_counts(v3) and "Hugging Face config" in how


def test_a_config_with_unequal_head_widths_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "v_head_dim": 64}), "utf-8")
    with pytest.raises(InputError, match="v_head_dim"):
        resolve_model(str(path))


def test_latent_kv_cache_and_attention_flops(v3):
    assert v3.kv_cache_width == 576
    # QK^T over 128 + 64 per head, softmax·V over 128: 2·s·(24,576 + 16,384) per token and layer
    assert attention_core_flop_fwd(v3, 4096) == 61 * 2 * 4096 * (128 * 192 + 128 * 128)


@pytest.mark.xfail(
    strict=True,
    reason="no stack named, the default features neither limit the nodes a token reaches nor hide the "
    "all-to-all: the point is 4.14M H800-hours (1.55x the report) and, since the refit with nanotron's "
    "host operators narrowed the cross-stack error, the band's low end 2.75M sits 3% above 2.664M; with "
    "the report's own stack (--stack hai-llm, the test below) the band holds it; strict: a pass means "
    "the default stack's band holds it again",
)
def test_pre_training_h800_hours_in_the_band():
    """2,048 H800s, 14.8T tokens, FP8, no stack named: the 80% band holds the report's 2.664M
    H800-hours."""
    est = estimate("deepseek-v3", "h800", 2048, tokens=14.8e12, precision="fp8")
    t = est.time
    assert t.gpu_hours_low <= PAPER_H800_HOURS <= t.gpu_hours_high


def _paper_estimate(**features):
    """The report's own plan (§3.2): HAI-LLM, 16-way PP, 64-way EP over 8 nodes, ZeRO-1 DP."""
    st = stack("hai-llm").model_copy(update=features)
    layout = {"pp": 16, "ep": 64, "zero": 1}
    return estimate(
        "deepseek-v3", "h800", 2048, tokens=14.8e12, precision="fp8", stack=st, layout=layout
    )


def _paper_plan(**features):
    """The time of the report's own plan (``_paper_estimate``)."""
    return _paper_estimate(**features).time


def test_dualpipe_memory():
    """Table 2: DualPipe keeps two copies of the parameters (the weights count twice, their gradients
    and optimizer states do not) and PP + 1 micro-batches of activations instead of PP: at PP 16 at
    most 1/16 more activations (the recomputation's transients are not per micro-batch)."""
    dual, one_f = _paper_estimate().memory, _paper_estimate(pp_dualpipe=False).memory
    assert dual.weights == pytest.approx(2 * one_f.weights, rel=1e-12)
    assert (dual.gradients, dual.optimizer) == (one_f.gradients, one_f.optimizer)
    assert 0 < dual.activations / one_f.activations - 1 <= 1 / 16


def test_hai_llm_moves_the_estimate_toward_the_report_and_its_band_holds_it():
    """With the report's stack (node-limited dispatch, DualPipe's all-to-all overlap and bubble, fp8
    dispatch) and layout the band still holds 2.664M and the point is nearer it than with any feature
    off."""
    t = _paper_plan()
    assert t.gpu_hours_low <= PAPER_H800_HOURS <= t.gpu_hours_high
    gap = abs(math.log(t.gpu_hours / PAPER_H800_HOURS))
    offs = ({"ep_overlap": False}, {"ep_node_limit": 0}, {"pp_dualpipe": False})
    for off in (*offs, {"ep_fp8_dispatch": False}):
        assert gap < abs(math.log(_paper_plan(**off).gpu_hours / PAPER_H800_HOURS)), off


def test_dualpipe_bubble_by_hand():
    """Report Table 2: 1F1B (PP − 1)(F + B), DualPipe (PP/2 − 1)(F&B + B − 3W). With F = 1, B = 2, W = 1
    (the backward twice the forward, half of it weight gradients) and F&B = F + B: a stage-time of 3 s
    at PP 16 gives 15·3 = 45 s against 7·(3 + 2 − 3) = 14 s; at PP 2 none; an odd PP keeps 1F1B."""
    assert float(bubble_s(16, 1, 3.0, False)) == pytest.approx(45.0)
    assert float(bubble_s(16, 1, 3.0, True)) == pytest.approx(14.0)
    assert float(bubble_s(2, 1, 3.0, True)) == 0.0
    assert float(bubble_s(3, 1, 3.0, True)) == pytest.approx(6.0)


def test_dualpipe_and_fp8_dispatch_in_the_reports_plan():
    """The same plan's bubble with DualPipe is 14/45 of 1F1B's (the stage-time is the same); sending
    the two all-to-alls towards the experts in fp8 (1 byte, §3.3.3) and the combines in bf16 (2 bytes)
    scales the bandwidth term by (2·1 + 2·2)/(4·2) = 0.75, the per-call latency kept, and does nothing
    in bf16 training."""
    dual, one_f = _paper_plan(), _paper_plan(pp_dualpipe=False)
    assert dual.bubble_s / one_f.bubble_s == pytest.approx(14 / 45, rel=1e-9)

    def ep(precision, fp8_dispatch):  # EP alone, not hidden, in the TP/EP term (no TP here)
        st = stack("hai-llm").model_copy(
            update={"ep_overlap": False, "ep_fp8_dispatch": fp8_dispatch}
        )
        layout = {"pp": 16, "ep": 64, "zero": 1}
        e = estimate(
            "deepseek-v3", "h800", 2048, tokens=1e12, precision=precision, stack=st, layout=layout
        )
        return e.time.tp_comm_s

    assert 0.75 <= ep("fp8", True) / ep("fp8", False) < 0.77
    assert ep("bf16", True) == ep("bf16", False)


def test_node_limited_dispatch_by_hand():
    """64 ranks on 8 nodes, 8 copies per token, at most 4 nodes (§3.2.2), latency off: without the
    limit 8·56/64 = 7 copies cross the network and 8·7/64 NVLink, one after the other; with it
    4·7/8 = 3.5 cross the network once each and NVLink carries 8·7/64 + 7·7/8 = 7, at once."""
    consts = constants()
    f = fabric(make_cluster("h800", 64), consts["efficiency"]["link"], consts)
    f = Fabric(f.node_size, f.intra_bw, f.inter_bw, without_latency(f.nccl))
    b = 1e9  # one copy of a rank's tokens, bytes
    nccl = b * 7 / f.inter_bw + b * 8 * 7 / 64 / f.intra_bw
    assert float(all_to_all_s(8 * b, 1, 64, f)) == pytest.approx(nccl, rel=1e-9)
    limited = max(3.5 * b / f.inter_bw, 7 * b / f.intra_bw)
    assert float(node_limited_all_to_all_s(b, 8, 4, 1, 64, f)) == pytest.approx(limited, rel=1e-9)


def test_node_limit_changes_nothing_inside_one_node_or_above_the_node_count():
    consts = constants()
    f = fabric(make_cluster("h800", 64), consts["efficiency"]["link"], consts)
    assert float(node_limited_all_to_all_s(1e6, 8, 4, 1, 8, f)) == pytest.approx(
        float(all_to_all_s(8e6, 1, 8, f))
    )
    wide = [float(node_limited_all_to_all_s(1e8, 8, lim, 1, 64, f)) for lim in (1, 2, 4, 8, 16)]
    assert wide == sorted(wide) and wide[-1] == wide[-2]  # more nodes never cheaper; 8 of 8 = 16


LITE = {  # an MLA model without a query latent (q_lora_rank null, as DeepSeek-V2-Lite) and dense
    **CONFIG,
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "n_routed_experts": 0,
    "q_lora_rank": None,
    "vocab_size": 102400,
}


def test_a_null_query_rank_is_a_full_query_projection(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LITE), "utf-8")
    m, _ = resolve_model(str(path))
    assert m.q_lora_rank == 0 and not m.is_moe
    d, h = 2048, 16
    hand = (
        d * h * 192 + d * 576 + 512 * h * 256 + h * 128 * d + 512
    )  # W^Q, W^DKV+W^KR, W^UK+W^UV, W^O
    assert attention_params(m) == hand


def test_megatron_writes_mla_with_its_own_options(tmp_path):
    from test_export import megatron_args

    from trilemma.export import export

    path = tmp_path / "config.json"
    path.write_text(json.dumps(LITE), "utf-8")
    a = megatron_args(
        export(estimate(str(path), "h100-sxm", 8, tokens=1e9), "megatron").files[
            "train_megatron.sh"
        ]
    )
    assert "--multi-latent-attention" in a and "--group-query-attention" not in a
    assert (a["--kv-lora-rank"], a["--qk-head-dim"], a["--qk-pos-emb-head-dim"]) == (
        "512",
        "128",
        "64",
    )
    assert a["--v-head-dim"] == "128" and "--q-lora-rank" not in a  # None: a full projection


def test_the_probe_and_torchtitan_refuse_latent_attention(capsys, tmp_path):
    from clitools import run

    code, out, err = run(capsys, "probe", "-m", "deepseek-v3")
    assert code == 2 and out == "" and err.count("\n") == 1 and "latent attention" in err
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LITE), "utf-8")
    code, out, err = run(
        capsys,
        "export",
        "--to",
        "torchtitan",
        "-m",
        str(path),
        "-g",
        "h100-sxm",
        "-n",
        "8",
        "-t",
        "1B",
    )
    assert code == 2 and "multi-head latent attention" in err
