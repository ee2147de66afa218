"""Parameter counts of every model preset against published figures, plus hand-counted inventories.

``tests/data/published_params.csv`` holds one row per preset with a published figure:
``published_non_embedding`` where the source splits the count; ``tolerance`` 0 means an exact count (a released checkpoint or a model card); a fraction means a
rounded / nominal figure ("175.0B", "70B"). Rows whose tolerance exceeds 0.001 are known gaps
between the published shape and the published name, documented in the row's ``source``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from trilemma.errors import UnknownPresetError
from trilemma.estimate.params import param_counts
from trilemma.presets import get_model, model_presets

DATA = Path(__file__).parent / "data" / "published_params.csv"


def _rows() -> list[dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


ROWS = _rows()


# ------------------------------------------------------------------ published figures
@pytest.mark.parametrize("row", ROWS, ids=[r["model"] for r in ROWS])
def test_published_total(row: dict[str, str]) -> None:
    ours = param_counts(get_model(row["model"]))
    published = int(row["published_total"])
    tol = float(row["tolerance"])
    if tol == 0:
        assert ours.total == published
    else:
        assert ours.total == pytest.approx(published, rel=tol)


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if r["published_active"]],
    ids=[r["model"] for r in ROWS if r["published_active"]],
)
def test_published_active(row: dict[str, str]) -> None:
    ours = param_counts(get_model(row["model"]))
    published = int(row["published_active"])
    tol = float(row["tolerance"])
    if tol == 0:
        assert ours.active == published
    else:
        assert ours.active == pytest.approx(published, rel=tol)


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if r["published_non_embedding"]],
    ids=[r["model"] for r in ROWS if r["published_non_embedding"]],
)
def test_published_non_embedding(row: dict[str, str]) -> None:
    """Model cards and reports that split the count (Qwen, Gemma 2/3) check the inventory twice:
    a wrong norm or q/k-norm count moves the non-embedding figure, not the embedding table."""
    ours = param_counts(get_model(row["model"]))
    published = int(row["published_non_embedding"])
    tol = float(row["tolerance"])
    if tol == 0:
        assert ours.non_embedding == published
    else:
        assert ours.non_embedding == pytest.approx(published, rel=tol)


def test_published_rows_are_well_formed() -> None:
    names = [r["model"] for r in ROWS]
    assert len(names) == len(set(names)), "one row per model"
    presets = model_presets()
    for r in ROWS:
        assert r["model"] in presets, f"{r['model']}: not a canonical preset name"
        assert r["source"].strip(), f"{r['model']}: a source is required"
        assert 0 <= float(r["tolerance"]) < 0.2


def test_every_preset_has_a_published_row() -> None:
    assert set(model_presets()) == {r["model"] for r in ROWS}


# ------------------------------------------------------------------ hand-counted inventories
def test_gpt2_124m_inventory_by_hand() -> None:
    # GPT-2 small (openai-community/gpt2): d = 768, 12 layers, vocab 50257, 1024 positions.
    d, L, V, P = 768, 12, 50257, 1024
    wte = V * d  # 38,597,376 token embeddings (the LM head shares them)
    wpe = P * d  #    786,432 learned positions
    ln_1 = 2 * d  #      1,536 weight + bias
    c_attn = d * 3 * d + 3 * d  #  1,771,776 fused Q, K, V with bias
    attn_proj = d * d + d  #    590,592 output projection with bias
    ln_2 = 2 * d  #      1,536
    c_fc = d * 4 * d + 4 * d  #  2,362,368 MLP up with bias
    mlp_proj = 4 * d * d + d  #  2,360,064 MLP down with bias
    layer = ln_1 + c_attn + attn_proj + ln_2 + c_fc + mlp_proj
    assert layer == 12 * d * d + 13 * d == 7_087_872
    ln_f = 2 * d
    total = wte + wpe + L * layer + ln_f
    assert total == 124_439_808

    p = param_counts(get_model("gpt2"))
    assert p.total == total
    assert p.per_dense_layer == layer
    assert p.embedding == wte + wpe  # tied head not counted twice
    assert p.non_embedding == L * layer + ln_f == 85_056_000


def test_llama2_7b_inventory_by_hand() -> None:
    # Llama-2-7B: d 4096, 32 layers, SwiGLU f 11008, vocab 32000, RMSNorm, no biases, untied head.
    d, L, f, V = 4096, 32, 11008, 32000
    attn = 4 * d * d  # q, k, v, o (n_kv_heads = n_heads)
    mlp = 3 * d * f  # gate, up, down
    norms = 2 * d  # input_layernorm, post_attention_layernorm (weight only)
    total = V * d + L * (attn + mlp + norms) + d + V * d  # embed, layers, final norm, lm_head
    assert total == 6_738_415_616
    assert param_counts(get_model("llama-2-7b")).total == total


def test_llama3_8b_gqa_by_hand() -> None:
    # GQA: K and V are d x (8 kv heads x 128) = 4096 x 1024 each.
    d, L, f, V, dkv = 4096, 32, 14336, 128256, 8 * 128
    layer = 2 * d * d + 2 * d * dkv + 3 * d * f + 2 * d
    assert 2 * V * d + L * layer + d == 8_030_261_248
    assert param_counts(get_model("meta-llama-3-8b")).total == 8_030_261_248


def test_bert_base_inventory_by_hand() -> None:
    # BertModel (bert-base-uncased): embeddings + LayerNorm, 12 post-LN layers, pooler; no final
    # norm.
    d, L, V, P, T, f = 768, 12, 30522, 512, 2, 3072
    embeddings = (V + P + T) * d + 2 * d  # word, position, token type, LayerNorm
    layer = (4 * d * d + 4 * d) + 2 * d + (2 * d * f + f + d) + 2 * d
    pooler = d * d + d
    assert embeddings + L * layer + pooler == 109_482_240
    p = param_counts(get_model("bert-base-uncased"))
    assert p.total == 109_482_240
    assert p.per_dense_layer == layer


def test_mixtral_active_by_hand() -> None:
    # Mixtral-8x7B: 8 SwiGLU experts of 3 x 4096 x 14336 each, 2 used per token, router 4096 x 8.
    d, L, f, V, E, k, dkv = 4096, 32, 14336, 32000, 8, 2, 1024
    expert = 3 * d * f
    shared = 2 * d * d + 2 * d * dkv + 2 * d + d * E  # attention, two RMSNorms, router
    outer = 2 * V * d + d  # embed, lm_head, final norm
    assert outer + L * (shared + E * expert) == 46_702_792_704
    assert outer + L * (shared + k * expert) == 12_879_925_248
    p = param_counts(get_model("mixtral-8x7b-v0.1"))
    assert (p.total, p.active, p.per_expert) == (46_702_792_704, 12_879_925_248, expert)


# ------------------------------------------------------------------ embedding / non-embedding
# Biderman et al. 2023 (Pythia) Table 1 lists non-embedding parameters (embed_in and embed_out
# excluded).
PYTHIA_NON_EMBEDDING = {
    "pythia-70m": 18_915_328,
    "pythia-160m": 85_056_000,
    "pythia-410m": 302_311_424,
    "pythia-1b": 805_736_448,
    "pythia-1.4b": 1_208_602_624,
    "pythia-2.8b": 2_517_652_480,
    "pythia-6.9b": 6_444_163_072,
    "pythia-12b": 11_327_027_200,
}


@pytest.mark.parametrize("name,expected", PYTHIA_NON_EMBEDDING.items())
def test_pythia_non_embedding(name: str, expected: int) -> None:
    p = param_counts(get_model(name))
    assert p.non_embedding == expected
    m = get_model(name)
    assert p.embedding == 2 * m.vocab_size * m.d_model  # untied embed_in + embed_out
    assert p.embedding + p.non_embedding == p.total


def test_pythia_70m_by_hand() -> None:
    # GPT-NeoX block: two LayerNorms, qkv 512x1536 + bias, dense 512x512 + bias, MLP 512 <-> 2048.
    d, L, V = 512, 6, 50304
    layer = 2 * (2 * d) + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    non_emb = L * layer + 2 * d  # + final LayerNorm
    assert non_emb == 18_915_328
    assert non_emb + 2 * V * d == 70_426_624


def test_bloom_embedding_count_matches_model_card() -> None:
    # bigscience/bloom card: "176,247,271,424 parameters: 3,596,615,680 embedding parameters".
    p = param_counts(get_model("bloom"))
    assert p.embedding == 3_596_615_680 == 250880 * 14336
    assert p.total == 176_247_271_424


def test_chinchilla_relative_position_weights() -> None:
    # 12 L d^2 of attention + MLP matrices is 64.4B; Transformer-XL relative encoding adds
    # W_R (d x d) and u, v (d each) per layer; the tied 32k x 8192 embedding completes the 70B.
    d, L, V = 8192, 80, 32000
    matrices = 12 * L * d * d
    assert matrices == 64_424_509_440
    relative = L * (d * d + 2 * d)
    final_norm = d  # RMSNorm
    norms = L * 2 * d
    total = matrices + relative + norms + final_norm + V * d
    assert param_counts(get_model("chinchilla")).total == total
    assert total == pytest.approx(70e9, rel=1e-3)


def test_falcon_40b_checkpoint_arithmetic() -> None:
    # The checkpoint index (bf16) totals 83,671,941,120 bytes = 41,835,970,560 values, which is
    # the tied model plus a stored copy of lm_head (65024 x 8192).
    p = param_counts(get_model("falcon-40b"))
    assert p.total + 65024 * 8192 == 83_671_941_120 // 2


def test_gpt3_head_dim_from_table() -> None:
    # Table 2.1: 13B has d_model 5140 but 40 heads of 128 (d_attn 5120).
    m = get_model("gpt3-13b")
    assert (m.d_model, m.d_attn, m.d_head) == (5140, 5120, 128)


# ------------------------------------------------------------------ the preset catalogue itself
REQUIRED = """gpt2-124m gpt2-355m gpt2-774m gpt2-1.5b gpt3-125m gpt3-350m gpt3-760m gpt3-1.3b
gpt3-2.7b gpt3-6.7b gpt3-13b gpt3-175b bert-base bert-large llama-7b llama-13b llama-33b
llama-65b llama2-7b llama2-13b llama2-70b llama3-8b llama3-70b llama3.1-405b mistral-7b
mixtral-8x7b chinchilla-70b gopher-280b opt-175b bloom-176b falcon-40b pythia-70m
pythia-160m pythia-410m pythia-1b pythia-1.4b pythia-2.8b pythia-6.9b pythia-12b""".split()


def test_required_presets_exist() -> None:
    missing = set(REQUIRED) - set(model_presets())
    assert not missing


@pytest.mark.parametrize("name", sorted(model_presets()))
def test_preset_has_source_and_family(name: str) -> None:
    m = model_presets()[name]
    assert m.name == name
    assert name == name.lower() and " " not in name and "_" not in name
    assert m.source.strip(), f"{name}: empty source"
    assert m.family and m.family != "custom"


def test_aliases_are_unique_and_resolve() -> None:
    presets = model_presets()
    seen: dict[str, str] = {n: n for n in presets}
    for name, m in presets.items():
        for a in m.aliases:
            key = a.lower()
            assert key not in seen, f"alias {a!r} of {name} clashes with {seen.get(key)}"
            seen[key] = name
            assert get_model(a).name == name


@pytest.mark.parametrize(
    "alias,name",
    [
        ("gpt2", "gpt2-124m"),
        ("gpt2-medium", "gpt2-355m"),
        ("gpt2-large", "gpt2-774m"),
        ("gpt2-xl", "gpt2-1.5b"),
        ("GPT3", "gpt3-175b"),
        ("bert-base-uncased", "bert-base"),
        ("bert-large-uncased", "bert-large"),
        ("llama-2-7b", "llama2-7b"),
        ("Meta-Llama-3-8B", "llama3-8b"),
        ("mistral-7b-v0.1", "mistral-7b"),
        ("mixtral-8x7b-v0.1", "mixtral-8x7b"),
        ("llama_30b", "llama-33b"),
    ],
)
def test_common_aliases(alias: str, name: str) -> None:
    assert get_model(alias).name == name


def test_unknown_model_suggests() -> None:
    with pytest.raises(UnknownPresetError):
        get_model("gpt2-125m-nonexistent")


def test_training_metadata_is_consistent() -> None:
    for name, m in model_presets().items():
        if m.global_batch_tokens is not None:
            assert m.seq_len is not None, name
            assert m.global_batch_tokens >= m.seq_len, name
        if m.tokens is not None and m.global_batch_tokens is not None:
            assert m.tokens > 1000 * m.global_batch_tokens, name
