"""`-m org/name` offline: a shipped preset listing the id first, then the config.json in the local
Hugging Face cache (models--org--name/refs/main → snapshots/<commit>/config.json), never the network;
otherwise one line naming the cache folder and how to pass a path."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from trilemma.errors import InputError
from trilemma.estimate.params import param_counts
from trilemma.resolve import resolve_model

COMMIT = "4e20de362430cd3b72f300e6b0f18e50e7166e08"
# the shape of HuggingFaceTB/SmolLM2-135M's config.json, under an id no preset lists
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
}
REPO = "someone/smol-copy"


def _cache(root: Path, repo: str, config: dict) -> Path:
    """The Hub cache layout huggingface_hub writes for one file of one repository."""
    folder = root / ("models--" + repo.replace("/", "--"))
    snap = folder / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(COMMIT, encoding="utf-8")
    return snap / "config.json"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """HF_HUB_OFFLINE set and every socket connection refused and recorded."""
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network unreachable (test)")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


def test_hub_id_in_the_local_cache_resolves_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[object]
) -> None:
    path = _cache(tmp_path, REPO, CONFIG)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    model, how = resolve_model(REPO)
    assert model.name == REPO
    assert str(path) in how
    assert param_counts(model).total == 134_515_008  # SmolLM2-135M's count
    assert no_network == []


def test_hf_home_is_read_when_hub_cache_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[object]
) -> None:
    _cache(tmp_path / "hub", REPO, CONFIG)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert resolve_model(REPO)[0].n_layers == 30
    assert no_network == []


def test_shipped_preset_wins_over_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[object]
) -> None:
    # a cached file for the same id with another shape: the preset listing the id is used
    _cache(tmp_path, "meta-llama/Llama-3.2-1B", {**CONFIG, "num_hidden_layers": 2})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    model, how = resolve_model("meta-llama/Llama-3.2-1B")
    assert (model.name, how) == ("llama3.2-1b", "preset llama3.2-1b")
    assert no_network == []


def test_uncached_hub_id_is_refused_in_one_line_naming_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[object]
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(InputError) as err:
        resolve_model("nobody/not-cached-7b")
    text = str(err.value)
    assert "\n" not in text
    assert "'nobody/not-cached-7b'" in text and str(tmp_path) in text
    assert "path/to/config.json" in text
    assert no_network == []
