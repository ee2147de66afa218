"""model_from_hf_config: real Hub config.json files → exact published parameter counts.

Each fixture in tests/data/hf/<name>/config.json is the model's public config.json from the
Hugging Face Hub, as released (the repository is named in each case below).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trilemma.errors import InputError
from trilemma.estimate.params import param_counts
from trilemma.hf import SUPPORTED_MODEL_TYPES, model_from_hf_config
from trilemma.specs import FfnType, NormType, PositionType

DATA = Path(__file__).parent / "data" / "hf"

# (fixture folder, total parameters). Each total is the released model's parameter count as
# reported for it (Hugging Face num_parameters() of the checkpoint; Hub "Model size"):
#   meta-llama/Llama-2-7b-hf          6,738,415,616  (Hub: 6.74B)
#   meta-llama/Meta-Llama-3-8B        8,030,261,248  (Hub: 8.03B)
#   mistralai/Mixtral-8x7B-v0.1      46,702,792,704  (Hub: 46.7B; Jiang et al. 2024: 47B total)
#   Qwen/Qwen2-0.5B                     494,032,768  (tied embeddings, q/k/v bias)
#   openai-community/gpt2               124,439,808  (GPT2LMHeadModel, tied head)
#   EleutherAI/pythia-70m                70,426,624  (Pythia model card: 70,426,624 total,
#                                                     18,915,328 non-embedding)
#   google-bert/bert-base-uncased       109,482,240  (BertModel: embeddings, 12 layers, pooler)
#   mistralai/Mistral-7B-v0.1         7,241,732,096  (Hub: 7.24B; GGUF general.parameter_count)
#   google/gemma-2b                   2,506,172,416  (KerasNLP preset gemma_2b_en "params";
#                                                     Gemma report Table 2 non-embedding
#                                                     1,981,884,416 + 256000 × 2048)
#   facebook/opt-125m                   125,239,296  (OPTForCausalLM, 2,050 position rows)
PUBLISHED = [
    ("llama-2-7b-hf", 6_738_415_616),
    ("meta-llama-3-8b", 8_030_261_248),
    ("mixtral-8x7b-v0.1", 46_702_792_704),
    ("qwen2-0.5b", 494_032_768),
    ("gpt2", 124_439_808),
    ("pythia-70m", 70_426_624),
    ("bert-base-uncased", 109_482_240),
    ("mistral-7b-v0.1", 7_241_732_096),
    ("gemma-2b", 2_506_172_416),
    ("opt-125m", 125_239_296),
]


@pytest.mark.parametrize(("folder", "total"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_published_counts(folder: str, total: int) -> None:
    model = model_from_hf_config(DATA / folder / "config.json")
    assert param_counts(model).total == total
    assert model.seq_len is None  # max_position_embeddings is not a training default


def test_folder_path_is_accepted() -> None:
    folder = DATA / "gpt2"
    assert model_from_hf_config(folder) == model_from_hf_config(folder / "config.json")
    assert model_from_hf_config(str(DATA / "gpt2")).name == "gpt2"


def test_qwen15_moe_count_is_exact() -> None:
    # Qwen/Qwen1.5-MoE-A2.7B: 14,315,784,192 (KerasNLP preset qwen1.5_moe_2.7b_en "params"),
    # shared_expert_gate (Linear(d, 1) per MoE layer) included.
    model = model_from_hf_config(DATA / "qwen1.5-moe-a2.7b")
    counts = param_counts(model)
    assert counts.total == 14_315_784_192
    assert (model.n_experts, model.top_k, model.n_shared_experts) == (60, 4, 4)
    assert model.expert_ffn == 1408 and model.n_moe_layers == 24
    assert model.qkv_bias and not model.out_bias


def test_falcon_7b_tensor_inventory() -> None:
    # tiiuae/falcon-7b from FalconModel's tensors: fused QKV 4544 × (4544 + 2·64) (multi-query),
    # dense 4544², MLP 2 × 4544 × 18176, one LayerNorm per parallel block, ln_f, tied embedding
    # 65024 × 4544, no biases
    layer = 4544 * (4544 + 2 * 64) + 4544 * 4544 + 2 * 4544 * 18176 + 2 * 4544
    expected = 32 * layer + 65024 * 4544 + 2 * 4544
    assert expected == 6_921_720_704
    model = model_from_hf_config(DATA / "falcon-7b")
    assert param_counts(model).total == expected
    assert model.kv_heads == 1 and model.norms_per_layer == 1 and model.parallel_block
    assert model.position == PositionType.ROTARY and model.tied_embeddings


def test_family_mapping() -> None:
    llama = model_from_hf_config(DATA / "llama-2-7b-hf")
    assert llama.name == "meta-llama/Llama-2-7b-hf"  # _name_or_path when the file has one
    assert (llama.family, llama.ffn_type, llama.norm, llama.position) == (
        "llama",
        FfnType.SWIGLU,
        NormType.RMSNORM,
        PositionType.ROTARY,
    )
    assert not (llama.tied_embeddings or llama.qkv_bias or llama.out_bias or llama.mlp_bias)

    llama3 = model_from_hf_config(DATA / "meta-llama-3-8b")
    assert llama3.name == "meta-llama-3-8b"  # else the folder name
    assert llama3.kv_heads == 8

    qwen = model_from_hf_config(DATA / "qwen2-0.5b")
    assert qwen.tied_embeddings and qwen.qkv_bias and not qwen.out_bias and qwen.kv_heads == 2

    gpt2 = model_from_hf_config(DATA / "gpt2")
    assert (gpt2.ffn_dim, gpt2.ffn_type, gpt2.position, gpt2.max_positions) == (
        3072,
        FfnType.GELU,
        PositionType.LEARNED,
        1024,
    )
    assert gpt2.tied_embeddings and gpt2.norm == NormType.LAYERNORM and gpt2.dropout

    neox = model_from_hf_config(DATA / "pythia-70m")
    assert neox.parallel_block and neox.position == PositionType.ROTARY
    assert not neox.tied_embeddings and neox.qkv_bias and neox.mlp_bias

    bert = model_from_hf_config(DATA / "bert-base-uncased")
    assert not bert.causal and bert.pooler and bert.embedding_norm and not bert.final_norm
    assert (bert.type_vocab_size, bert.max_positions) == (2, 512)

    mixtral = model_from_hf_config(DATA / "mixtral-8x7b-v0.1")
    assert (mixtral.n_experts, mixtral.top_k, mixtral.kv_heads) == (8, 2, 8)
    assert param_counts(mixtral).active == 12_879_925_248  # "13B active" (Jiang et al. 2024)

    gemma = model_from_hf_config(DATA / "gemma-2b")
    assert (gemma.ffn_type, gemma.d_head, gemma.kv_heads) == (FfnType.GEGLU, 256, 1)

    opt = model_from_hf_config(DATA / "opt-125m")
    assert opt.ffn_type == FfnType.RELU and opt.max_positions == 2050


#: the width and depth of each family's config class default (a config must give them; the rest may
#: be absent): LlamaConfig() is Llama-2-7B, GPT2Config() GPT-2 small, BertConfig() BERT-base
WIDTH_DEPTH = {
    "llama": (4096, 32),
    "mistral": (4096, 32),
    "mixtral": (4096, 32),
    "gpt2": (768, 12),
    "bert": (768, 12),
    "opt": (768, 12),
    "qwen2_moe": (2048, 24),
}


def _sized(config: dict) -> dict:
    """``config`` with its family's default width and depth where it gives neither spelling."""
    kind = config.get("model_type")
    if not isinstance(kind, str) or kind not in WIDTH_DEPTH:
        return config
    d, n = WIDTH_DEPTH[kind]
    out = dict(config)
    if not {"hidden_size", "n_embd", "d_model"} & set(config):
        out["hidden_size"] = d
    if not {"num_hidden_layers", "n_layer"} & set(config):
        out["num_hidden_layers"] = n
    return out


@pytest.mark.parametrize(
    ("config", "total"),
    [
        # absent keys other than the width and depth take the Hugging Face config class's defaults
        (_sized({"model_type": "llama"}), 6_738_415_616),
        (_sized({"model_type": "gpt2"}), 124_439_808),
        (_sized({"model_type": "bert"}), 109_482_240),
        (_sized({"model_type": "mistral"}), 7_241_732_096),
        (_sized({"model_type": "mixtral"}), 46_702_792_704),
        # n_inner null → 4·n_embd; num_key_value_heads null → num_attention_heads
        (_sized({"model_type": "gpt2", "n_inner": None}), 124_439_808),
        (_sized({"model_type": "llama", "num_key_value_heads": None}), 6_738_415_616),
        # no model_type: the family comes from architectures
        ({"architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_layer": 12}, 124_439_808),
    ],
)
def test_defaults_are_the_config_classes(tmp_path: Path, config: dict, total: int) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert param_counts(model_from_hf_config(path)).total == total


@pytest.mark.parametrize(
    "config, field",
    [
        ({"model_type": "llama", "num_hidden_layers": 32}, "config.json hidden_size"),
        ({"model_type": "gpt2", "n_embd": 768}, "config.json n_layer"),
        (
            {"model_type": "llama", "hidden_size": 10**30, "num_hidden_layers": 2},
            "config.json hidden_size",
        ),
        (
            {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 10**12},
            "config.json num_hidden_layers",
        ),
        (
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "max_position_embeddings": -1,
            },
            "config.json max_position_embeddings",
        ),
    ],
)
def test_missing_width_or_depth_and_absurd_sizes_are_refused(
    tmp_path: Path, config: dict, field: str
) -> None:
    """No silent Llama defaults for the size, no overflow or hang on absurd dimensions."""
    with pytest.raises(InputError) as exc:
        model_from_hf_config(_write(tmp_path, json.dumps(config)))
    assert exc.value.field == field and "\n" not in str(exc.value)


def test_deeply_nested_json_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nested"):
        model_from_hf_config(_write(tmp_path, "[" * 100_000))


def test_aliases_and_biases(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    # GPT2Config's attribute_map: hidden_size → n_embd, num_hidden_layers → n_layer
    path.write_text(
        json.dumps(
            {
                "model_type": "gpt2",
                "hidden_size": 1024,
                "num_hidden_layers": 24,
                "num_attention_heads": 16,
            }
        )
    )
    m = model_from_hf_config(path)
    assert (m.d_model, m.n_layers, m.n_heads, m.ffn_dim) == (1024, 24, 16, 4096)
    # Llama's attention_bias puts a bias on q, k, v and o_proj
    path.write_text(
        json.dumps(_sized({"model_type": "llama", "attention_bias": True, "mlp_bias": True}))
    )
    m = model_from_hf_config(path)
    assert m.qkv_bias and m.out_bias and m.mlp_bias
    assert param_counts(m).total == 6_738_415_616 + 32 * (4 * 4096 + 2 * 11008 + 4096)


# ------------------------------------------------------------------------------ bad input
def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(text)
    return path


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="config.json") as exc:
        model_from_hf_config(tmp_path / "nope" / "config.json")
    assert "existing file" in str(exc.value)
    with pytest.raises(InputError, match="existing file"):
        model_from_hf_config(tmp_path)  # a folder without config.json


def test_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"valid JSON \(line 1"):
        model_from_hf_config(_write(tmp_path, '{"model_type": "llama",,}'))
    with pytest.raises(InputError, match="a JSON object"):
        model_from_hf_config(_write(tmp_path, "[1, 2]"))


def test_unknown_model_type(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        model_from_hf_config(_write(tmp_path, '{"model_type": "t5"}'))
    msg = str(exc.value)
    assert msg.startswith("config.json model_type: 't5'")
    assert all(t in msg for t in SUPPORTED_MODEL_TYPES)
    with pytest.raises(InputError, match="model_type: '\\(missing\\)'"):
        model_from_hf_config(_write(tmp_path, '{"hidden_size": 4096}'))


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"model_type": "llama", "num_attention_heads": "32"}, "config.json num_attention_heads"),
        ({"model_type": "llama", "hidden_size": 4096.0}, "config.json hidden_size"),
        ({"model_type": "llama", "num_hidden_layers": True}, "config.json num_hidden_layers"),
        ({"model_type": "llama", "vocab_size": 0}, "config.json vocab_size"),
        (
            {"model_type": "llama", "tie_word_embeddings": "false"},
            "config.json tie_word_embeddings",
        ),
        ({"model_type": "llama", "hidden_act": "relu"}, "config.json hidden_act"),
        ({"model_type": "gpt2", "n_embd": None}, "config.json n_embd"),
        (
            {"model_type": "gpt2", "activation_function": "wiggle"},
            "config.json activation_function",
        ),
        ({"model_type": "bert", "hidden_dropout_prob": 2}, "config.json hidden_dropout_prob"),
        ({"model_type": "llama", "num_key_value_heads": 5}, "config.json num_key_value_heads"),
        ({"model_type": "llama", "num_attention_heads": 30}, "config.json num_attention_heads"),
        ({"model_type": "mixtral", "num_experts_per_tok": 9}, "config.json num_experts_per_tok"),
        ({"model_type": "qwen2_moe", "mlp_only_layers": [3, 7]}, "config.json mlp_only_layers"),
        ({"model_type": "opt", "word_embed_proj_dim": 512}, "config.json word_embed_proj_dim"),
        (
            {"model_type": "bert", "position_embedding_type": "relative_key"},
            "config.json position_embedding_type",
        ),
        ({"model_type": ["llama"]}, "config.json model_type"),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, config: dict, field: str) -> None:
    with pytest.raises(InputError) as exc:
        model_from_hf_config(_write(tmp_path, json.dumps(_sized(config))))
    assert exc.value.field == field
    assert str(exc.value).startswith(field + ":")
    assert "\n" not in str(exc.value)
